"""One row per ``model_type``: everything introspect knows about a model family.

Each row names the upstream code it was read from (``upstream``: the transformers
``configuration_<family>.py`` / ``modeling_<family>.py``, or the model repository's
own code). The verdict modules never compare ``model_type`` strings: they ask the
row (``family_of(model_type).ssm_only`` ...). A ``model_type`` without a row is
answered from the generic keys and gets an ``unknown-family`` finding.

A new family that uses known mechanisms is one row here and one JSON case in
``tests/data/families`` (``tests/analysis/test_family_table.py`` holds every row
to a case). A new mechanism adds an entry in :mod:`introspect.analysis.architecture.mixers`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from introspect.analysis.architecture.kinds import GDN, KDA, MAMBA, MAMBA2, RWKV
from introspect.remote.contract import JSONObject

# Layout readers a row can name, beyond the generic keys every family may use.
PARALLEL_HYBRID = "parallel_hybrid"  # attention and Mamba-2 side by side in one layer (Falcon-H1)
ATTN_LAYER_INDICES = "attn_layer_indices"  # attention at the listed layers, Mamba-2 elsewhere (Bamba)

_TIED: Mapping[str, Any] = MappingProxyType({"tie_word_embeddings": True})


@dataclass(frozen=True)
class Family:
    """What one ``model_type`` means beyond its config keys."""

    model_type: str | None  # None only for a config that names no model_type at all
    upstream: str  # the code this row was read from
    # Documented config-class defaults for keys a real config.json of the family omits.
    defaults: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    recurrent: str | None = None  # the mixer its generic "linear_attention"/"mamba" layers are
    ssm_only: bool = False  # no attention anywhere (its num_heads are SSM heads)
    layout: str | None = None  # a family-specific layout reader (PARALLEL_HYBRID, ATTN_LAYER_INDICES)
    sliding_period: int | None = None  # sliding/global alternation when the file omits layer_types
    ungated_ffn: bool = False  # FFN is up/down only, no gate projection
    bias: bool = False  # biases on every linear and LayerNorm (weight + bias)
    qkv_bias: bool = False  # biases on q/k/v only
    o_proj_bias: bool = False  # with attention_bias, o_proj has a bias too
    gated_q: bool = False  # q_proj doubled for an output gate, with q/k norms
    qk_norm: bool = False  # per-head RMSNorm on q and k
    router_bias: bool = False  # a per-expert router bias even without sigmoid scoring
    expert_bias: bool = False  # biases on each routed expert's projections
    learned_positions: bool = False  # a learned position-embedding table
    encoder_extras: bool = False  # token-type embeddings and a pooler (BERT-style encoders)
    mamba_dt_norms: bool = False  # RMSNorms on dt/B/C inside the Mamba-1 mixer
    mamba_norm_flag: bool = False  # the Mamba-2 gated norm exists only with mamba_rms_norm
    ssm_heads_named_plainly: bool = False  # SSM heads in num_heads / head_dim
    ffn_from_block_types: bool = False  # layers_block_type also says which layers have an FFN
    ffn_width_d_intermediate: bool = False  # the FFN width is d_intermediate (mamba_ssm layout)
    shared_expert_key: str | None = None  # the key holding the width of the one shared expert
    config_params: bool = True  # False: weights shared across layers, the config alone cannot count them
    new_decoder_kv: bool = False  # new_decoder_architecture: grouped KV heads, multi_query ignored
    implicit_shared_expert: bool = False  # every MoE block has one shared expert of intermediate_size
    dense_width_key: str | None = None  # the key of the dense layers' FFN width when it is not intermediate_size
    chunked_from_no_rope: bool = False  # Llama-4: RoPE layers use chunked attention, NoPE layers full
    compressed_attention: bool = False  # DeepSeek-V4: compress_ratios, shared K=V head, mHC (compressed_attention.py)
    wkv_heads: bool = False  # RWKV-7 (fla): a head_dim x head_dim WKV state per head, low-rank mixing weights
    cla: bool = False  # cross-layer attention: use_cla + cla_share_factor, K/V made every f-th layer only
    attention_sublayers: int = 1  # attention modules per decoder layer, each with its own KV cache
    known: bool = True


UNKNOWN = Family(None, upstream="", known=False)



def _qwen3_5(model_type: str, upstream: str) -> Family:
    """Qwen3-Next / Qwen3.5: Gated DeltaNet layers and output-gated attention."""
    return Family(model_type, upstream, recurrent=GDN, gated_q=True)


def _encoder(model_type: str, upstream: str, defaults: Mapping[str, Any]) -> Family:
    """BERT-style encoders: GELU FFN, biases, learned positions, token types and a pooler."""
    return Family(model_type, upstream, defaults=defaults, ungated_ffn=True, bias=True, learned_positions=True,
                  encoder_extras=True)


def _falcon(model_type: str, upstream: str) -> Family:
    """Falcon under its three model_type names: GELU FFN, tied, grouped KV with the new decoder."""
    return Family(model_type, upstream, defaults=_TIED, ungated_ffn=True, new_decoder_kv=True)

_GEMMA3_TEXT = MappingProxyType({
    "tie_word_embeddings": True, "vocab_size": 262_208, "max_position_embeddings": 131_072, "head_dim": 256,
    "sliding_window": 4096, "sliding_window_pattern": 6,
})

_ROWS = (
    # -- dense attention ------------------------------------------------------------------------
    # LlamaConfig's defaults: wrappers (LLaVA) often name only the keys that differ from them.
    Family("llama", "transformers configuration_llama.py / modeling_llama.py", defaults=MappingProxyType({
        "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
        "num_attention_heads": 32, "max_position_embeddings": 2048})),
    Family("mistral", "transformers configuration_mistral.py / modeling_mistral.py"),
    Family("qwen2", "transformers modeling_qwen2.py (q/k/v biases)", qkv_bias=True),
    Family("qwen3", "transformers modeling_qwen3.py (q_norm/k_norm)", qk_norm=True),
    Family("glm4", "transformers configuration_glm4.py / modeling_glm4.py"),
    Family("phi3", "transformers configuration_phi3.py / modeling_phi3.py"),
    Family("phi", "transformers modeling_phi.py (fc1/fc2, biases everywhere)", ungated_ffn=True, bias=True),
    Family("gemma", "transformers configuration_gemma.py (tie_word_embeddings=True)", defaults=_TIED),
    Family("gemma2", "transformers configuration_gemma2.py (sliding_window=4096, every other layer)",
           defaults=MappingProxyType({"tie_word_embeddings": True, "sliding_window": 4096}), sliding_period=2),
    Family("gemma3_text", "transformers configuration_gemma3.py Gemma3TextConfig defaults", defaults=_GEMMA3_TEXT),
    Family("cohere2", "transformers configuration_cohere2.py (sliding_window_pattern=4, tied)",
           defaults=_TIED, sliding_period=4),
    Family("nemotron", "transformers modeling_nemotron.py NemotronMLP (up/down, relu2)", ungated_ffn=True),
    Family("starcoder2", "transformers modeling_starcoder2.py (c_fc/c_proj, use_bias)",
           ungated_ffn=True, bias=True, defaults=_TIED),
    Family("gpt2", "transformers modeling_gpt2.py (Conv1D with biases, wpe)",
           ungated_ffn=True, bias=True, learned_positions=True, defaults=_TIED),
    Family("gpt_bigcode", "transformers modeling_gpt_bigcode.py (multi_query, wpe)",
           ungated_ffn=True, bias=True, learned_positions=True, defaults=_TIED),
    Family("gpt_neox", "transformers modeling_gpt_neox.py (dense_h_to_4h/dense_4h_to_h with biases)",
           ungated_ffn=True, bias=True),
    Family("gptj", "transformers modeling_gptj.py GPTJMLP (fc_in/fc_out)", ungated_ffn=True),
    Family("opt", "transformers modeling_opt.py (fc1/fc2, biases, learned positions; tied)",
           ungated_ffn=True, bias=True, learned_positions=True, defaults=_TIED),
    Family("bloom", "transformers modeling_bloom.py BloomMLP (dense_h_to_4h/dense_4h_to_h; ALiBi; tied)",
           ungated_ffn=True, defaults=_TIED),
    Family("mpt", "transformers modeling_mpt.py MptMLP (up_proj/down_proj; ALiBi; tied)",
           ungated_ffn=True, defaults=_TIED),
    _falcon("falcon", "transformers configuration_falcon.py / modeling_falcon.py"),
    _falcon("RefinedWeb", "tiiuae/falcon-40b configuration_RW.py (old name of falcon)"),
    _falcon("RefinedWebModel", "tiiuae/falcon-7b configuration_RW.py (old name of falcon)"),
    _encoder("bert", "transformers modeling_bert.py (type_vocab_size=2, pooler)",
             MappingProxyType({"tie_word_embeddings": True, "type_vocab_size": 2})),
    _encoder("roberta", "transformers modeling_roberta.py", _TIED),
    # -- MoE --------------------------------------------------------------------------------------
    Family("mixtral", "transformers configuration_mixtral.py / modeling_mixtral.py"),
    Family("qwen2_moe", "transformers modeling_qwen2_moe.py (q/k/v biases, gated shared expert)", qkv_bias=True),
    Family("qwen3_moe", "transformers modeling_qwen3_moe.py (q_norm/k_norm)", qk_norm=True),
    Family("olmoe", "transformers configuration_olmoe.py / modeling_olmoe.py"),
    Family("deepseek_v2", "transformers configuration_deepseek_v2.py / modeling_deepseek_v2.py (MLA)"),
    Family("deepseek_v3", "transformers configuration_deepseek_v3.py / modeling_deepseek_v3.py (MLA)"),
    Family("kimi_k2", "moonshotai/Kimi-K2-Instruct configuration_deepseek.py (DeepSeek-V3 layout)"),
    Family("glm4_moe", "transformers modeling_glm4_moe.py (e_score_correction_bias)", router_bias=True),
    Family("dots1", "transformers modeling_dots1.py (e_score_correction_bias)", router_bias=True),
    Family("minimax_m2", "MiniMaxAI/MiniMax-M2 modeling_minimax_m2.py (e_score_correction_bias)",
           router_bias=True),
    Family("gpt_oss", "transformers modeling_gpt_oss.py (sliding every other layer, biased router and experts)",
           sliding_period=2, router_bias=True, o_proj_bias=True, expert_bias=True),
    # -- hybrids and recurrent mixers ------------------------------------------------------------
    Family("minimax", "transformers modeling_minimax.py (attn_type_list: lightning / softmax)"),
    _qwen3_5("qwen3_next", "transformers modeling_qwen3_next.py (Gated DeltaNet, gated attention)"),
    _qwen3_5("qwen3_5", "transformers configuration_qwen3_5.py (wrapper of qwen3_5_text)"),
    _qwen3_5("qwen3_5_text", "transformers modeling_qwen3_5.py"),
    _qwen3_5("qwen3_5_moe", "transformers configuration_qwen3_5_moe.py (wrapper of qwen3_5_moe_text)"),
    _qwen3_5("qwen3_5_moe_text", "transformers modeling_qwen3_5_moe.py"),
    Family("kimi_linear", "moonshotai/Kimi-Linear-48B-A3B-Instruct modeling_kimi.py (KDA + MLA)",
           recurrent=KDA, router_bias=True),
    Family("jamba", "transformers modeling_jamba.py (dt/B/C layernorms)", recurrent=MAMBA, mamba_dt_norms=True),
    Family("mamba", "transformers configuration_mamba.py / modeling_mamba.py", recurrent=MAMBA, ssm_only=True,
           defaults=_TIED),
    Family("falcon_mamba", "transformers modeling_falcon_mamba.py", recurrent=MAMBA, ssm_only=True,
           defaults=_TIED),
    Family("mamba2", "transformers configuration_mamba2.py (num_heads/head_dim are SSM heads)",
           recurrent=MAMBA2, ssm_only=True, ssm_heads_named_plainly=True, ffn_width_d_intermediate=True),
    Family("nemotron_h", "transformers modeling_nemotron_h.py (hybrid_override_pattern, relu2 MLP)",
           recurrent=MAMBA2, ungated_ffn=True, router_bias=True, ffn_from_block_types=True),
    Family("falcon_h1", "transformers modeling_falcon_h1.py (attention and Mamba-2 in parallel)",
           recurrent=MAMBA2, layout=PARALLEL_HYBRID, mamba_norm_flag=True),
    Family("bamba", "transformers configuration_bamba.py (attn_layer_indices; Mamba-2 elsewhere)",
           recurrent=MAMBA2, layout=ATTN_LAYER_INDICES),
    Family("granitemoehybrid", "transformers modeling_granitemoehybrid.py (layer_types mamba/attention, "
           "GraniteMoeHybridMLP shared expert of shared_intermediate_size)",
           recurrent=MAMBA2, shared_expert_key="shared_intermediate_size"),
    # Zamba2's hybrid layers reuse num_mem_blocks shared attention blocks: no per-layer count holds.
    Family("zamba2", "transformers modeling_zamba2.py (layers_block_type mamba/hybrid, shared transformer blocks)",
           recurrent=MAMBA2, config_params=False),
    # Llama4TextConfig (transformers configuration_llama4.py): layer_types default to "chunked_attention"
    # where no_rope_layers[i] is 1 (RoPE layers; no_rope_layer_interval=4 by default) and "full_attention"
    # on the NoPE layers; moe_layers = range(interleave_moe_layer_step - 1, n, step). modeling_llama4.py
    # Llama4TextMoe always holds shared_expert = Llama4TextMLP(intermediate_size); dense layers use
    # intermediate_size_mlp; Llama4TextL2Norm on q/k has no weight.
    Family("llama4_text", "transformers configuration_llama4.py / modeling_llama4.py (chunked + NoPE, shared "
           "expert)", implicit_shared_expert=True, dense_width_key="intermediate_size_mlp",
           chunked_from_no_rope=True),
    Family("llama4", "transformers configuration_llama4.py Llama4Config (text_config: llama4_text)",
           implicit_shared_expert=True, dense_width_key="intermediate_size_mlp", chunked_from_no_rope=True),
    # transformers modeling_gemma3n.py Gemma3nTextAttention: the last num_kv_shared_layers layers reuse the K/V
    # of the last layer of the same type before them. AltUp, LAuReL and the per-layer embeddings have no
    # formula here: the parameter count is left to the weights and the model's code.
    Family("gemma3n_text", "transformers configuration_gemma3n.py / modeling_gemma3n.py (num_kv_shared_layers)",
           defaults=_TIED, config_params=False),
    Family("gemma3n", "transformers configuration_gemma3n.py Gemma3nConfig (text_config: gemma3n_text)",
           defaults=_TIED, config_params=False),
    # transformers configuration_dbrx.py: attention and FFN settings in the attn_config / ffn_config blocks;
    # modeling_dbrx.py DbrxExperts w1/v1/w2 (GLU), Wqkv and out_proj without biases, LayerNorm(bias=False).
    Family("dbrx", "transformers configuration_dbrx.py / modeling_dbrx.py (nested attn_config/ffn_config)"),
    # DeepSeek-V3.2: DeepSeek-V3 plus the lightning indexer (index_topk, index_n_heads, index_head_dim):
    # transformers models/deepseek_v32 (inference/model.py Indexer: wq_b, wk, k_norm, weights_proj, k_cache).
    Family("deepseek_v32", "transformers deepseek_v32 modeling_deepseek_v32.py / inference/model.py Indexer"),
    Family("deepseek_v4", "transformers configuration_deepseek_v4.py / modeling_deepseek_v4.py (compress_ratios: "
           "sliding / CSA / HCA layers, shared K=V head, mHC)", compressed_attention=True),
    # tencent/Tencent-Hunyuan-Large modeling_hunyuan.py, vLLM model_executor/models/hunyuan_v1.py:
    # _get_cla_factor (use_cla, cla_share_factor): layer i makes its own K/V iff i % factor == 0, the others
    # are "cross" attention with q_proj/o_proj only; num_shared_expert shared MLPs of intermediate_size.
    Family("hunyuan", "tencent/Tencent-Hunyuan-Large modeling_hunyuan.py; vLLM hunyuan_v1.py (CLA, "
           "num_shared_expert)", cla=True, qk_norm=True),
    # transformers modeling_rwkv.py (RWKV-4): RwkvSelfAttention (time mixing) + RwkvFeedForward (channel
    # mixing), LayerNorms with bias, no attention heads; a fixed recurrent state per layer.
    Family("rwkv", "transformers configuration_rwkv.py / modeling_rwkv.py (RWKV-4)", recurrent=RWKV,
           ssm_only=True, bias=True),
    # fla-org/flash-linear-attention fla/layers/rwkv7.py RWKV7Attention (r/k/v/o, w/a/v/g LoRAs, GroupNorm) and
    # fla/models/rwkv7 RWKV7FeedForward (x_k, key, value); LayerNorms with bias (norm_bias).
    Family("rwkv7", "fla-org/flash-linear-attention fla/layers/rwkv7.py / fla/models/rwkv7 (RWKV-7)",
           recurrent=RWKV, ssm_only=True, bias=True, wkv_heads=True),
    # MiniMaxAI/MiniMax-Text-01 and MiniMax-M1 modeling_minimax_text_01.py / modeling_minimax_m1.py: the
    # transformers "minimax" layout under the model repos' own names (attn_type_list: 0 lightning, 1 softmax).
    Family("minimax_text_01", "MiniMaxAI/MiniMax-Text-01 modeling_minimax_text_01.py (attn_type_list)"),
    Family("minimax_m1", "MiniMaxAI/MiniMax-M1-80k modeling_minimax_m1.py (attn_type_list)"),
    # meituan-longcat LongCat-Flash: each of num_layers decoder layers runs two MLA attention modules
    # (self_attn[0], self_attn[1]) and two dense MLPs beside one MoE; the engines cache KV for both: SGLang
    # model_config.py num_attention_layers = num_hidden_layers * 2
    # (https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/configs/model_config.py#L1584),
    # vLLM longcat_flash.py builds ``self_attn`` as two DeepseekV2MLAAttention per layer (#L286). The generic
    # per-layer parameter formula does not hold for that block, so parameters come from the weights.
    Family("longcat_flash", "transformers configuration_longcat_flash.py / modeling_longcat_flash.py (two MLA "
           "sublayers per decoder layer)", attention_sublayers=2, config_params=False),
    # -- wrappers (the text model is nested; its own row answers) --------------------------------
    Family("kimi_k25", "moonshotai/Kimi-K2.5 configuration_kimi_k25.py (text_config: DeepSeek-V3)"),
    Family("gemma3", "transformers configuration_gemma3.py Gemma3Config (text_config)", defaults=_TIED),
    Family("qwen2_vl", "transformers modeling_qwen2_vl.py (Qwen2 text model, q/k/v biases)", qkv_bias=True),
    Family("qwen2_5_vl", "transformers modeling_qwen2_5_vl.py (Qwen2 text model, q/k/v biases)", qkv_bias=True),
    Family("llava", "transformers configuration_llava.py (text_config)"),
)

FAMILIES: Mapping[str, Family] = MappingProxyType({row.model_type: row for row in _ROWS if row.model_type})


def family_of(model_type: str | None) -> Family:
    """The row of ``model_type``; a row with every trait off (``known`` false) when the table has none."""
    if not isinstance(model_type, str):
        return UNKNOWN
    return FAMILIES.get(model_type) or Family(model_type, upstream="", known=False)


def defaults_for(model_type: str | None, text_type: str | None) -> JSONObject:
    """Config-class defaults of the wrapper's and the text model's families (the text model wins): config
    values, as a config.json would hold them."""
    return {**family_of(model_type).defaults, **family_of(text_type).defaults}


def is_known(model_type: str | None, text_type: str | None) -> bool:
    return family_of(text_type).known or family_of(model_type).known
