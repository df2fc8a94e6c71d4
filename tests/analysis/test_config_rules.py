"""The config rules that a family derives in code, each against the contrast that shows the rule matters.

Every case starts from a real config in tests/data/realconfigs and changes the one key the
rule reads; the family code each rule comes from is named in introspect.analysis.architecture.families.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from introspect.analysis.architecture.section import analyze_architecture

REAL = Path(__file__).resolve().parents[1] / "data" / "realconfigs"


def real(folder: str) -> dict[str, Any]:
    return json.loads((REAL / folder / "config.json").read_text())


def arch_of(config: dict[str, Any]) -> dict[str, Any]:
    arch, findings = analyze_architecture(config)
    assert not [f for f in findings if f["severity"] == "error"], findings
    return arch


def test_nested_sub_config_blocks_are_read_and_cited():
    arch = arch_of(real("dbrx-instruct"))
    assert arch["attention"]["type"] == "GQA" and arch["attention"]["num_kv_heads"] == 8
    assert arch["evidence"]["attention"]["attn_config.kv_n_heads"] == 8
    assert arch["evidence"]["moe"]["ffn_config.moe_num_experts"] == 16
    # The same config with its blocks flattened away: the generic answer is dense MHA, a fifth of the size.
    flat = {k: v for k, v in real("dbrx-instruct").items() if k not in ("attn_config", "ffn_config")}
    dense = arch_of(flat)
    assert dense["attention"]["type"] == "MHA" and dense["moe"]["is_moe"] is False
    assert dense["kv_cache"]["bytes_per_token"] == 6 * arch["kv_cache"]["bytes_per_token"]


def test_unknown_family_marks_every_guessed_verdict_low():
    config = dict(real("qwen2-57b-a14b"), model_type="acme_moe")
    arch = arch_of(config)
    assert arch["confidence"]["level"] == "low"
    assert set(arch["confidence"]["verdicts"]) == {"layers", "attention", "moe", "params", "kv_cache"}
    assert arch["summary"]["confidence"].startswith("LOW: model_type 'acme_moe'")
    known = arch_of(real("qwen2-57b-a14b"))
    assert "confidence" not in known and "confidence" not in known["summary"]


def test_llama4_layer_types_follow_no_rope_layers_when_listed():
    config = real("llama-4-scout-17b-16e")
    flags = [1 if i % 2 else 0 for i in range(48)]  # NoPE (full) on even layers instead of every 4th
    config["text_config"]["no_rope_layers"] = flags
    pattern = arch_of(config)["layers"]["pattern"]
    assert pattern == ["chunked_attention" if f else "full_attention" for f in flags]
    # An empty list counts as absent (configuration_llama4.py: `no_rope_layers if no_rope_layers else default`).
    config["text_config"]["no_rope_layers"] = []
    assert arch_of(config)["layers"]["kinds"] == {"chunked_attention": 36, "full_attention": 12}


def test_llama4_moe_interleave_and_dense_width():
    arch = arch_of(real("llama-4-maverick-17b-128e"))
    assert arch["layers"]["ffn"] == ["moe" if i % 2 else "dense" for i in range(48)]
    breakdown = arch["params"]["breakdown"]
    assert breakdown["dense_ffn"] == 24 * 3 * 5120 * 16384  # intermediate_size_mlp, not intermediate_size
    assert breakdown["experts_shared"] == 24 * 3 * 5120 * 8192  # the implicit shared expert in every MoE layer


def test_cross_layer_attention_halves_the_cache_and_drops_kv_projections():
    cla = arch_of(real("hunyuan-large"))
    config = dict(real("hunyuan-large"), use_cla=False)
    plain = arch_of(config)
    assert plain["kv_cache"]["bytes_per_token"] == 2 * cla["kv_cache"]["bytes_per_token"]
    kv_proj = 2 * 6400 * 8 * 80
    assert plain["params"]["breakdown"]["attention"] - cla["params"]["breakdown"]["attention"] == 32 * kv_proj
    assert "32 layers reuse another layer's K/V" in cla["summary"]["attention"]


def test_shared_expert_under_the_singular_key_counts():
    with_shared = arch_of(real("hunyuan-large"))
    without = arch_of(dict(real("hunyuan-large"), num_shared_expert=0))
    assert (with_shared["moe"]["shared_experts"], without["moe"]["shared_experts"]) == (1, 0)
    # The symptom: without the shared expert the active count falls from ~52B to ~29B.
    assert round(with_shared["params"]["active"] / 1e9) == 51
    assert round(without["params"]["active"] / 1e9) == 29


def test_sparse_indexer_adds_its_keys_and_weights():
    sparse = arch_of(real("deepseek-v3.2-exp"))
    config = {k: v for k, v in real("deepseek-v3.2-exp").items() if not k.startswith("index_")}
    dense = arch_of(config)
    assert "sparse_indexer" not in dense["attention"]
    per_layer = sparse["kv_cache"]["per_kind"]["full_attention"]["bytes_per_token_per_layer"]
    # The indexer key as the engines cache it: 128 fp8 bytes + one fp32 scale per 128 elements (vLLM deepseek_v2.py
    # DeepseekV32IndexerCache, SGLang index_key_cache.py), not 128 elements at the model's 2 bytes.
    assert per_layer - dense["kv_cache"]["per_kind"]["full_attention"]["bytes_per_token_per_layer"] == 128 + 4
    indexer = 1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64  # wq_b, wk, k_norm, weights_proj
    assert sparse["params"]["breakdown"]["attention"] - dense["params"]["breakdown"]["attention"] == 61 * indexer


def test_compress_ratios_are_not_a_sliding_window():
    arch = arch_of(real("deepseek-v4-flash"))
    kv = arch["kv_cache"]
    # The two window-only layers stop at 128 tokens; the 41 compressed ones keep growing.
    assert kv["bytes_per_token_beyond_window"] > 0
    windowed = copy.deepcopy(real("deepseek-v4-flash"))
    windowed["compress_ratios"] = [0] * 44
    assert arch_of(windowed)["kv_cache"]["bytes_per_token_beyond_window"] == 0
    # Against plain full attention over one shared K=V head of 512, CSA/HCA store ~7x less per token.
    full = 43 * 512 * 2
    assert 6 < full / kv["bytes_per_token_beyond_window"] < 8


def test_rwkv_is_recurrent_with_a_state_not_pure_attention():
    arch = arch_of(real("rwkv-4-169m-pile"))
    assert arch["layers"]["pure_attention"] is False
    assert arch["kv_cache"]["state_bytes_per_sequence"] == 12 * 5 * 768 * 2
    assert arch["params"]["breakdown"]["recurrent"] > 0


def test_lightning_layers_have_parameters_and_state_without_a_head_dim_key():
    config = {k: v for k, v in real("minimax-text-01").items() if k != "head_dim"}  # 6144 / 64 = 96
    arch = arch_of(config)
    # No conv window; the matrix at SGLang's default fp32 state dtype (the larger engine figure; vLLM: bf16).
    assert arch["kv_cache"]["per_kind"]["linear_attention"]["state_bytes_per_layer"] == 64 * 96 * 96 * 4
    assert arch["params"]["breakdown"]["recurrent"] == 70 * (5 * 6144 * 64 * 96 + 64 * 96)


def test_llama4_explicit_moe_layers_win_over_the_interleave_step():
    config = real("llama-4-maverick-17b-128e")
    config["text_config"]["moe_layers"] = [0, 47]
    arch = arch_of(config)
    assert [i for i, kind in enumerate(arch["layers"]["ffn"]) if kind == "moe"] == [0, 47]
    assert arch["layers"]["ffn_source"] == "moe_layers"
