"""A stand-in tokenizer is not loaded: no facts, no mask or stop ids come from it.

In a directory without tokenizer files (an intermediate training checkpoint) transformers v5
builds a tokenizer from config.json's ``model_type`` alone: for a Qwen-family config, a
Qwen2Tokenizer whose whole vocabulary is ``{"<|endoftext|>": 0}``. Real inputs: the Qwen3-30B-A3B
config of tests/data/realconfigs, probed by the tokenizer and preflight tasks with the
transformers of this venv (one interpreter for every directory); tortoise-tts' real
tokenizer.json (tests/data/tokenizers) as a tokenizer that is the model's; the saved probe of the
Kimi fixture (tests/data/golden/raw) for the mask-id collision of a drafter beside the model.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from introspect.analysis.profile import build_profile
from introspect.analysis.tokenizer.autotokenizer_verdict import OWN_MIN, SHARE, stand_in_reason
from introspect.checks.health import check_tokenizer
from introspect.checks.preflight import evaluate
from introspect.cli.fix_lines import is_command
from introspect.inventory import VenvEntry
from introspect.remote.facts.model.files import collect_files
from introspect.remote.facts.tokenizer.tokenizer_files import collect_tokenizer_files
from tests.golden.cases import DATA, GOLDEN, config_raw
from tests.tokenizer.conftest import probe_env

QWEN_CONFIG = DATA / "realconfigs" / "qwen3-30b-a3b" / "config.json"
TORTOISE = DATA / "tokenizers" / "tortoise-tts" / "tokenizer.json"
MARK = "\n@@STAND-IN@@"
# Both tasks over every directory in one interpreter: transformers is imported once.
SCRIPT = (
    "import json, sys\n"
    "from introspect.remote.tasks import preflight, tokenizer\n"
    "out = {}\n"
    "for path in json.loads(sys.stdin.read()):\n"
    "    out[path] = {'probe': tokenizer.run({'model_path': path, 'trust_remote_code': False, 'sample': False}),\n"
    "                 'preflight': preflight.run({'model_path': path, 'parts': ['tokenizer'],\n"
    "                                             'trust_remote_code': False, 'decode_budget_s': 5})}\n"
    f"sys.stdout.write({MARK!r} + json.dumps(out))\n"
)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if importlib.util.find_spec("transformers") is None:
        pytest.skip("transformers is not installed in this venv")
    root = tmp_path_factory.mktemp("stand-in")
    qwen, tortoise = root / "qwen3-ckpt-1000", root / "tortoise"
    qwen.mkdir()
    tortoise.mkdir()
    shutil.copyfile(QWEN_CONFIG, qwen / "config.json")  # config.json only: no tokenizer file
    shutil.copyfile(TORTOISE, tortoise / "tokenizer.json")
    # Loaded as the plain tokenizers serialization it is (the class named, its own specials), with
    # an embedding sized to its 255 tokens: a tokenizer that fills its model's vocabulary.
    (tortoise / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "eos_token": "[STOP]"}))
    (tortoise / "config.json").write_text(json.dumps({"model_type": "gpt2", "vocab_size": 255,
                                                      "bos_token_id": None, "eos_token_id": 0}))
    return {"qwen": qwen, "tortoise": tortoise}


@pytest.fixture(scope="module")
def results(dirs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    cache = tmp_path_factory.mktemp("stand-in-cache")
    proc = subprocess.run([sys.executable, "-c", SCRIPT], input=json.dumps([str(p) for p in dirs.values()]),
                          capture_output=True, text=True, timeout=180, env=probe_env(cache), cwd=str(cache))
    assert MARK in proc.stdout, (proc.returncode, proc.stderr[-4000:])
    by_path = json.loads(proc.stdout.split(MARK, 1)[1])
    return {name: by_path[str(path)] for name, path in dirs.items()}


def _profile(model: Path, probe: dict[str, Any]) -> dict[str, Any]:
    """The profile of a real directory: its files and tokenizer-file facts, and the real probe."""
    raw = config_raw(model.name, None)
    files, _ = collect_files(str(model))
    tokenizer_files, _ = collect_tokenizer_files(str(model))
    raw["target"]["model_path"] = str(model)
    raw.update(files=files, tokenizer_files=tokenizer_files, tokenizer_probe=probe,
               options={"remote_code": False, "load_tokenizer": True})
    return build_profile(raw)


def _codes(profile: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["code"]: f for f in profile["findings"]}


def test_a_config_only_qwen_directory_gets_a_stand_in_and_no_ids(dirs: dict[str, Path],
                                                                results: dict[str, Any]) -> None:
    probe = results["qwen"]["probe"]
    # What transformers did: it "loaded" a one-token Qwen2Tokenizer whose eos/pad/unk are id 0.
    assert probe["loaded"] is True and probe["class"] == "Qwen2Tokenizer" and probe["len"] == 1
    assert probe["eos"] == {"token": "<|endoftext|>", "id": 0}
    profile = _profile(dirs["qwen"], probe)
    tok = profile["tokenizer"]
    block = tok["autotokenizer"]
    assert block["ok"] is True and block["stand_in"] is True  # ok: what AutoTokenizer did
    reason = block["stand_in_reason"]
    assert "no vocabulary of its own" in reason and "below 1/100 of config.json's vocab_size 151936" in reason
    assert "no tokenizer file" in reason
    # Nothing of the stand-in is taken: the facts are the files', and there are none.
    assert tok["loaded"] is False and tok["source"] == "files"
    assert (tok["len"], tok["vocab_size"], tok["eos"], tok["pad"], tok["unk"]) == (None, None, None, None, None)
    assert tok["special_tokens"] == []
    found = _codes(profile)["tokenizer-stand-in"]
    assert found["severity"] == "warning" and "Qwen2Tokenizer" in found["message"]
    assert found["fix"].startswith(f"ls -la {dirs['qwen']}  # copy ") and is_command(found["fix"].split("  #")[0])
    plan = profile["architecture"]["speculative"]["drafter_plan"]
    for kind in ("dflash", "eagle3"):
        assert plan[kind]["stop_ids"] is None and "stand-in" in plan[kind]["stop_ids_reason"]
    assert plan["dflash"]["mask_token"] is None and reason in plan["dflash"]["mask_token_reason"]
    # The layer ids do not depend on the tokenizer: the same as with no tokenizer probe at all.
    bare = build_profile(config_raw("qwen3-30b-a3b", json.loads(QWEN_CONFIG.read_text())))
    assert plan["dflash"]["target_layer_ids"] == bare["architecture"]["speculative"]["drafter_plan"]["dflash"][
        "target_layer_ids"]


def test_health_and_preflight_fail_the_stand_in_with_the_same_judgement(dirs: dict[str, Path],
                                                                        results: dict[str, Any]) -> None:
    model = str(dirs["qwen"])
    health = check_tokenizer(VenvEntry(path="/venv"), model, results["qwen"]["probe"])
    assert health.status == "fail" and "stand-in Qwen2Tokenizer" in health.message
    assert health.evidence["stand_in"] is True and "no vocabulary of its own" in health.evidence["stand_in_reason"]
    assert health.fix is not None and health.fix.startswith(f"ls -la {model}  # copy ")
    checks = {c.name: c for c in evaluate(results["qwen"]["preflight"], min_free_gb=1)}
    assert checks["tokenizer"].status == "fail" and checks["tokenizer"].evidence["stand_in"] is True
    # Preflight also knows config.json's vocab_size: both tests fire.
    assert "below 1/100 of config.json's vocab_size 151936" in checks["tokenizer"].evidence["stand_in_reason"]
    assert checks["tokenizer"].fix == health.fix.replace("run health again", "run preflight again")
    for name in ("chat-template", "loss-masks", "mask-token", "ids"):  # nothing judged on the stand-in's ids
        assert checks[name].status == "skipped" and "stand-in" in checks[name].message


def test_a_real_tokenizer_is_not_a_stand_in(dirs: dict[str, Path], results: dict[str, Any]) -> None:
    probe = results["tortoise"]["probe"]
    assert probe["loaded"] is True and probe["len"] == 255
    profile = _profile(dirs["tortoise"], probe)
    tok = profile["tokenizer"]
    assert tok["autotokenizer"]["stand_in"] is False and tok["autotokenizer"]["stand_in_reason"] is None
    assert tok["loaded"] is True and tok["len"] == 255
    assert "tokenizer-stand-in" not in _codes(profile)
    health = check_tokenizer(VenvEntry(path="/venv"), str(dirs["tortoise"]), probe)
    assert health.status == "pass"
    checks = {c.name: c for c in evaluate(results["tortoise"]["preflight"], min_free_gb=1)}
    assert "stand_in" not in checks["tokenizer"].evidence and checks["ids"].status != "skipped"


def test_the_two_tests_and_their_bounds() -> None:
    # A tokenizer with OWN_MIN tokens of its own beyond its specials is not judged on that test...
    named = {"bos": {"token": "<s>", "id": 0}, "eos": {"token": "</s>", "id": 1}}
    assert stand_in_reason({"len": 2 + OWN_MIN, **named}) is None
    assert "no vocabulary of its own" in str(stand_in_reason({"len": 1 + OWN_MIN, **named}))
    # ... nor on the share when it fills 1/SHARE of the embedding: 320 tokens for 32000 rows.
    assert stand_in_reason({"len": 320}, config_vocab=320 * SHARE) is None
    assert "below 1/100" in str(stand_in_reason({"len": 319}, config_vocab=320 * SHARE))
    # The file listing only names what is missing: it never decides alone (CANINE, Perceiver and
    # ESM-C load from no file by design).
    assert stand_in_reason({"len": 262}, config_vocab=262, backing=[]) is None


def _kimi_with_drafter(mask_id: int) -> dict[str, Any]:
    raw = json.loads((GOLDEN / "raw" / "kimi-k2.6-loaded.json").read_text())
    family = json.loads((DATA / "families" / "kimi-k2.5-with-drafters.json").read_text())
    dflash = copy.deepcopy(family["drafters"][0])
    dflash["config"]["dflash_config"]["mask_token_id"] = mask_id
    raw["drafters"] = [dflash]
    return build_profile(raw)


def test_a_drafter_mask_id_on_an_ordinary_token_is_a_finding() -> None:
    # Id 1 is a text token of Kimi's tiktoken ranks: what a plan from a stand-in proposed.
    found = _codes(_kimi_with_drafter(1)).get("mask-token-collision")
    assert found is not None and found["severity"] == "warning"
    assert "mask_token_id 1 collides with a real token" in found["message"]
    assert "below the tokenizer's base vocabulary of 163840" in found["message"]
    assert found["fix"].startswith("# set dflash_config.mask_token_id to 163838 ([UNK])")
    # [UNK] (named) and a reserved special token are no collision.
    assert "mask-token-collision" not in _codes(_kimi_with_drafter(163838))
    assert "mask-token-collision" not in _codes(_kimi_with_drafter(163839))
