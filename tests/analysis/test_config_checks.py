"""The issue's own silent-wrong-number cases, one by one, on real configs: each bad value is
null plus a config-invalid-value finding naming file, key and value, and voids the figures
that depend on it; an absent key with a documented config-class default uses it, named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from introspect.analysis.architecture import analyze_architecture

REAL = Path(__file__).resolve().parents[1] / "data" / "realconfigs"
PATH = "/models/m/config.json"


def _config(name: str) -> dict:
    return json.loads((REAL / name / "config.json").read_text())


@pytest.mark.parametrize(("name", "key", "bad", "voids"), [
    ("llama-3.1-8b", "hidden_size", "4096", ["attention", "kv_cache", "params"]),
    ("llama-3.1-8b", "hidden_size", 0, ["attention", "kv_cache", "params"]),
    ("llama-3.1-8b", "hidden_size", -1, ["attention", "kv_cache", "params"]),
    ("llama-3.1-8b", "hidden_size", 1.5, ["attention", "kv_cache", "params"]),
    ("llama-3.1-8b", "hidden_size", 1e308, ["attention", "kv_cache", "params"]),
    ("llama-3.1-8b", "hidden_size", [4096], ["attention", "kv_cache", "params"]),
    ("llama-3.1-8b", "num_key_value_heads", "8", ["attention", "kv_cache", "params"]),  # was read as MHA
    ("qwen3-30b-a3b", "num_experts", "128", ["moe", "params"]),  # was a 3 B dense model
    ("qwen3-next-80b-a3b-thinking", "full_attention_interval", "4",  # was pure attention
     ["attention", "kv_cache", "layers", "moe", "params"]),
])
def test_a_bad_value_is_null_with_a_finding(name: str, key: str, bad: object, voids: list[str]) -> None:
    config = _config(name)
    config[key] = bad
    arch, findings = analyze_architecture(config, config_path=PATH)
    named = [f for f in findings if f["code"] == "config-invalid-value"]
    assert [f["key"] for f in named] == [key]
    assert named[0]["severity"] == "error" and named[0]["voids"] == voids
    assert PATH in named[0]["message"] and key in named[0]["message"] and json.dumps(bad) in named[0]["message"]
    assert arch["invalid_config"]["unknown"] == {figure: [key] for figure in voids}
    assert arch["kv_cache"] is None if "kv_cache" in voids else arch["kv_cache"] is not None
    assert arch["params"]["config_estimate"]["total"] is None
    if "attention" in voids:
        assert arch["attention"]["type"] is None and arch["attention"]["num_kv_heads"] is None
    if "moe" in voids:
        assert arch["moe"]["is_moe"] is None
    if "layers" in voids:
        assert arch["layers"]["pure_attention"] is None


def test_deleted_heads_without_a_default_leave_the_kv_cache_unknown() -> None:
    config = _config("qwen3-30b-a3b")
    del config["num_attention_heads"]
    arch, findings = analyze_architecture(config, config_path=PATH)
    assert arch["kv_cache"] is None and arch["params"]["config_estimate"]["total"] is None
    assert any(f["code"] == "attention-geometry-unknown" for f in findings)


def test_an_absent_key_takes_the_config_class_default_and_names_it() -> None:
    # LlamaConfig(num_attention_heads=32) is the documented default (configuration_llama.py).
    config = _config("llama-3.1-8b")
    del config["num_attention_heads"]
    arch, findings = analyze_architecture(config, config_path=PATH)
    assert arch["evidence"]["attention"]["default(num_attention_heads)"] == 32
    assert arch["attention"]["num_heads"] == 32 and arch["kv_cache"]["bytes_per_token"] > 0
    assert not [f for f in findings if f["code"] in ("config-invalid-value", "attention-geometry-unknown")]


def test_clean_real_configs_have_no_invalid_values() -> None:
    for path in sorted(REAL.glob("*/config.json")):
        arch, findings = analyze_architecture(json.loads(path.read_text()), config_path=PATH)
        assert "invalid_config" not in arch, path
        assert not [f for f in findings if f["code"] == "config-invalid-value"], path
