"""Plain words for the report: the five answers users ask first, from the architecture section."""

from __future__ import annotations

from introspect.analysis.architecture.layers import LayerLayout
from introspect.analysis.architecture.mixers import attention_words, words
from introspect.documents.profile_architecture import (
    Architecture,
    Attention,
    Drafter,
    KvCache,
    Moe,
    Speculative,
    Summary,
)


def human(n: int | float | None) -> str:
    """A count in K/M/B/T, three significant digits."""
    if n is None:
        return "unknown"
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


def _drafter_words(drafter: Drafter) -> str:
    details = [f"{key.replace('_', ' ')} {value}" for key, value in
               (("block_size", drafter.block_size), ("num_layers", drafter.num_layers)) if value]
    if drafter.target_layer_ids:
        details.append(f"target layers {drafter.target_layer_ids}")
    extra = f" ({', '.join(details)})" if details else ""
    return f"{drafter.kind}{extra} at {drafter.path}"


def _mixers(layout: LayerLayout, understood: bool = True) -> str:
    if not understood:
        return "unknown: the layer layout was not understood (see the layout-unknown finding)"
    kinds = layout.kinds
    listing = ", ".join(f"{count} {words(kind)}" for kind, count in kinds.items())
    if not kinds:
        return "unknown: no layer count in config.json"
    if layout.pure_attention:
        return f"pure attention ({listing} layers)"
    if layout.attention_layers == 0:
        return f"no attention: pure SSM/linear ({listing} layers)"
    return f"hybrid ({listing} layers)"


def _attention(att: Attention, layout: LayerLayout, kv: KvCache | None) -> str:
    out = attention_words(att)
    if att.sliding_window:
        out += f"; sliding window {att.sliding_window} on {layout.kinds.get('sliding_attention', 0)} layers"
    if att.attention_chunk_size:
        out += (f"; chunked attention ({att.attention_chunk_size}-token chunks) on "
                f"{layout.kinds.get('chunked_attention', 0)} layers")
    shared = sum(entry.kv_shared_layers or 0 for entry in kv.per_kind.values()) if kv is not None else 0
    if shared:
        out += f"; {shared} layers reuse another layer's K/V (cross-layer KV sharing)"
    return out


def _experts(moe: Moe) -> str:
    if moe.is_moe is False:
        return "dense (no experts)"
    if not moe.is_moe:
        return "unknown"
    routing = ", ".join(f"{key} {value}" for key, value in (
        ("scoring_func", moe.scoring_func), ("topk_method", moe.topk_method), ("n_group", moe.n_group),
        ("topk_group", moe.topk_group)) if value)
    experts = (
        f"MoE: {moe.routed_experts} routed + {moe.shared_experts} shared experts, "
        f"{moe.experts_per_token} per token; {moe.moe_layers} MoE layers, {moe.dense_layers} dense"
    )
    return experts + (f" ({routing})" if routing else "")


def _speculative(spec: Speculative) -> str:
    out = f"{spec.mtp_layers} MTP layer(s)" if spec.mtp_layers else "no MTP layers"
    if spec.drafters:
        return out + "; drafters: " + ", ".join(_drafter_words(d) for d in spec.drafters)
    return out + "; no drafter found beside the model"


def resummarise_layers(arch: Architecture) -> None:
    """The mixers and attention lines again, after a witness settled the layer kinds."""
    section = arch.layers
    if section.pattern is None:
        return
    layout = LayerLayout(list(section.pattern), section.source)
    arch.summary.mixers = _mixers(layout) + f" (source: {section.settled_by})"
    arch.summary.attention = _attention(arch.attention, layout, arch.kv_cache)


def summary(arch: Architecture, layout: LayerLayout) -> Summary:
    """``architecture.summary``: mixers, attention, experts, size, speculative."""
    params = arch.params
    size = (
        f"{arch.num_layers} layers; {human(params.total)} parameters total, "
        f"{human(params.active)} active per token (source: {params.source})"
    )
    if params.source == "config" and params.assumptions:
        size += "; an estimate assuming " + "; ".join(params.assumptions)
    out = Summary(mixers=_mixers(layout, arch.layers.understood is not False),
                  attention=_attention(arch.attention, layout, arch.kv_cache), experts=_experts(arch.moe),
                  size=size, speculative=_speculative(arch.speculative))
    confidence = arch.confidence
    if confidence is not None and confidence.level == "low":
        out.confidence = (f"LOW: {confidence.reason}; the {', '.join(confidence.verdicts)} answers "
                          "above rest on guessed key names")
    return out
