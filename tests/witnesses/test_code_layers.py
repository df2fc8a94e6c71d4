"""Each built layer's mixer, classified by its tensors and projection widths (pure; no torch).

The mixer descriptions below are what introspect/remote/facts/model/model_code_layers.py reports for
the named transformers 5.24 classes (the shapes of their default configs, smaller where noted).
"""

from __future__ import annotations

from typing import Any

import pytest

from introspect.analysis.architecture.code_layers import code_layers, kv_elements, mixer_kind
from introspect.analysis.architecture.code_settle import generic_kinds, settle_layers_from_code
from introspect.analysis.architecture.section import empty_architecture
from introspect.documents.profile_architecture import Architecture, Attention, KvCache, Layers


def mixer(cls: str, kind: str = "attention", outputs: dict[str, int] | None = None,
          attrs: dict[str, Any] | None = None, tensors: list[list[Any]] | None = None) -> dict[str, Any]:
    return {"class": cls, "kind": kind, "outputs": outputs or {}, "attrs": attrs or {}, "tensors": tensors or []}


KV_CASES = [
    # modeling_llama.py LlamaAttention (GQA 32/8 x 128): k_proj and v_proj outputs.
    ("llama", mixer("LlamaAttention", outputs={"q_proj": 4096, "k_proj": 1024, "v_proj": 1024}), 2048),
    # modeling_gpt2.py GPT2Attention: one Conv1D c_attn of 3 x 768 (nf), num_heads 12, head_dim 64.
    ("gpt2", mixer("GPT2Attention", outputs={"c_attn": 2304, "c_proj": 768}, attrs={"num_heads": 12, "head_dim": 64}),
     1536),
    # modeling_falcon.py FalconAttention, new_decoder_architecture: query_key_value = (128 + 2 x 8) x 64.
    ("falcon-40b", mixer("FalconAttention", outputs={"query_key_value": 9216, "dense": 8192},
                         attrs={"num_heads": 128, "num_kv_heads": 8, "head_dim": 64}), 1024),
    # modeling_deepseek_v3.py DeepseekV3Attention: the latent kv_lora_rank + qk_rope_head_dim is cached.
    ("deepseek-v3", mixer("DeepseekV3Attention", outputs={"kv_a_proj_with_mqa": 576, "kv_b_proj": 32768},
                          attrs={"kv_lora_rank": 512, "qk_rope_head_dim": 64}), 576),
    # A fused projection whose split the module does not show: unknown, not guessed.
    ("opaque", mixer("OpaqueAttention", outputs={"qkv_proj": 3000}), None),
]


@pytest.mark.parametrize(("name", "described", "elements"), KV_CASES, ids=[c[0] for c in KV_CASES])
def test_kv_elements_from_projection_widths(name: str, described: dict[str, Any], elements: int | None) -> None:
    assert kv_elements(described) == elements


KIND_CASES = [
    # modeling_mamba.py MambaMixer: A_log (d_inner, d_state), rank 2.
    ("mamba", mixer("MambaMixer", "recurrent", tensors=[["A_log", 2], ["D", 1], ["conv1d.weight", 3]]), "mamba"),
    # modeling_mamba2.py Mamba2Mixer: A_log (num_heads,), rank 1.
    ("mamba2", mixer("Mamba2Mixer", "recurrent", tensors=[["A_log", 1], ["dt_bias", 1]]), "mamba2"),
    # modeling_qwen3_next.py Qwen3NextGatedDeltaNet: rank-1 A_log too, told by its class name.
    ("gdn", mixer("Qwen3NextGatedDeltaNet", "recurrent", tensors=[["A_log", 1], ["dt_bias", 1]]), "gated_deltanet"),
    # modeling_kimi_linear.py KimiLinearDeltaAttention.
    ("kda", mixer("KimiLinearDeltaAttention", "recurrent", tensors=[["A_log", 1]]), "kda"),
    # modeling_rwkv.py RwkvSelfAttention: time_decay / time_first.
    ("rwkv", mixer("RwkvSelfAttention", "recurrent", tensors=[["time_decay", 1], ["time_first", 1]]), "rwkv"),
    # modeling_mllama.py MllamaTextCrossAttention: K/V of the image.
    ("mllama-cross", mixer("MllamaTextCrossAttention", outputs={"k_proj": 1024, "v_proj": 1024}), "cross_attention"),
    # modeling_nemotron_h.py: a "-" block's mixer slot holds NemotronHMLP.
    ("nemotron-mlp", mixer("NemotronHMLP"), "mlp"),
    # modeling_glm4_moe.py Glm4MoeAttention: "Moe" in an attention class is still attention.
    ("glm4-moe-attention", mixer("Glm4MoeAttention", outputs={"k_proj": 1024, "v_proj": 1024}), "full_attention"),
    # modeling_gemma2.py Gemma2Attention keeps sliding_window on its sliding layers only.
    ("gemma2-sliding", mixer("Gemma2Attention", attrs={"sliding_window": 4096}), "sliding_attention"),
    # modeling_recurrent_gemma.py RecurrentGemmaRecurrentBlock: a state of no kind named here.
    ("rg-lru", mixer("RecurrentGemmaRecurrentBlock", "recurrent", tensors=[["linear_x.weight", 2]]), "recurrent"),
]


@pytest.mark.parametrize(("name", "described", "kind"), KIND_CASES, ids=[c[0] for c in KIND_CASES])
def test_mixer_kind_by_signature(name: str, described: dict[str, Any], kind: str) -> None:
    assert mixer_kind(described, {}, None, "") == kind


def _probe(runs: list[dict[str, Any]], layer_types: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"layers": {"count": sum(r["count"] for r in runs), "runs": runs},
            "config": {"layer_types": layer_types or []}}


def _arch(pattern: list[str], attention: dict[str, Any], kv_bytes_per_token: int) -> Architecture:
    """The architecture section as the config rules left it: these layer kinds, this attention, this KV figure."""
    arch = empty_architecture(None)
    arch.dtype = "bfloat16"
    arch.layers = Layers(pattern=pattern, kinds={kind: pattern.count(kind) for kind in pattern}, pure_attention=True)
    arch.attention = Attention.model_validate(arch.attention.to_dict() | attention)
    arch.kv_cache = KvCache(dtype="bfloat16", dtype_assumed=False, bytes_per_element=2,
                            bytes_per_token=kv_bytes_per_token, per_kind={}, state_bytes_per_sequence=0,
                            sliding_window_cap=None, bytes_per_token_beyond_window=kv_bytes_per_token)
    return arch


def test_zamba2_hybrid_layer_is_attention_beside_mamba2() -> None:
    """modeling_zamba2.py Zamba2HybridLayer: the shared transformer's attention and the Mamba-2 mixer."""
    hybrid = {"start": 0, "count": 1, "class": "Zamba2HybridLayer", "attrs": {},
              "mixers": [mixer("Zamba2MambaMixer", "recurrent", tensors=[["A_log", 1]]),
                         mixer("Zamba2Attention", outputs={"k_proj": 2560, "v_proj": 2560})]}
    [layer] = code_layers(_probe([hybrid])) or []
    assert (layer.kind, layer.kv_elements) == ("full_attention+mamba2", 5120)


def test_mistral_window_is_the_configs_to_say() -> None:
    """modeling_mistral.py applies config.sliding_window in the mask, not on the module: the config's
    reading of the flavour stays, the code's KV widths settle the cache."""
    runs = [{"start": 0, "count": 2, "class": "MistralDecoderLayer", "attrs": {},
             "mixers": [mixer("MistralAttention", outputs={"k_proj": 1024, "v_proj": 1024})]}]
    arch = _arch(["sliding_attention"] * 2, {"sliding_window": 4096}, 8192)
    findings = settle_layers_from_code(arch, _probe(runs))
    assert arch.layers.kinds == {"sliding_attention": 2} and arch.layers.settled_by == "model_code"
    assert arch.kv_cache is not None and arch.kv_cache.bytes_per_token == 2 * 2048 * 2 and not findings


def test_a_disagreement_names_both_readings() -> None:
    runs = [{"start": 0, "count": 2, "class": "XLayer", "attrs": {},
             "mixers": [mixer("XMamba2Mixer", "recurrent", tensors=[["A_log", 1]])]}]
    arch = _arch(["full_attention"] * 2, {"type": "GQA"}, 8192)
    findings = settle_layers_from_code(arch, _probe(runs))
    assert {f.extra["quantity"] for f in findings} == {"layer kinds", "attention type", "KV cache bytes per token"}
    assert arch.layers.pure_attention is False and arch.attention.type == "none"
    assert arch.kv_cache is not None and arch.kv_cache.bytes_per_token == 0


def test_generic_recurrent_is_not_at_odds_with_a_named_one() -> None:
    assert generic_kinds({"recurrent": 3, "full_attention": 1}) == generic_kinds({"mamba2": 3, "full_attention": 1})
    assert generic_kinds({"recurrent": 3}) != generic_kinds({"full_attention": 3})


def test_dsa_layers_keep_the_indexer_keys_beside_the_latent() -> None:
    """vLLM 0.33.0 deepseek_v2.py DeepseekV32IndexerCache: the indexer's key per token per layer beside the
    MLA latent, in fp8 with a 4-byte scale per 128 elements (132 bytes for index_head_dim 128), in the
    per-layer figure as in the total (as the rules' kv_cache.py counts it, mixer_math.indexer_key_bytes)."""
    runs = [{"start": 0, "count": 2, "class": "DeepseekV32DecoderLayer", "attrs": {},
             "mixers": [mixer("DeepseekV32Attention", outputs={"kv_a_proj_with_mqa": 576},
                              attrs={"kv_lora_rank": 512, "qk_rope_head_dim": 64})]}]
    indexer = {"kind": "sparse_indexer", "index_head_dim": 128, "index_n_heads": 64, "index_topk": 2048}
    per_layer = 576 * 2 + 128 + 128 // 128 * 4  # the bf16 latent, then the fp8 indexer key and its scale
    arch = _arch(["full_attention"] * 2, {"type": "MLA", "num_heads": 128, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
                                          "sparse_indexer": indexer}, 2 * per_layer)
    assert not settle_layers_from_code(arch, _probe(runs))
    assert arch.kv_cache is not None
    entry = arch.kv_cache.per_kind["full_attention"].to_dict()
    assert (entry["bytes_per_token_per_layer"], entry["bytes_per_token"]) == (per_layer, 2 * per_layer)
