"""Drafter plan: the layer-id rule, mask and stop ids, checks against drafters, the emitted configs.

The spreading rule is SGLang's ``build_target_layer_ids`` (sglang 0.5.23,
srt/speculative/dflash_utils.py L348); the published Kimi-K2.5 DFlash drafter taps 6 layers,
[1, 12, 24, 35, 47, 58] over 61, with 6 draft layers and block 8, and its EAGLE-3 drafter's
``eagle_aux_hidden_state_layer_ids`` are [1, 29, 57] (tests/data/families/kimi-k2.5-with-drafters.json).
The defaults are the other published drafters': 5 taps, 5 layers, block 16 (SpecForge's
configs/qwen3-8b-dflash.json: [1, 9, 17, 25, 33] over Qwen3-8B's 36 layers).
Per engine (engine_conventions.py, checked against both engines' sources in
test_engine_conventions.py): SGLang reads EAGLE-3 ids as written, vLLM wants them + 1 at the top
level; SGLang's draft tokens are the block size, vLLM's num_speculative_tokens the block size - 1.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from introspect.analysis.profile import build_profile
from introspect.analysis.serving.drafter_config import choose_engine
from introspect.analysis.serving.drafter_plan import eagle3_layer_ids, reshape_dflash, spread_layer_ids
from introspect.documents.profile_architecture import DflashPlan
from introspect.documents.profile_serving import Engine, Engines
from tests.conftest import run_cli
from tests.golden.cases import DATA, GOLDEN, config_raw

KIMI_WITH_DRAFTERS = json.loads((DATA / "families" / "kimi-k2.5-with-drafters.json").read_text())


def test_spreading_rule_reproduces_the_published_kimi_drafter() -> None:
    # round(1 + i * 57 / 5) for i = 0..5: 1, 12.4, 23.8, 35.2, 46.6, 58.
    assert spread_layer_ids(61, 6) == [1, 12, 24, 35, 47, 58]
    assert spread_layer_ids(61, 1) == [30]
    assert spread_layer_ids(36, 5) == [1, 9, 17, 25, 33]  # Qwen3-8B, 5 taps: 1 + i * 8, as the published drafter
    assert spread_layer_ids(61, 5) == [1, 15, 30, 44, 58]  # round(1 + i * 57 / 4): 15.25, 29.5 -> 30 (half to even)
    assert eagle3_layer_ids(61) == [1, 29, 57]
    with pytest.raises(ValueError):
        spread_layer_ids(3, 2)
    with pytest.raises(ValueError, match="would repeat a layer"):
        spread_layer_ids(8, 6)  # only layers 1..5 to tap


def _profile_with(drafters: list) -> dict:
    raw = config_raw("Kimi-K2.5", KIMI_WITH_DRAFTERS["config"])
    raw["drafters"] = drafters
    return build_profile(raw)


def test_published_drafters_match_their_target() -> None:
    profile = _profile_with(KIMI_WITH_DRAFTERS["drafters"])
    plan = profile["architecture"]["speculative"]["drafter_plan"]
    dflash = plan["dflash"]
    assert (dflash["draft_taps"], dflash["draft_layers"], dflash["block_size"]) == (5, 5, 16)
    assert dflash["target_layer_ids"] == [1, 15, 30, 44, 58]
    assert dflash["hidden_states_indices"] == [2, 16, 31, 45, 59]
    # Taps and depth apart: the published Kimi-K2.5 drafter's shape (6 taps, 6 layers, block 8).
    published = reshape_dflash(DflashPlan.model_validate(dflash), 6, 6, 8)
    assert published.target_layer_ids == [1, 12, 24, 35, 47, 58] and published.hidden_states_indices[0] == 2
    assert (published.draft_taps, published.draft_layers, published.block_size) == (6, 6, 8)
    assert published.mask_token == DflashPlan.model_validate(dflash).mask_token  # the shape only
    eight_deep = reshape_dflash(DflashPlan.model_validate(dflash), 5, 8, 16)
    assert eight_deep.target_layer_ids == [1, 15, 30, 44, 58]  # 8 layers, still 5 taps
    assert plan["eagle3"]["aux_layer_ids"] == [1, 29, 57] and plan["eagle3"]["hidden_states_indices"] == [2, 30, 58]
    assert (dflash["hidden_size"], dflash["vocab_size"]) == (7168, 163840)
    assert "0-based decoder-layer outputs" in plan["convention"] and "vLLM" in plan["convention"]
    assert not [f for f in profile["findings"] if f["code"] == "drafter-mismatch"]


def test_target_fields_for_the_drafter_config() -> None:
    fields = _profile_with([])["architecture"]["speculative"]["drafter_plan"]
    target, notes = fields["target_fields"], fields["target_field_notes"]
    # Kimi-K2.5's text_config: 64 heads, MLA values 128 wide, FFN 18432, yarn over theta 50000, 262144 positions.
    assert (target["num_attention_heads"], target["num_key_value_heads"], target["head_dim"]) == (64, 64, 128)
    assert (target["intermediate_size"], target["max_position_embeddings"]) == (18432, 262144)
    assert target["rope_theta"] == 50000.0 and target["rope_scaling"]["type"] == "yarn"
    assert (target["rms_norm_eps"], target["hidden_act"], target["dtype"]) == (1e-05, "silu", "bfloat16")
    assert "MLA target" in notes["head_dim"] and "Kimi-K2.5-DFlash: 8" in notes["num_key_value_heads"]


def test_a_pure_ssm_target_has_no_attention_fields() -> None:
    config = json.loads((DATA / "realconfigs" / "falcon-mamba-7b" / "config.json").read_text())
    plan = build_profile(config_raw("falcon-mamba-7b", config))["architecture"]["speculative"]["drafter_plan"]
    assert plan["target_fields"]["num_attention_heads"] is None
    assert "training choice" in plan["target_field_notes"]["num_attention_heads"]


def _engine(name: str, version: str) -> Engine:
    """An engine the probe found whose sources were not read: only its name and version are known."""
    return Engine(name=name, version=version, location=None, layout="version-only", notes=[],
                  registered_architectures=None, architecture=None, text_architecture=None, speculative=None,
                  drafters=[], generic_drafters=[], quantization=None)


def test_engine_choice() -> None:
    def section(*names: str) -> Engines:
        return Engines(probed=True, searched=[], engines=[_engine(n, v) for n, v in
                                                          (("sglang", "0.5.23"), ("vllm", "0.33.0")) if n in names])

    conv, why = choose_engine(section("vllm"), None)
    assert (conv.engine, conv.version, conv.known) == ("vllm", "0.33.0", True)
    assert why == "vllm 0.33.0 is the engine installed on the probed host"
    conv, why = choose_engine(section("sglang", "vllm"), None)
    assert conv.engine == "sglang" and why.startswith("both SGLang and vLLM are installed") and "--engine vllm" in why
    conv, why = choose_engine(section(), None)
    assert conv.engine == "sglang" and why.startswith("the probe found neither") and not conv.known
    conv, why = choose_engine(section("sglang"), "vllm")
    assert conv.engine == "vllm" and why == "--engine vllm (not installed on the probed host)"
    conv, why = choose_engine(None, None)
    assert conv.engine == "sglang" and why.startswith("the profile has no engine facts")
    conv, _ = choose_engine(Engines(probed=True, searched=[], engines=[_engine("sglang", "0.6.1")]), None)
    assert not conv.known and "sglang 0.6.1 is not in" in str(conv.unknown_reason())


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


def test_emit_dflash_config_from_a_saved_profile(saved_profile: Path, tmp_path: Path) -> None:
    out = tmp_path / "dflash.json"
    result = run_cli("plan", str(saved_profile), "--gpus", "8", "--gpu-mem", "141GiB",
                     "--emit-drafter-config", "dflash", str(out))
    assert "Traceback" not in result.stderr and f"wrote a dflash drafter config for sglang 0.5.23 to {out}" in result.stderr
    config = json.loads(out.read_text())
    assert config["architectures"] == ["DFlashDraftModel"] and config["auto_map"] == {"AutoModel": "dflash.DFlashDraftModel"}
    assert (config["hidden_size"], config["vocab_size"], config["num_target_layers"]) == (7168, 163840, 61)
    assert config["num_hidden_layers"] == 5 and config["block_size"] == 16 and config["layer_types"] == ["full_attention"] * 5
    assert config["dflash_config"] == {"target_layer_ids": [1, 15, 30, 44, 58], "mask_token_id": 163838,
                                       "mask_token": "[UNK]"}
    assert config["introspect"]["stop_ids"] == [163585, 163586]
    assert config["introspect"]["target_architecture"] == "KimiK25ForConditionalGeneration"
    assert config["introspect"]["serving"] == ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path",
                                               "DRAFTER_DIR", "--speculative-num-draft-tokens", "16"]


def test_the_published_kimi_drafter_is_reproduced(saved_profile: Path, tmp_path: Path) -> None:
    """--draft-taps 6 --draft-layers 6 --block-size 8 writes the published Kimi-K2.5 DFlash drafter's config,
    key for key, but for its 8 KV heads (a training choice: the MLA target's config says 64)."""
    out = tmp_path / "k25-dflash.json"
    run_cli("plan", str(saved_profile), "--gpus", "8", "--gpu-mem", "141GiB", "--emit-drafter-config", "dflash",
            str(out), "--draft-taps", "6", "--draft-layers", "6", "--block-size", "8")
    config = json.loads(out.read_text())
    published = KIMI_WITH_DRAFTERS["drafters"][0]["config"]
    differ = {key: (config.get(key), value) for key, value in published.items() if config.get(key) != value}
    assert differ == {"num_key_value_heads": (64, 8),
                      "dflash_config": (published["dflash_config"] | {"mask_token": "[UNK]"}, published["dflash_config"])}


def test_plan_json_states_each_engines_ids_and_flags(saved_profile: Path) -> None:
    drafters = {}
    for engine in ("sglang", "vllm"):
        result = run_cli("plan", str(saved_profile), "--gpus", "8", "--gpu-mem", "141GiB", "--json", "--engine", engine)
        drafters[engine] = result.json()["drafter"]
    sglang, vllm = drafters["sglang"], drafters["vllm"]
    assert sglang["conventions"] == "sglang 0.5.23" and vllm["conventions"] == "vllm 0.33.0"
    assert sglang["dflash"]["target_layer_ids"] == vllm["dflash"]["target_layer_ids"] == [1, 15, 30, 44, 58]
    assert sglang["eagle3"]["aux_layer_ids"] == [1, 29, 57] and vllm["eagle3"]["aux_layer_ids"] == [2, 30, 58]
    assert sglang["eagle3"]["ids_key"] == "eagle_config.eagle_aux_hidden_state_layer_ids"
    assert vllm["eagle3"]["ids_key"] == "eagle_aux_hidden_state_layer_ids"
    assert "llama.py#L939" in sglang["eagle3"]["ids_convention"]
    assert (sglang["dflash"]["serving"]["draft_tokens"], vllm["dflash"]["serving"]["draft_tokens"]) == (16, 15)
    assert vllm["dflash"]["serving"]["args"] == [
        "--speculative-config", '{"method": "dflash", "model": "DRAFTER_DIR", "num_speculative_tokens": 15}']
    assert (sglang["dflash"]["mask_token"], sglang["dflash"]["mask_token_id"]) == ("[UNK]", 163838)
    assert vllm["eagle3"]["serving"]["draft_tokens"] is None  # vLLM has no default and the drafter fixes none
    assert sglang["choice"] == "--engine sglang (not installed on the probed host)" and not sglang["conventions_known"]


def test_emit_eagle3_config_per_engine(saved_profile: Path, tmp_path: Path) -> None:
    configs = {}
    for engine in ("sglang", "vllm"):
        out = tmp_path / f"eagle3-{engine}.json"
        run_cli("plan", str(saved_profile), "--gpus", "8", "--gpu-mem", "96GiB", "--emit-drafter-config", "eagle3",
                str(out), "--engine", engine)
        configs[engine] = json.loads(out.read_text())
    sglang, vllm = configs["sglang"], configs["vllm"]
    assert sglang["architectures"] == ["LlamaForCausalLMEagle3"] and sglang["draft_vocab_size"] == 32000
    assert sglang["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 29, 57]
    assert "eagle_aux_hidden_state_layer_ids" not in sglang  # vLLM would read a top-level list as given
    assert vllm["eagle_aux_hidden_state_layer_ids"] == vllm["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [2, 30, 58]
    assert (vllm["num_attention_heads"], vllm["head_dim"], vllm["intermediate_size"]) == (64, 128, 18432)


def test_probe_emits_a_drafter_config(kimi_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "eagle3.json"
    result = run_cli("probe", "--model", str(kimi_model), "--no-tokenizer", "--json",
                     "--emit-drafter-config", "eagle3", str(out), "--engine", "vllm")
    assert result.json()["architecture"]["num_layers"] == 61
    config = json.loads(out.read_text())
    assert config["eagle_aux_hidden_state_layer_ids"] == [2, 30, 58] and config["introspect"]["engine"] == "vllm 0.33.0"
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
    taps = run_cli("plan", str(saved_profile), "--gpus", "8", "--gpu-mem", "80GiB", "--draft-taps", "60")
    assert_clean_error(taps, 2, "--draft-taps 60", "would repeat a layer")
    assert f"fix: introspect plan {saved_profile} --draft-taps 5" in taps.stderr
