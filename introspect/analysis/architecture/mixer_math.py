"""The formulas behind each mixer entry: dimensions, fixed state and parameters.

Each formula mirrors the module shapes of the upstream implementation named beside
it; the dimension readers are shared by the state and the parameter formulas so a
config key is read one way only. Pure: a :class:`ConfigView` in, integers out.

A state formula returns ``(conv, recurrent)`` elements per layer and sequence: the
short-convolution window and the recurrent matrix, the two tensors the engines keep
at different dtypes (state_dtypes.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from introspect.analysis.architecture.config_view import ConfigView, positive
from introspect.analysis.architecture.families import Family, family_of
from introspect.documents.profile_architecture import Attention


@dataclass
class LayerCtx:
    """What a per-layer formula needs: the text config, its family row, the attention verdict."""

    view: ConfigView
    family: Family
    hidden: int
    attention: Attention
    gated: bool  # gate/up/down FFN (SwiGLU) rather than up/down
    bias: bool  # biases on every linear and LayerNorm


# -- softmax attention ----------------------------------------------------------------------


def heads_kv_elements(att: Attention) -> int:
    """K and V per token per layer: kv_heads x (head_dim + v_head_dim)."""
    kv_heads, head_dim = att.num_kv_heads or 0, att.head_dim or 0
    v_dim = att.v_head_dim or head_dim
    return int(kv_heads * (head_dim + v_dim))


def mla_kv_elements(att: Attention) -> int:
    """MLA caches one shared latent plus the decoupled rope key per token."""
    return int((att.kv_lora_rank or 0) + (att.qk_rope_head_dim or 0))


def _mla_params(ctx: LayerCtx) -> int:
    # transformers modeling_deepseek_v3.py DeepseekV3Attention (q_a/q_b, kv_a_proj_with_mqa, kv_b, o).
    att, h = ctx.attention, ctx.hidden
    heads = att.num_heads or 0
    nope, rope = att.qk_nope_head_dim or 0, att.qk_rope_head_dim or 0
    v_dim, kv_lora = att.v_head_dim or nope, att.kv_lora_rank or 0
    q_lora = att.q_lora_rank
    qk = heads * (nope + rope)
    q = h * q_lora + q_lora + q_lora * qk if q_lora else h * qk  # low-rank query with its norm
    kv = h * (kv_lora + rope) + kv_lora + kv_lora * heads * (nope + v_dim)
    return int(q + kv + heads * v_dim * h)


def _heads_params(ctx: LayerCtx) -> int:
    att, h, view, fam = ctx.attention, ctx.hidden, ctx.view, ctx.family
    heads = att.num_heads or 0
    head_dim, kv_heads = att.head_dim or 0, att.num_kv_heads or 0
    q_dim, kv_dim = heads * head_dim, kv_heads * head_dim
    gated_q = fam.gated_q or view.get_bool("attn_output_gate") is True
    total = h * q_dim * (2 if gated_q else 1) + 2 * h * kv_dim + q_dim * h
    if ctx.bias or fam.qkv_bias or view.get_bool("attention_bias", "bias", "qkv_bias"):
        total += q_dim + 2 * kv_dim + (h if ctx.bias or fam.o_proj_bias else 0)
    if fam.gated_q or view.get_bool("use_qk_norm") or fam.qk_norm:
        total += 2 * head_dim
    return int(total)


def indexer_kv_elements(att: Attention) -> int:
    """DeepSeek-V3.2 Indexer.k_cache: one index_head_dim key per token per layer beside the MLA latent."""
    return att.sparse_indexer.index_head_dim if att.sparse_indexer is not None else 0


INDEXER_SCALE_BLOCK = 128  # one fp32 scale per 128 elements of the indexer key


def indexer_key_bytes(att: Attention) -> int:
    """Bytes the engines cache for one token's indexer key in one layer, whatever the KV dtype: the key in
    fp8 (1 byte an element) plus a 4-byte fp32 scale per 128 elements, 132 B for index_head_dim 128.
    vLLM 0.33.0 deepseek_v2.py Indexer: ``DeepseekV32IndexerCache(head_dim=self.head_dim + self.head_dim //
    self.quant_block_size * 4, dtype=torch.uint8)``
    (https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/model_executor/models/deepseek_v2.py#L732);
    SGLang 0.5.23 mem_cache/index_key_cache.py: ``index_head_dim + index_head_dim // quant_block_size * 4``
    uint8 per token (https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/mem_cache/index_key_cache.py#L46)."""
    dim = indexer_kv_elements(att)
    return dim + dim // INDEXER_SCALE_BLOCK * 4


def _indexer_params(ctx: LayerCtx) -> int:
    # transformers models/deepseek_v32 inference/model.py Indexer: wq_b (q_lora_rank -> heads x dim),
    # wk (hidden -> dim), k_norm (LayerNorm: weight + bias), weights_proj (hidden -> heads).
    indexer = ctx.attention.sparse_indexer
    if indexer is None:
        return 0
    heads, dim = indexer.index_n_heads, indexer.index_head_dim
    q_in = ctx.attention.q_lora_rank or ctx.hidden
    return int(q_in * heads * dim + ctx.hidden * dim + 2 * dim + ctx.hidden * heads)


def attention_params(ctx: LayerCtx) -> int:
    """One softmax-attention block (full, sliding or chunked: the weights are the same)."""
    base = _mla_params(ctx) if ctx.attention.type == "MLA" else _heads_params(ctx)
    return base + _indexer_params(ctx)


def cla_kv_params(ctx: LayerCtx) -> int:
    """k_proj + v_proj of one layer: what a CLA "cross" layer lacks (vLLM hunyuan_v1.py HunYuanCrossAttention)."""
    att = ctx.attention
    return int(2 * ctx.hidden * (att.num_kv_heads or 0) * (att.head_dim or 0))


# -- RWKV (transformers modeling_rwkv.py; fla-org/flash-linear-attention fla/models/rwkv6, rwkv7) ----


def _rwkv_widths(view: ConfigView, hidden: int) -> tuple[int, int]:
    attention = positive(view.get_int("attention_hidden_size")) or hidden
    inner = positive(view.get_int("intermediate_size")) or 4 * hidden
    return attention, inner


def rwkv_state(view: ConfigView, hidden: int | None) -> tuple[int, int]:
    """RWKV-4: five hidden-size vectors per layer (transformers RwkvModel.forward builds the state as five
    (batch, hidden_size, num_hidden_layers) tensors: time-mix shift, numerator, denominator, max, channel-mix
    shift). RWKV-7 (fla rwkv7.py): a head_dim x head_dim recurrent_state per head plus the time-mix and
    channel-mix token-shift vectors."""
    if hidden is None:
        return 0, 0
    if family_of(view.get_str("model_type")).wkv_heads:
        heads, head_dim = rwkv7_heads(view, hidden)
        return 0, heads * head_dim * head_dim + 2 * hidden
    return 0, 5 * hidden


def rwkv7_heads(view: ConfigView, hidden: int) -> tuple[int, int]:
    """RWKV7Attention: head_dim (default 64) wins over num_heads; heads = hidden // head_dim."""
    head_dim = positive(view.get_int("head_dim", "head_size"))
    heads = positive(view.get_int("num_heads"))
    if head_dim is None:
        head_dim = hidden // heads if heads else 64
    return max(hidden // head_dim, 1), head_dim


def _fla_rank(view: ConfigView, key: str, scale: float, hidden: int, factor: float) -> int:
    """fla rwkv7.py's default low-rank width: max(32, round(scale * sqrt(hidden) * factor / 32) * 32)."""
    return positive(view.get_int(key)) or max(32, int(round(scale * hidden**0.5 * factor / 32) * 32))


def rwkv7_params(ctx: LayerCtx) -> int:
    """One RWKV-7 block beyond its first LayerNorm (a layer > 0: layer 0 lacks v_lora, see rwkv7_first_layer)."""
    view, h = ctx.view, ctx.hidden
    _, head_dim = rwkv7_heads(view, h)
    factor = head_dim / 64
    decay = _fla_rank(view, "decay_low_rank_dim", 2.5, h, factor)
    gate = _fla_rank(view, "gate_low_rank_dim", 5, h, 1.0)
    a_rank = _fla_rank(view, "a_low_rank_dim", 2.5, h, factor)
    v_rank = _fla_rank(view, "v_low_rank_dim", 1.7, h, factor)
    inner = positive(view.get_int("intermediate_size"))
    if inner is None:
        ratio = view.get_float("hidden_ratio") or 4.0
        inner = 32 * -(-int(h * ratio) // 32)
    vectors = 6 * h + 2 * h + h  # x_r..x_g, k_k, k_a, r_k
    projections = 4 * h * h  # r, k, v, o
    loras = sum(2 * h * rank + h for rank in (decay, a_rank, v_rank)) + 2 * h * gate  # g_lora has no bias
    time_mix = vectors + projections + loras + 2 * h  # GroupNorm weight + bias
    channel_mix = h + 2 * h * inner
    return time_mix + channel_mix + 2 * h  # ffn_norm (weight + bias)


def rwkv7_first_layer(view: ConfigView, hidden: int) -> int:
    """Layer 0's difference: its pre_norm (weight + bias) and no v_lora (fla RWKV7Attention, RWKV7Block)."""
    _, head_dim = rwkv7_heads(view, hidden)
    v_rank = _fla_rank(view, "v_low_rank_dim", 1.7, hidden, head_dim / 64)
    return 2 * hidden - (2 * hidden * v_rank + hidden)


def rwkv_params(ctx: LayerCtx) -> int:
    """RWKV-4 block beyond its first LayerNorm: RwkvSelfAttention, RwkvFeedForward and ln2 (weight + bias)."""
    if ctx.family.wkv_heads:
        return rwkv7_params(ctx)
    h = ctx.hidden
    attention, inner = _rwkv_widths(ctx.view, h)
    time_mix = 2 * attention + 3 * h + 3 * h * attention + attention * h  # decay, first, 3 mixes, k/v/r, output
    channel_mix = 2 * h + h * inner + h * h + inner * h  # 2 mixes, key, receptance, value
    return time_mix + channel_mix + 2 * h


# -- lightning attention (transformers modeling_minimax.py MiniMaxLightningAttention) ---------


def _lightning_width(attention: Attention) -> tuple[int, int]:
    return attention.num_heads or 0, attention.head_dim or 0


def lightning_params(ctx: LayerCtx) -> int:
    """qkv_proj (h -> 3 x heads x head_dim), output_gate, out_proj and the RMSNorm over heads x head_dim."""
    heads, head_dim = _lightning_width(ctx.attention)
    inner = heads * head_dim
    return 5 * ctx.hidden * inner + inner


def lightning_state(view: ConfigView, hidden: int | None) -> tuple[int, int]:
    """The running key-value state: heads x head_dim x head_dim per sequence, no conv window."""
    heads = positive(view.get_int("num_attention_heads"))
    head_dim = positive(view.get_int("head_dim"))
    if head_dim is None and heads and hidden and hidden % heads == 0:
        head_dim = hidden // heads  # MiniMaxConfig: head_dim defaults to hidden_size // num_attention_heads
    if heads is None or head_dim is None:
        return 0, 0
    return 0, heads * head_dim * head_dim


# -- Gated DeltaNet (transformers modeling_qwen3_next.py Qwen3NextGatedDeltaNet) -------------


def gdn_dims(view: ConfigView) -> tuple[int, int, int, int, int]:
    """(key heads, value heads, key head dim, value head dim, conv kernel), Qwen3NextConfig defaults."""
    nk = positive(view.get_int("linear_num_key_heads")) or 16
    nv = positive(view.get_int("linear_num_value_heads")) or 32
    dk = positive(view.get_int("linear_key_head_dim")) or 128
    dv = positive(view.get_int("linear_value_head_dim")) or 128
    conv = positive(view.get_int("linear_conv_kernel_dim")) or 4
    return nk, nv, dk, dv, conv


def gdn_state(view: ConfigView, hidden: int | None) -> tuple[int, int]:
    """conv_state (q, k, v channels x conv - 1) and the (value heads, v dim, k dim) recurrent state, as vLLM's
    ``gated_delta_net_state_shape`` and SGLang's ``Mamba2StateShape`` (Qwen3-Next: (32, 128, 128)) size them."""
    nk, nv, dk, dv, conv = gdn_dims(view)
    return (2 * nk * dk + nv * dv) * (conv - 1), nv * dk * dv


def gdn_params(ctx: LayerCtx) -> int:
    nk, nv, dk, dv, conv = gdn_dims(ctx.view)
    h, key_dim, value_dim = ctx.hidden, nk * dk, nv * dv
    return (
        h * (2 * key_dim + 2 * value_dim)  # in_proj_qkvz
        + h * 2 * nv  # in_proj_ba
        + (2 * key_dim + value_dim) * conv  # depthwise conv1d
        + 2 * nv  # dt_bias, A_log
        + dv  # gated RMSNorm
        + value_dim * h  # out_proj
    )


# -- KDA (moonshotai/Kimi-Linear modeling_kimi.py KimiDeltaAttention) ------------------------


def kda_dims(view: ConfigView, default_heads: int) -> tuple[int, int, int]:
    """(heads, head dim, short-conv kernel) from ``linear_attn_config``."""
    sub = view.sub("linear_attn_config")
    heads = (sub.get_int("num_heads") if sub else None) or default_heads
    dim = (sub.get_int("head_dim") if sub else None) or 128
    conv = (sub.get_int("short_conv_kernel_size") if sub else None) or 4
    return heads, dim, conv


def kda_state(view: ConfigView, hidden: int | None) -> tuple[int, int]:
    """q, k, v short-conv windows and a head_dim x head_dim state per head (vLLM ``kda_state_shape``)."""
    heads, dim, conv = kda_dims(view, 32)
    return 3 * heads * dim * (conv - 1), heads * dim * dim


def kda_params(ctx: LayerCtx) -> int:
    heads, dim, conv = kda_dims(ctx.view, ctx.attention.num_heads or 32)
    h, qkv = ctx.hidden, heads * dim
    projections = 3 * h * qkv + qkv * h  # q, k, v in; o out
    short_convs = 3 * qkv * conv
    forget_gate = h * dim + dim * qkv + qkv + heads  # low-rank gate, dt_bias, A_log
    beta = h * heads
    output_gate = h * dim + dim * qkv + dim  # low-rank gate and its norm
    return projections + short_convs + forget_gate + beta + output_gate


# -- Mamba-1 (transformers modeling_mamba.py MambaMixer) -------------------------------------


def mamba1_dims(view: ConfigView, hidden: int) -> tuple[int, int, int, int]:
    """(d_inner, d_state, d_conv, dt_rank) of a Mamba-1 mixer."""
    expand = positive(view.get_int("mamba_expand", "expand")) or 2
    # falcon-mamba-7b says expand=16 but intermediate_size=8192 (2x): the weights follow intermediate_size.
    d_inner = positive(view.get_int("intermediate_size")) if not view.present("mamba_expand") else None
    d_inner = d_inner or expand * hidden
    d_state = positive(view.get_int("mamba_d_state", "state_size", "d_state")) or 16
    d_conv = positive(view.get_int("mamba_d_conv", "conv_kernel", "d_conv")) or 4
    dt_rank = positive(view.get_int("mamba_dt_rank", "time_step_rank", "dt_rank")) or -(-hidden // 16)
    return d_inner, d_state, d_conv, dt_rank


def mamba1_state(view: ConfigView, hidden: int | None) -> tuple[int, int]:
    """(d_inner, d_conv - 1) conv window and (d_inner, d_state) SSM state (vLLM ``mamba1_state_shape``)."""
    if hidden is None:
        return 0, 0
    d_inner, d_state, d_conv, _ = mamba1_dims(view, hidden)
    return d_inner * (d_conv - 1), d_inner * d_state


def mamba1_params(ctx: LayerCtx) -> int:
    view, h = ctx.view, ctx.hidden
    d_inner, d_state, d_conv, dt_rank = mamba1_dims(view, h)
    proj_bias = bool(view.get_bool("use_bias", "mamba_proj_bias"))
    conv_bias = view.get_bool("use_conv_bias", "mamba_conv_bias") is not False
    in_out = h * 2 * d_inner + d_inner * h + (2 * d_inner + h if proj_bias else 0)
    conv = d_inner * d_conv + (d_inner if conv_bias else 0)
    x_proj = d_inner * (dt_rank + 2 * d_state)
    dt_proj = dt_rank * d_inner + d_inner
    ssm = d_inner * d_state + d_inner  # A_log, D
    total = in_out + conv + x_proj + dt_proj + ssm
    if ctx.family.mamba_dt_norms:
        total += dt_rank + 2 * d_state  # Jamba's dt/B/C layernorms
    return total


# -- Mamba-2 (transformers modeling_mamba2.py Mamba2Mixer) -----------------------------------


def _small_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 1 << 20 else None


def mamba2_dims(view: ConfigView, hidden: int) -> tuple[int, int, int, int, int]:
    """(d_inner, n_groups, d_state, n_heads, d_conv) of a Mamba-2 mixer, whatever the family's key names."""
    ssm_cfg = view.get_dict("ssm_cfg") or {}
    heads = positive(view.get_int("mamba_num_heads", "mamba_n_heads"))
    head_dim = positive(view.get_int("mamba_head_dim", "mamba_d_head"))
    if family_of(view.get_str("model_type")).ssm_heads_named_plainly:
        # transformers' Mamba2Config names its SSM heads num_heads / head_dim.
        heads = heads or positive(view.get_int("num_heads"))
        head_dim = head_dim or positive(view.get_int("head_dim"))
    expand = positive(view.get_int("mamba_expand", "expand")) or _small_int(ssm_cfg.get("expand")) or 2
    d_inner = positive(view.get_int("mamba_d_ssm")) or (
        heads * head_dim if heads and head_dim else expand * hidden
    )
    head_dim = head_dim or _small_int(ssm_cfg.get("headdim")) or 64
    heads = heads or max(d_inner // head_dim, 1)
    groups = (
        positive(view.get_int("mamba_n_groups", "n_groups", "mamba_num_groups"))
        or _small_int(ssm_cfg.get("ngroups"))
        or 1
    )
    d_state = (
        positive(view.get_int("mamba_d_state", "ssm_state_size", "state_size"))
        or _small_int(ssm_cfg.get("d_state"))
        or 128
    )
    d_conv = positive(view.get_int("mamba_d_conv", "conv_kernel")) or _small_int(ssm_cfg.get("d_conv")) or 4
    return d_inner, groups, d_state, heads, d_conv


def mamba2_state(view: ConfigView, hidden: int | None) -> tuple[int, int]:
    """(d_inner + 2 groups x d_state) conv channels and (heads, head_dim, d_state) SSM state, heads x head_dim
    being d_inner (vLLM ``mamba2_state_shape``, SGLang ``Mamba2StateShape.create`` at TP 1)."""
    if hidden is None:
        return 0, 0
    d_inner, groups, d_state, _, d_conv = mamba2_dims(view, hidden)
    return (d_inner + 2 * groups * d_state) * (d_conv - 1), d_inner * d_state


def mamba2_params(ctx: LayerCtx) -> int:
    view, h = ctx.view, ctx.hidden
    d_inner, groups, d_state, heads, d_conv = mamba2_dims(view, h)
    conv_dim = d_inner + 2 * groups * d_state
    conv_bias = view.get_bool("use_conv_bias", "mamba_conv_bias") is not False
    proj_bias = bool(view.get_bool("use_bias", "mamba_proj_bias"))
    total = h * (d_inner + conv_dim + heads) + conv_dim * d_conv + 3 * heads + d_inner + d_inner * h
    total += (conv_dim if conv_bias else 0) + (d_inner + conv_dim + heads + h if proj_bias else 0)
    if ctx.family.mamba_norm_flag and not view.get_bool("mamba_rms_norm"):
        total -= d_inner  # Falcon-H1 drops the gated norm unless mamba_rms_norm
    return total
