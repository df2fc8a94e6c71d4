"""Drafter plan: the layer-id rule, mask and stop ids, checks against drafters, the config skeleton.

The spreading rule is SGLang's ``build_target_layer_ids`` (sglang 0.5.23,
srt/speculative/dflash_utils.py); the published Kimi-K2.5 DFlash drafter's
``target_layer_ids`` are [1, 12, 24, 35, 47, 58] over 61 layers, and its EAGLE-3
drafter's ``eagle_aux_hidden_state_layer_ids`` [1, 29, 57]
(tests/data/families/kimi-k2.5-with-drafters.json).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from introspect.analysis.profile import build_profile
from introspect.analysis.serving.drafter_plan import eagle3_layer_ids, spread_layer_ids
from tests.conftest import run_cli
from tests.golden.cases import DATA, GOLDEN, config_raw

KIMI_WITH_DRAFTERS = json.loads((DATA / "families" / "kimi-k2.5-with-drafters.json").read_text())


def test_spreading_rule_reproduces_the_published_kimi_drafter() -> None:
    # round(1 + i * 57 / 5) for i = 0..5: 1, 12.4, 23.8, 35.2, 46.6, 58.
    assert spread_layer_ids(61, 6) == [1, 12, 24, 35, 47, 58]
    assert spread_layer_ids(61, 1) == [30]
    assert spread_layer_ids(36, 5) == [1, 9, 17, 25, 33]  # 36-layer target, 5 draft layers: 1 + i * 8
    assert eagle3_layer_ids(61) == [1, 29, 57]
    with pytest.raises(ValueError):
        spread_layer_ids(3, 2)


def _profile_with(drafters: list) -> dict:
    raw = config_raw("Kimi-K2.5", KIMI_WITH_DRAFTERS["config"])
    raw["drafters"] = drafters
    return build_profile(raw)


def test_published_drafters_match_their_target() -> None:
    profile = _profile_with(KIMI_WITH_DRAFTERS["drafters"])
    plan = profile["architecture"]["speculative"]["drafter_plan"]
    assert plan["dflash"]["target_layer_ids"] == [1, 12, 24, 35, 47, 58]
    assert plan["dflash"]["hidden_states_indices"] == [2, 13, 25, 36, 48, 59]
    assert plan["eagle3"]["aux_layer_ids"] == [1, 29, 57] and plan["eagle3"]["hidden_states_indices"] == [2, 30, 58]
    assert (plan["dflash"]["hidden_size"], plan["dflash"]["vocab_size"]) == (7168, 163840)
    assert "0-based decoder-layer outputs" in plan["convention"]
    assert not [f for f in profile["findings"] if f["code"] == "drafter-mismatch"]


def test_a_drafter_for_another_target_is_a_finding() -> None:
    drafters = copy.deepcopy(KIMI_WITH_DRAFTERS["drafters"])
    drafters[0]["config"]["hidden_size"] = 4096
    drafters[0]["config"]["dflash_config"]["target_layer_ids"] = [1, 12, 24, 35, 47, 61]
    drafters[0]["config"]["dflash_config"]["mask_token_id"] = 200000
    found = [f for f in _profile_with(drafters)["findings"] if f["code"] == "drafter-mismatch"]
    assert len(found) == 1 and found[0]["severity"] == "warning"
    message = found[0]["message"]
    assert "/models/Kimi-K2.5-DFlash" in message and "hidden_size 4096, target 7168" in message
    assert "layer ids [61] outside the target's 0..60" in message
    assert "mask_token_id 200000 outside the vocab 163840" in message


def test_mask_and_stop_ids_from_the_tokenizer_and_generation_config() -> None:
    raw = json.loads((GOLDEN / "raw" / "kimi-k2.6-loaded.json").read_text())
    plan = build_profile(raw)["architecture"]["speculative"]["drafter_plan"]
    # No mask token in Kimi's tokenizer: [UNK] comes first, as in the published drafter.
    assert plan["dflash"]["mask_token"] == {"id": 163838, "token": "[UNK]", "kind": "unk"}
    # [EOS] from the tokenizer, <|im_end|> from generation_config.json's eos_token_id.
    assert plan["dflash"]["stop_ids"] == [163585, 163586] == plan["eagle3"]["stop_ids"]


@pytest.fixture(scope="module")
def saved_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    raw = json.loads((GOLDEN / "raw" / "kimi-k2.6-loaded.json").read_text())
    path = tmp_path_factory.mktemp("profile") / "profile.json"
    path.write_text(json.dumps(build_profile(raw)))
    return path


def test_emit_dflash_skeleton_from_a_saved_profile(saved_profile: Path, tmp_path: Path) -> None:
    out = tmp_path / "dflash.json"
    result = run_cli("plan", str(saved_profile), "--gpus", "8", "--gpu-mem", "141GiB",
                     "--emit-drafter-config", "dflash", str(out))
    assert "Traceback" not in result.stderr and f"wrote a dflash drafter config skeleton to {out}" in result.stderr
    config = json.loads(out.read_text())
    assert config["architectures"] == ["DFlashDraftModel"]
    assert (config["hidden_size"], config["vocab_size"], config["num_target_layers"]) == (7168, 163840, 61)
    assert config["num_hidden_layers"] == 6 and config["block_size"] == 8
    assert config["dflash_config"] == {"target_layer_ids": [1, 12, 24, 35, 47, 58], "mask_token_id": 163838,
                                       "mask_token": "[UNK]"}
    assert config["introspect"]["stop_ids"] == [163585, 163586]
    assert config["introspect"]["target_architecture"] == "KimiK25ForConditionalGeneration"


def test_emit_eagle3_skeleton_and_other_draft_layer_counts(saved_profile: Path, tmp_path: Path) -> None:
    eagle = tmp_path / "eagle3.json"
    run_cli("plan", str(saved_profile), "--gpus", "8", "--gpu-mem", "96GiB", "--emit-drafter-config", "eagle3",
            str(eagle))
    config = json.loads(eagle.read_text())
    assert config["architectures"] == ["LlamaForCausalLMEagle3"] and config["draft_vocab_size"] == 32000
    assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 29, 57]
    dflash = tmp_path / "dflash5.json"
    run_cli("plan", str(saved_profile), "--gpus", "8", "--gpu-mem", "96GiB", "--emit-drafter-config", "dflash",
            str(dflash), "--draft-layers", "5")
    config = json.loads(dflash.read_text())
    # round(1 + i * 57 / 4): 1, 15.25, 29.5, 43.75, 58; Python's round (as in SGLang) takes 29.5 to 30.
    assert config["num_hidden_layers"] == 5
    assert config["dflash_config"]["target_layer_ids"] == spread_layer_ids(61, 5) == [1, 15, 30, 44, 58]


def test_probe_emits_a_drafter_config(kimi_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "dflash.json"
    result = run_cli("probe", "--model", str(kimi_model), "--no-tokenizer", "--json",
                     "--emit-drafter-config", "dflash", str(out))
    assert result.json()["architecture"]["num_layers"] == 61
    config = json.loads(out.read_text())
    assert config["dflash_config"]["target_layer_ids"] == [1, 12, 24, 35, 47, 58]
    # The tokenizer is read from its files (not loaded): [EOS] plus generation_config's <|im_end|>.
    assert config["introspect"]["stop_ids"] == [163585, 163586]


def test_plan_usage_errors(saved_profile: Path, tmp_path: Path) -> None:
    from tests.conftest import assert_clean_error

    assert_clean_error(run_cli("plan", str(saved_profile)), 2, "no GPU facts", "--gpus")
    assert_clean_error(run_cli("plan", str(saved_profile), "--gpus", "8", "--gpu-mem", "lots"), 2,
                       "not a memory size")
    bogus = tmp_path / "raw.json"
    bogus.write_text(json.dumps({"schema": "introspect.raw/v1"}))
    assert_clean_error(run_cli("plan", str(bogus), "--gpus", "8", "--gpu-mem", "80GiB"), 2, "not an introspect profile")
