"""The issue's own silent-wrong-number cases, one by one, on real configs: each bad value is
null plus a config-invalid-value finding naming file, key and value, and voids the figures
that depend on it; an absent key with a documented config-class default uses it, named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from introspect.analysis.architecture.section import analyze_architecture
from introspect.remote.readers import JSON_CONSTANT_KEY

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


# -- validators accept what the family's config class accepts ------------------------------------

FAMILIES = Path(__file__).resolve().parents[1] / "data" / "families"


def _family(name: str) -> dict:
    return json.loads((FAMILIES / f"{name}.json").read_text())["config"]


def _clean(config: dict) -> tuple[dict, list[dict]]:
    arch, findings = analyze_architecture(config, config_path=PATH)
    assert "invalid_config" not in arch, arch.get("invalid_config")
    assert not [f for f in findings if f["code"] == "config-invalid-value"], findings
    return arch, findings


def _shared_params(arch: dict) -> int:
    return arch["params"]["breakdown"]["experts_shared"]


@pytest.mark.parametrize(("config", "key"), [
    # Qwen2MoeConfig.shared_expert_intermediate_size is a plain int (configuration_qwen2_moe.py line 97);
    # Qwen2MoeMLP keeps 0 as is (modeling_qwen2_moe.py line 127): 0-wide projections, no weight.
    (("real", "qwen2-57b-a14b"), "shared_expert_intermediate_size"),
    # Qwen3NextConfig line 114; Qwen3NextMLP keeps 0 (modeling_qwen3_next.py line 777).
    (("real", "qwen3-next-80b-a3b-thinking"), "shared_expert_intermediate_size"),
    # Qwen3-MoE configs carry a stray 0 most often; modeling_qwen3_moe.py has no shared expert at all.
    (("real", "qwen3-30b-a3b"), "shared_expert_intermediate_size"),
    # DeepseekV3MLP(intermediate_size=moe_intermediate_size * n_shared_experts) keeps 0
    # (modeling_deepseek_v3.py lines 109 and 211).
    (("real", "deepseek-v3"), "n_shared_experts"),
    # GraniteMoeHybridMLP of shared_intermediate_size 0: two 0-wide Linears
    # (modeling_granitemoehybrid.py lines 759-763; GraniteMoeShared builds none, modeling_granitemoeshared.py line 344).
    (("family", "granite-4.0-h-small"), "shared_intermediate_size"),
])
def test_a_shared_expert_width_or_count_of_0_is_no_shared_expert(config: tuple[str, str], key: str) -> None:
    kind, name = config
    clean = _config(name) if kind == "real" else _family(name)
    arch, _ = _clean(dict(clean) | {key: 0})
    before, _ = _clean(clean)
    assert arch["moe"]["is_moe"] is True and arch["moe"]["routed_experts"] == before["moe"]["routed_experts"]
    assert arch["moe"]["shared_experts"] == 0 and _shared_params(arch) == 0
    assert arch["params"]["config_estimate"]["total"] == (
        before["params"]["config_estimate"]["total"] - _shared_params(before))
    assert arch["kv_cache"] == before["kv_cache"]


def _nemotron_h_moe(**keys: object) -> dict:
    """Nemotron-H-8B's real config with its MLP layers made MoE (the Nemotron-3-Nano layout)."""
    config = _family("nemotron-h-8b")
    config["hybrid_override_pattern"] = config["hybrid_override_pattern"].replace("-", "E")
    config.update({"n_routed_experts": 128, "num_experts_per_tok": 6, "moe_intermediate_size": 1856,
                   "n_shared_experts": 1, "moe_shared_expert_intermediate_size": 3712}, **keys)
    return config


def test_nemotron_h_shared_expert_width_0_is_intermediate_size_not_none() -> None:
    # NemotronHMoE always builds NemotronHMLP(intermediate_size=moe_shared_expert_intermediate_size)
    # (modeling_nemotron_h.py line 733) and NemotronHMLP takes `intermediate_size or config.intermediate_size`
    # (line 644): 0 is a shared expert as wide as the dense MLP.
    zero, _ = _clean(_nemotron_h_moe(moe_shared_expert_intermediate_size=0))
    full, _ = _clean(_nemotron_h_moe(moe_shared_expert_intermediate_size=_family("nemotron-h-8b")["intermediate_size"]))
    assert zero["moe"]["shared_experts"] == 1 and _shared_params(zero) == _shared_params(full) > 0


def test_nemotron_h_never_reads_n_shared_experts() -> None:
    # configuration_nemotron_h.py line 134 declares n_shared_experts; modeling_nemotron_h.py never reads it.
    none, _ = _clean(_nemotron_h_moe(n_shared_experts=0))
    one, _ = _clean(_nemotron_h_moe())
    assert none["moe"]["shared_experts"] == one["moe"]["shared_experts"] == 1
    assert _shared_params(none) == _shared_params(one) > 0


def test_a_negative_shared_width_is_still_rejected() -> None:
    config = _config("qwen2-57b-a14b") | {"shared_expert_intermediate_size": -1}
    arch, findings = analyze_architecture(config, config_path=PATH)
    assert [f["key"] for f in findings if f["code"] == "config-invalid-value"] == ["shared_expert_intermediate_size"]
    assert arch["moe"]["is_moe"] is None


def _layer_types(config: dict) -> list[str]:
    return ["linear_attention" if (i + 1) % 4 else "full_attention" for i in range(config["num_hidden_layers"])]


@pytest.mark.parametrize(("name", "change"), [
    # Qwen3NextConfig.__post_init__ reads full_attention_interval only when layer_types is None
    # (configuration_qwen3_next.py lines 129-134): with layer_types, any value is accepted.
    ("qwen3-next-80b-a3b-thinking", lambda c: c | {"layer_types": _layer_types(c), "full_attention_interval": 0}),
    # Llama4TextConfig: moe_layers overrides interleave_moe_layer_step (configuration_llama4.py lines 175-185).
    ("llama-4-scout-17b-16e", lambda c: c | {"text_config": c["text_config"] | {
        "moe_layers": list(range(c["text_config"]["num_hidden_layers"])), "interleave_moe_layer_step": 0}}),
    # Qwen3MoeDecoderLayer: `config.num_experts > 0 and (layer_idx + 1) % config.decoder_sparse_step == 0`
    # (modeling_qwen3_moe.py line 311, modeling_qwen2_moe.py line 359): never evaluated without experts.
    ("qwen3-30b-a3b", lambda c: c | {"num_experts": 0, "decoder_sparse_step": 0}),
    # sliding_window 0 / null: no window. Qwen3MoeConfig `sliding_window: int | None` drops it unless
    # use_sliding_window (configuration_qwen3_moe.py line 110), and None is the plain causal mask
    # (modeling_qwen3_moe.py line 473).
    ("qwen3-30b-a3b", lambda c: c | {"sliding_window": 0}),
    ("qwen3-30b-a3b", lambda c: c | {"sliding_window": None}),
    # A dense Qwen3-MoE-class config: moe_intermediate_size 0 with no experts is never read.
    ("qwen3-30b-a3b", lambda c: c | {"num_experts": 0, "moe_intermediate_size": 0}),
])
def test_values_the_config_class_accepts_are_not_rejected(name: str, change: Any) -> None:
    before, _ = _clean(_config(name))
    arch, _ = _clean(change(_config(name)))
    assert arch["params"]["config_estimate"]["total"] is not None and arch["kv_cache"] is not None
    assert arch["attention"]["sliding_window"] == before["attention"]["sliding_window"] is None


def test_full_attention_interval_0_without_layer_types_is_still_rejected() -> None:
    # Without layer_types, Qwen3NextConfig computes (i + 1) % full_attention_interval: 0 raises
    # ZeroDivisionError (configuration_qwen3_next.py line 132), so the class refuses it too.
    config = _config("qwen3-next-80b-a3b-thinking") | {"full_attention_interval": 0}
    _arch, findings = analyze_architecture(config, config_path=PATH)
    assert [f["key"] for f in findings if f["code"] == "config-invalid-value"] == ["full_attention_interval"]


# -- NaN / Infinity: read as transformers reads them ----------------------------------------------

INF = {JSON_CONSTANT_KEY: "Infinity"}  # how the probe sends a bare Infinity of config.json


@pytest.mark.parametrize(("key", "value"), [
    # Mamba2Config / NemotronHConfig / BambaConfig / FalconH1Config / GraniteMoeHybridConfig default
    # time_step_limit to (0.0, float("inf")) (configuration_nemotron_h.py line 126); transformers 4 wrote
    # it as [0.0, Infinity] (nvidia/Nemotron-H-8B-Base-8K).
    ("time_step_limit", [0.0, INF]),
    ("final_logit_softcapping", INF),  # Gemma2Config / Gemma3TextConfig: float | None
    ("attn_logit_softcapping", INF),
    ("router_aux_loss_coef", {JSON_CONSTANT_KEY: "NaN"}),
    ("router_z_loss_coef", INF),
    ("router_jitter_noise", INF),
    ("rope_scaling", {"rope_type": "yarn", "factor": INF, "beta_fast": INF, "mscale": {JSON_CONSTANT_KEY: "-Infinity"}}),
    ("rope_theta", INF),
])
def test_a_bare_constant_no_verdict_needs_is_a_warning_not_a_void(key: str, value: object) -> None:
    config = _family("nemotron-h-8b")
    before, _ = _clean(config)
    arch, findings = _clean(config | {key: value})
    assert arch["params"] == before["params"] and arch["kv_cache"] == before["kv_cache"]
    assert arch["layers"] == before["layers"] and arch["attention"] == before["attention"]
    [warning] = [f for f in findings if f["code"] == "config-not-strict-json"]
    assert warning["severity"] == "warning" and warning["keys"][0].startswith(key)
    assert PATH in warning["message"] and "not strict JSON" in warning["message"] and key in warning["message"]


def test_transformers_5_float_tag_is_strict_json_and_no_warning() -> None:
    # configuration_utils.py to_json_string (line 1329) writes {"__float__": "Infinity"}; _decode_special_floats
    # (line 1167) reads it back as float("inf").
    config = _family("nemotron-h-8b") | {"time_step_limit": [0.0, {"__float__": "Infinity"}]}
    _arch, findings = _clean(config)
    assert not [f for f in findings if f["code"] == "config-not-strict-json"]


@pytest.mark.parametrize("value", [INF, {"__float__": "NaN"}, float("inf")])
def test_a_non_finite_number_a_verdict_needs_is_rejected_alone(value: object) -> None:
    config = _config("llama-3.1-8b") | {"num_key_value_heads": value}
    arch, findings = analyze_architecture(config, config_path=PATH)
    [named] = [f for f in findings if f["code"] == "config-invalid-value"]
    assert named["key"] == "num_key_value_heads" and named["reason"] == "not a finite number"
    assert named["value"] in ("Infinity", "NaN") and named["value"] in named["message"]
    assert arch["kv_cache"] is None and arch["layers"]["pure_attention"] is True  # the rest stands
    strict = [f for f in findings if f["code"] == "config-not-strict-json"]
    assert [f["keys"] for f in strict] == ([["num_key_value_heads"]] if value is INF else [])


def test_the_warning_names_nested_keys_of_a_wrapper() -> None:
    config = _config("kimi-k2.5")
    config["text_config"]["time_step_limit"] = [0.0, INF]
    _arch, findings = _clean(config)
    [warning] = [f for f in findings if f["code"] == "config-not-strict-json"]
    assert warning["keys"] == ["text_config.time_step_limit[1]"]
