"""Parameter counts estimated from config.json alone: total, active, embedding.

Counting convention (tests/data/realconfigs/README.md): *active* is what one
token's forward pass multiplies by: the output head counts, the input embedding
lookup does not; routed experts count ``experts_per_token`` of them, shared
experts all. *Total* counts every stored weight once (a tied head is the
embedding). MTP layers are reported on their own, never in total or active.
A vision tower, when the config describes one, is estimated and included in
total (it is stored) but not in active (it does not run per text token).

Every formula below mirrors the module shapes of the family's transformers
implementation; norms and biases are included where the family has them so the
estimate can be held to a 1% agreement with the safetensors headers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from introspect.analysis.attention import hidden_size
from introspect.analysis.config_view import MAX_LAYERS, ConfigView, positive
from introspect.analysis.layers import FULL, GDN, KDA, LINEAR, MAMBA, MAMBA2, MLP, SLIDING, LayerLayout
from introspect.analysis.moe import DENSE, SPARSE, MoeLayout

# FFN is up/down only (no gate projection) in these families.
UNGATED_FAMILIES = frozenset(
    {
        "gpt2",
        "gpt_bigcode",
        "bert",
        "roberta",
        "falcon",
        "RefinedWeb",
        "RefinedWebModel",
        "gpt_neox",
        "opt",
        "bloom",
        "phi",
        "starcoder2",
        "nemotron",
        "nemotron_h",
        "mpt",
        "gptj",
    }
)
# Families with biases on every linear and LayerNorm (weight + bias).
BIAS_FAMILIES = frozenset({"gpt2", "gpt_bigcode", "bert", "roberta", "starcoder2", "gpt_neox", "opt", "phi"})
QKV_BIAS_FAMILIES = frozenset({"qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl"})
GATED_Q_FAMILIES = frozenset({"qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"})
# Routers with a per-expert bias even when the config names no sigmoid scoring.
ROUTER_BIAS_FAMILIES = frozenset({"gpt_oss", "glm4_moe", "kimi_linear", "minimax_m2", "nemotron_h", "dots1"})
LEARNED_POSITIONS = frozenset({"gpt2", "gpt_bigcode", "bert", "roberta", "opt"})
UNGATED_ACTIVATIONS = frozenset({"relu2", "gelu", "gelu_new", "gelu_pytorch_tanh", "relu"})


@dataclass
class ParamEstimate:
    total: int | None
    active: int | None
    embedding: int | None
    breakdown: dict[str, int] = field(default_factory=dict)
    vision: int | None = None
    mtp: dict[str, Any] | None = None


@dataclass
class _Ctx:
    view: ConfigView
    model_type: str | None
    hidden: int
    attention: dict[str, Any]
    gated: bool
    bias: bool


# -- token mixers ---------------------------------------------------------------


def _attention(ctx: _Ctx) -> int:
    att, h, view = ctx.attention, ctx.hidden, ctx.view
    heads = att.get("num_heads") or 0
    if att.get("type") == "MLA":
        nope, rope = att.get("qk_nope_head_dim") or 0, att.get("qk_rope_head_dim") or 0
        v_dim, kv_lora = att.get("v_head_dim") or nope, att.get("kv_lora_rank") or 0
        q_lora = att.get("q_lora_rank")
        qk = heads * (nope + rope)
        q = h * q_lora + q_lora + q_lora * qk if q_lora else h * qk  # low-rank query with its norm
        kv = h * (kv_lora + rope) + kv_lora + kv_lora * heads * (nope + v_dim)
        return q + kv + heads * v_dim * h
    head_dim, kv_heads = att.get("head_dim") or 0, att.get("num_kv_heads") or 0
    q_dim, kv_dim = heads * head_dim, kv_heads * head_dim
    gated_q = ctx.model_type in GATED_Q_FAMILIES or view.get_bool("attn_output_gate") is True
    total = h * q_dim * (2 if gated_q else 1) + 2 * h * kv_dim + q_dim * h
    if ctx.bias or ctx.model_type in QKV_BIAS_FAMILIES or view.get_bool("attention_bias", "bias", "qkv_bias"):
        total += q_dim + 2 * kv_dim + (h if ctx.bias or ctx.model_type == "gpt_oss" else 0)
    if (
        ctx.model_type in GATED_Q_FAMILIES
        or view.get_bool("use_qk_norm")
        or ctx.model_type in ("qwen3", "qwen3_moe")
    ):
        total += 2 * head_dim
    return total


def _gated_deltanet(ctx: _Ctx) -> int:
    view, h = ctx.view, ctx.hidden
    nk = positive(view.get_int("linear_num_key_heads")) or 16
    nv = positive(view.get_int("linear_num_value_heads")) or 32
    dk = positive(view.get_int("linear_key_head_dim")) or 128
    dv = positive(view.get_int("linear_value_head_dim")) or 128
    conv = positive(view.get_int("linear_conv_kernel_dim")) or 4
    key_dim, value_dim = nk * dk, nv * dv
    return (
        h * (2 * key_dim + 2 * value_dim)  # in_proj_qkvz
        + h * 2 * nv  # in_proj_ba
        + (2 * key_dim + value_dim) * conv  # depthwise conv1d
        + 2 * nv  # dt_bias, A_log
        + dv  # gated RMSNorm
        + value_dim * h  # out_proj
    )


def _kda(ctx: _Ctx) -> int:
    sub = ctx.view.sub("linear_attn_config")
    heads = (sub.get_int("num_heads") if sub else None) or ctx.attention.get("num_heads") or 32
    dim = (sub.get_int("head_dim") if sub else None) or 128
    conv = (sub.get_int("short_conv_kernel_size") if sub else None) or 4
    h, qkv = ctx.hidden, heads * dim
    projections = 3 * h * qkv + qkv * h  # q, k, v in; o out
    short_convs = 3 * qkv * conv
    forget_gate = h * dim + dim * qkv + qkv + heads  # low-rank gate, dt_bias, A_log
    beta = h * heads
    output_gate = h * dim + dim * qkv + dim  # low-rank gate and its norm
    return projections + short_convs + forget_gate + beta + output_gate


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


def _mamba1(ctx: _Ctx) -> int:
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
    if ctx.model_type == "jamba":
        total += dt_rank + 2 * d_state  # Jamba's dt/B/C layernorms
    return total


def mamba2_dims(view: ConfigView, hidden: int) -> tuple[int, int, int, int, int]:
    """(d_inner, n_groups, d_state, n_heads, d_conv) of a Mamba-2 mixer, whatever the family's key names."""
    ssm_cfg = view.get_dict("ssm_cfg") or {}
    heads = positive(view.get_int("mamba_num_heads", "mamba_n_heads"))
    head_dim = positive(view.get_int("mamba_head_dim", "mamba_d_head"))
    if view.get_str("model_type") == "mamba2":
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


def _small_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 1 << 20 else None


def _mamba2(ctx: _Ctx) -> int:
    view, h = ctx.view, ctx.hidden
    d_inner, groups, d_state, heads, d_conv = mamba2_dims(view, h)
    conv_dim = d_inner + 2 * groups * d_state
    conv_bias = view.get_bool("use_conv_bias", "mamba_conv_bias") is not False
    proj_bias = bool(view.get_bool("use_bias", "mamba_proj_bias"))
    total = h * (d_inner + conv_dim + heads) + conv_dim * d_conv + 3 * heads + d_inner + d_inner * h
    total += (conv_dim if conv_bias else 0) + (d_inner + conv_dim + heads + h if proj_bias else 0)
    if ctx.model_type == "falcon_h1" and not view.get_bool("mamba_rms_norm"):
        total -= d_inner  # Falcon-H1 drops the gated norm unless mamba_rms_norm
    return total


MIXERS = {
    FULL: _attention,
    SLIDING: _attention,
    GDN: _gated_deltanet,
    KDA: _kda,
    MAMBA: _mamba1,
    MAMBA2: _mamba2,
}


def _mixer(ctx: _Ctx, kind: str) -> tuple[int, int]:
    """(attention params, recurrent params) of one layer's mixer(s); ``a+b`` runs both."""
    attention = recurrent = 0
    for part in kind.split("+"):
        if part in (FULL, SLIDING):
            attention += _attention(ctx)
        elif part in MIXERS:
            recurrent += MIXERS[part](ctx)
        elif part not in (MLP, LINEAR, "conv"):
            attention += _attention(ctx)  # unknown mixer: count it as attention (best effort)
    return attention, recurrent


# -- feed-forward -------------------------------------------------------------------


def _mlp(ctx: _Ctx, width: int) -> int:
    matrices = 3 if ctx.gated else 2
    total = matrices * ctx.hidden * width
    if ctx.bias:
        total += (matrices - 1) * width + ctx.hidden
    return total


def _dense_width(ctx: _Ctx) -> int:
    view = ctx.view
    width = positive(
        view.get_int("intermediate_size", "n_inner", "ffn_hidden_size", "d_ff", "ffn_dim", "d_intermediate")
    )
    if ctx.model_type in ("mamba2",) or view.present("ssm_cfg"):
        width = positive(view.get_int("d_intermediate"))
    return width or 4 * ctx.hidden  # GPT-2 / Falcon default: 4 x hidden


def _moe(ctx: _Ctx, moe: MoeLayout) -> tuple[int, int, dict[str, int]]:
    section, h = moe.section, ctx.hidden
    experts, topk = section["routed_experts"] or 0, section["experts_per_token"] or 1
    width = moe.expert_width or 0
    one = _mlp(ctx, width)
    if ctx.model_type == "gpt_oss":
        one += 2 * width + h  # gate_up and down biases per expert
    router = experts * h
    if (
        section.get("topk_method") == "noaux_tc"
        or section.get("scoring_func") == "sigmoid"
        or ctx.view.get_bool("use_routing_bias")
        or ctx.model_type in ROUTER_BIAS_FAMILIES
    ):
        router += experts  # sigmoid routers keep an e_score_correction_bias; gpt-oss a plain bias
    shared = _mlp(ctx, moe.shared_width) if moe.shared_width else 0
    shared += h if moe.shared_gate else 0
    parts = {"experts_routed": experts * one, "experts_shared": shared, "router": router}
    return experts * one + shared + router, min(topk, experts) * one + shared + router, parts


# -- embeddings, heads, extras --------------------------------------------------------


def _vocab(view: ConfigView) -> int | None:
    vocab = positive(view.get_int("vocab_size", "n_vocab", "padded_vocab_size"))
    multiple = positive(view.get_int("pad_vocab_size_multiple"))
    if vocab and multiple:
        vocab = -(-vocab // multiple) * multiple  # mamba_ssm pads the embedding rows
    return vocab


def tied_embeddings(view: ConfigView) -> bool:
    tied = view.get_bool("tie_word_embeddings", "tie_embeddings")
    return bool(tied)


def _positions(ctx: _Ctx) -> int:
    if ctx.model_type not in LEARNED_POSITIONS:
        return 0
    view = ctx.view
    positions = positive(view.get_int("n_positions", "max_position_embeddings")) or 0
    extra = (positive(view.get_int("type_vocab_size")) or 0) if ctx.model_type in ("bert", "roberta") else 0
    return (positions + extra) * ctx.hidden


def vision_params(root: ConfigView, text_hidden: int) -> int | None:
    """Rough size of a ViT tower + projector described by ``vision_config`` (None when absent)."""
    vc = root.sub("vision_config")
    if vc is None:
        return None
    layers = positive(
        vc.get_int("depth", "num_hidden_layers", "vt_num_hidden_layers", "num_layers", maximum=MAX_LAYERS)
    )
    width = positive(vc.get_int("hidden_size", "vt_hidden_size", "embed_dim", "width"))
    if layers is None or width is None:
        return None
    inner = positive(vc.get_int("intermediate_size", "vt_intermediate_size")) or 4 * width
    patch = positive(vc.get_int("patch_size")) or 14
    channels = positive(vc.get_int("in_channels", "num_channels")) or 3
    temporal = positive(vc.get_int("temporal_patch_size")) or 1
    block = 4 * width * width + 2 * width * inner + 9 * width + inner  # attn + MLP + biases + norms
    tower = layers * block + channels * patch * patch * temporal * width
    image = positive(vc.get_int("image_size"))
    if image:
        tower += (image // patch) ** 2 * width  # learned position table (SigLIP)
    merge = positive(vc.get_int("spatial_merge_size")) or 1
    kernel = vc.get_int_list("merge_kernel_size")
    factor = merge * merge if merge > 1 else (kernel[0] * kernel[1] if kernel and len(kernel) == 2 else 1)
    out = positive(vc.get_int("out_hidden_size", "text_hidden_size")) or text_hidden
    merged = width * factor
    projector = merged * merged + merged * out if factor > 1 else width * out
    return tower + projector


def mtp_layer_count(view: ConfigView) -> tuple[int, str | None]:
    """Number of multi-token-prediction layers the config declares, and the key."""
    for key in ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_layers", "n_mtp_layers"):
        value = view.get_int(key, maximum=MAX_LAYERS)
        if value is not None:
            return value, key
    modules = view.get_int("num_mtp_modules", maximum=MAX_LAYERS)
    if modules is not None and view.get_bool("use_mtp") is not False:
        # MiniMax-M2: num_mtp_modules modules of mtp_transformer_layers layers each.
        return modules * (
            positive(view.get_int("mtp_transformer_layers", maximum=MAX_LAYERS)) or 1
        ), "num_mtp_modules"
    return 0, None


# -- the estimate -------------------------------------------------------------------------


def _gated(view: ConfigView, model_type: str | None) -> bool:
    if model_type in UNGATED_FAMILIES:
        return False
    act = view.get_str("mlp_hidden_act")
    return not (act is not None and act in UNGATED_ACTIVATIONS)


def estimate_params(
    view: ConfigView,
    root: ConfigView,
    model_type: str | None,
    layout: LayerLayout,
    attention: dict[str, Any],
    moe: MoeLayout,
) -> ParamEstimate:
    """Config-based parameter counts; fields are None when the config lacks the sizes."""
    hidden = hidden_size(view)
    vocab = _vocab(view)
    if hidden is None or not layout.pattern:
        return ParamEstimate(None, None, None)
    ctx = _Ctx(view, model_type, hidden, attention, _gated(view, model_type), model_type in BIAS_FAMILIES)
    norm = 2 * hidden if ctx.bias else hidden

    parts: dict[str, int] = {"attention": 0, "recurrent": 0, "dense_ffn": 0, "experts_routed": 0}
    parts.update({"experts_shared": 0, "router": 0, "norms": 0})
    active_layers = 0
    _, moe_active, moe_parts = _moe(ctx, moe) if moe.section["is_moe"] else (0, 0, {})
    dense = _mlp(ctx, _dense_width(ctx))
    for kind, ffn in zip(layout.pattern, moe.ffn, strict=False):
        attention_part, recurrent_part = _mixer(ctx, kind)
        norms = norm * (2 if ffn is not None and kind != MLP else 1)
        parts["attention"] += attention_part
        parts["recurrent"] += recurrent_part
        parts["norms"] += norms
        active_layers += attention_part + recurrent_part + norms
        if ffn == DENSE:
            parts["dense_ffn"] += dense
            active_layers += dense
        elif ffn == SPARSE:
            for key, value in moe_parts.items():
                parts[key] += value
            active_layers += moe_active
    layer_total = sum(parts.values())

    embedding = (vocab or 0) * hidden + _positions(ctx)
    head = 0 if tied_embeddings(view) else (vocab or 0) * hidden
    head_active = (vocab or 0) * hidden  # a tied head still multiplies every token
    extra = 0
    if model_type in ("bert", "roberta"):
        extra = hidden * hidden + hidden  # pooler (post-LN: the "final norm" is the embedding LayerNorm)
    parts.update({"embedding": embedding, "lm_head": head, "final_norm": norm + extra})
    vision = vision_params(root, hidden)
    total = layer_total + embedding + head + norm + extra + (vision or 0)
    active = active_layers + head_active + norm
    if vision:
        parts["vision"] = vision

    mtp = _mtp_estimate(ctx, moe, moe_active, moe_parts, dense, norm)
    return ParamEstimate(total, active, embedding, parts, vision, mtp)


def _mtp_estimate(
    ctx: _Ctx,
    moe: MoeLayout,
    moe_active: int,
    moe_parts: dict[str, int],
    dense: int,
    norm: int,
) -> dict[str, Any]:
    layers, key = mtp_layer_count(ctx.view)
    if layers <= 0:
        return {"layers": 0, "params": 0, "active": 0, "source": key}
    # Each MTP module: one decoder layer like the last one (with its two norms), a 2h -> h projection
    # and three norms (enorm, hnorm, head norm); embedding and head are shared with the main model
    # (DeepSeek-V3 report, section 2.2).
    attn = _attention(ctx) if ctx.attention.get("num_heads") else 0
    if moe.section["is_moe"]:
        ffn_total, ffn_active = sum(moe_parts.values()), moe_active
    else:
        ffn_total = ffn_active = dense
    glue = 2 * ctx.hidden * ctx.hidden + 5 * norm
    return {
        "layers": layers,
        "params": layers * (attn + ffn_total + glue),
        "active": layers * (attn + ffn_active + glue),
        "source": key,
    }
