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

from introspect.analysis.architecture.attention import hidden_size
from introspect.analysis.architecture.compressed_attention import head_hyper_connection_params
from introspect.analysis.architecture.config_view import MAX_LAYERS, ConfigView, positive
from introspect.analysis.architecture.families import Family
from introspect.analysis.architecture.kinds import MLP
from introspect.analysis.architecture.kv_cache import kv_borrowing_layers
from introspect.analysis.architecture.layers import LayerLayout
from introspect.analysis.architecture.mixer_math import (
    LayerCtx,
    attention_params,
    cla_kv_params,
    rwkv7_first_layer,
)
from introspect.analysis.architecture.mixers import layer_params
from introspect.analysis.architecture.moe import DENSE, SPARSE, MoeLayout
from introspect.documents.profile_architecture import Attention, Mtp

UNGATED_ACTIVATIONS = frozenset({"relu2", "gelu", "gelu_new", "gelu_pytorch_tanh", "relu"})


@dataclass
class ParamEstimate:
    total: int | None
    active: int | None
    embedding: int | None
    breakdown: dict[str, int] = field(default_factory=dict)
    vision: int | None = None
    mtp: Mtp | None = None
    # What the estimate took for granted because nothing in the config said it (named in the profile).
    assumptions: list[str] = field(default_factory=list)


# -- feed-forward -------------------------------------------------------------------


def _mlp(ctx: LayerCtx, width: int) -> int:
    matrices = 3 if ctx.gated else 2
    total = matrices * ctx.hidden * width
    if ctx.bias:
        total += (matrices - 1) * width + ctx.hidden
    return total


def _dense_width(ctx: LayerCtx) -> int:
    view = ctx.view
    if ctx.family.dense_width_key is not None:
        # Llama-4: dense layers are intermediate_size_mlp wide, intermediate_size is one expert's width.
        own = positive(view.get_int(ctx.family.dense_width_key))
        if own is not None:
            return own
    width = positive(
        view.get_int("intermediate_size", "n_inner", "ffn_hidden_size", "d_ff", "ffn_dim", "d_intermediate")
    )
    if ctx.family.ffn_width_d_intermediate or view.present("ssm_cfg"):
        width = positive(view.get_int("d_intermediate"))
    return width or 4 * ctx.hidden  # GPT-2 / Falcon default: 4 x hidden


def _moe(ctx: LayerCtx, moe: MoeLayout) -> tuple[int, int, dict[str, int]]:
    section, h = moe.section, ctx.hidden
    experts, topk = section.routed_experts or 0, section.experts_per_token or 1
    width = moe.expert_width or 0
    one = _mlp(ctx, width)
    if ctx.family.expert_bias:
        one += 2 * width + h  # gate_up and down biases per expert
    router = experts * h
    if (
        section.topk_method == "noaux_tc"
        or section.scoring_func == "sigmoid"
        or ctx.view.get_bool("use_routing_bias")
        or ctx.family.router_bias
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


def _positions(ctx: LayerCtx) -> int:
    if not ctx.family.learned_positions:
        return 0
    view = ctx.view
    positions = positive(view.get_int("n_positions", "max_position_embeddings")) or 0
    extra = (positive(view.get_int("type_vocab_size")) or 0) if ctx.family.encoder_extras else 0
    return (positions + extra) * ctx.hidden


def vision_params(root: ConfigView, text_hidden: int) -> int | None:
    """Rough size of a ViT tower + projector described by ``vision_config`` (None when absent)."""
    vc = root.sub("vision_config")
    if vc is None:
        return None
    layers = positive(
        vc.get_int("depth", "num_hidden_layers", "vt_num_hidden_layers", "num_layers", maximum=MAX_LAYERS)
    )
    # Qwen2-VL's vision_config keeps the tower width in embed_dim; its hidden_size is the merger's output.
    width = positive(vc.get_int("embed_dim", "hidden_size", "vt_hidden_size", "width"))
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


def _gated(view: ConfigView, family: Family) -> bool:
    if family.ungated_ffn:
        return False
    act = view.get_str("mlp_hidden_act")
    return not (act is not None and act in UNGATED_ACTIVATIONS)


def estimate_params(
    view: ConfigView,
    root: ConfigView,
    family: Family,
    layout: LayerLayout,
    attention: Attention,
    moe: MoeLayout,
) -> ParamEstimate:
    """Config-based parameter counts; fields are None when the config lacks the sizes."""
    hidden = hidden_size(view)
    vocab = _vocab(view)
    if hidden is None or not layout.pattern or not family.config_params:
        return ParamEstimate(None, None, None)
    ctx = LayerCtx(view, family, hidden, attention, _gated(view, family), family.bias)
    norm = 2 * hidden if ctx.bias else hidden

    parts: dict[str, int] = {"attention": 0, "recurrent": 0, "dense_ffn": 0, "experts_routed": 0}
    parts.update({"experts_shared": 0, "router": 0, "norms": 0})
    active_layers = 0
    _, moe_active, moe_parts = _moe(ctx, moe) if moe.section.is_moe else (0, 0, {})
    dense = _mlp(ctx, _dense_width(ctx))
    # CLA "cross" layers have no k_proj / v_proj (vLLM hunyuan_v1.py HunYuanCrossAttention).
    cross = kv_borrowing_layers(view, family, len(layout.pattern)) if family.cla else set()
    for index, (kind, ffn) in enumerate(zip(layout.pattern, moe.ffn, strict=False)):
        attention_part, recurrent_part = layer_params(ctx, kind)
        if index in cross and attention_part:
            attention_part -= cla_kv_params(ctx)
        if index == 0 and family.wkv_heads:
            recurrent_part += rwkv7_first_layer(view, hidden)  # pre_norm, and no v_lora in layer 0
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
    parts["router"] -= _hash_layer_biases(ctx, moe, len(layout.pattern))
    layer_total = sum(parts.values())

    embedding = (vocab or 0) * hidden + _positions(ctx)
    head = 0 if tied_embeddings(view) else (vocab or 0) * hidden
    head_active = (vocab or 0) * hidden  # a tied head still multiplies every token
    extra = _model_extras(ctx)
    parts.update({"embedding": embedding, "lm_head": head, "final_norm": norm + extra})
    vision = vision_params(root, hidden)
    total = layer_total + embedding + head + norm + extra + (vision or 0)
    active = active_layers + head_active + norm
    if vision:
        parts["vision"] = vision

    mtp = _mtp_estimate(ctx, moe, moe_active, moe_parts, dense, norm)
    return ParamEstimate(total, active, embedding, parts, vision, mtp, _assumptions(view, family))


def _assumptions(view: ConfigView, family: Family) -> list[str]:
    """Shapes the estimate assumed: a family without a row gets the generic ones, which some families break
    (modeling_gpt_bigcode.py's MLP is up/down only; configuration_gemma.py ties the head by default)."""
    out = []
    if not family.known and view.get_str("mlp_hidden_act") is None:
        out.append("a gated MLP (gate, up and down projections) in every layer")
    if view.get_bool("tie_word_embeddings", "tie_embeddings") is None:
        out.append("an output head of its own (tie_word_embeddings absent)")
    return out


def _model_extras(ctx: LayerCtx) -> int:
    """Model-level weights beside the final norm."""
    if ctx.family.encoder_extras:
        return ctx.hidden * ctx.hidden + ctx.hidden  # pooler (post-LN: the "final norm" is the embedding LayerNorm)
    if ctx.family.compressed_attention:
        return head_hyper_connection_params(ctx.view, ctx.hidden)  # DeepSeek-V4's mHC head mixing
    return 0


def _hash_layer_biases(ctx: LayerCtx, moe: MoeLayout, n: int) -> int:
    """DeepSeek-V4 hash_moe layers route by a frozen tid2eid lookup: no gate.bias there
    (configuration_deepseek_v4.py: the first num_hash_layers layers are "hash_moe")."""
    if not ctx.family.compressed_attention or not moe.section.is_moe:
        return 0
    hashed = min(positive(ctx.view.get_int("num_hash_layers", maximum=MAX_LAYERS)) or 0, n)
    return hashed * (moe.section.routed_experts or 0)


def _mtp_estimate(
    ctx: LayerCtx,
    moe: MoeLayout,
    moe_active: int,
    moe_parts: dict[str, int],
    dense: int,
    norm: int,
) -> Mtp:
    layers, key = mtp_layer_count(ctx.view)
    if layers <= 0:
        return Mtp(layers=0, params=0, active=0, source=key)
    # Each MTP module: one decoder layer like the last one (with its two norms), a 2h -> h projection
    # and three norms (enorm, hnorm, head norm); embedding and head are shared with the main model
    # (DeepSeek-V3 report, section 2.2).
    attn = attention_params(ctx) if ctx.attention.num_heads else 0
    if moe.section.is_moe:
        ffn_total, ffn_active = sum(moe_parts.values()), moe_active
    else:
        ffn_total = ffn_active = dense
    glue = 2 * ctx.hidden * ctx.hidden + 5 * norm
    return Mtp(layers=layers, params=layers * (attn + ffn_total + glue), active=layers * (attn + ffn_active + glue),
               source=key)
