"""Plain words for the report: the five answers users ask first, from the architecture section."""

from __future__ import annotations

from typing import Any

from introspect.analysis.architecture.layers import LayerLayout
from introspect.analysis.architecture.mixers import attention_words, words
from introspect.remote.contract import as_dict


def human(n: int | float | None) -> str:
    """A count in K/M/B/T, three significant digits."""
    if n is None:
        return "unknown"
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


def _drafter_words(drafter: dict[str, Any]) -> str:
    details = [
        f"{key.replace('_', ' ')} {drafter[key]}" for key in ("block_size", "num_layers") if drafter.get(key)
    ]
    if drafter.get("target_layer_ids"):
        details.append(f"target layers {drafter['target_layer_ids']}")
    extra = f" ({', '.join(details)})" if details else ""
    return f"{drafter.get('kind')}{extra} at {drafter.get('path')}"


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


def _attention(att: dict[str, Any], layout: LayerLayout, kv: dict[str, Any] | None) -> str:
    out = attention_words(att)
    if att.get("sliding_window"):
        out += f"; sliding window {att['sliding_window']} on {layout.kinds.get('sliding_attention', 0)} layers"
    if att.get("attention_chunk_size"):
        out += (f"; chunked attention ({att['attention_chunk_size']}-token chunks) on "
                f"{layout.kinds.get('chunked_attention', 0)} layers")
    shared = sum(entry.get("kv_shared_layers", 0) for entry in ((kv or {}).get("per_kind") or {}).values())
    if shared:
        out += f"; {shared} layers reuse another layer's K/V (cross-layer KV sharing)"
    return out


def _experts(moe: dict[str, Any]) -> str:
    if moe.get("is_moe") is False:
        return "dense (no experts)"
    if not moe.get("is_moe"):
        return "unknown"
    routing = ", ".join(
        f"{key} {moe[key]}" for key in ("scoring_func", "topk_method", "n_group", "topk_group") if moe.get(key)
    )
    experts = (
        f"MoE: {moe['routed_experts']} routed + {moe['shared_experts']} shared experts, "
        f"{moe['experts_per_token']} per token; {moe['moe_layers']} MoE layers, {moe['dense_layers']} dense"
    )
    return experts + (f" ({routing})" if routing else "")


def _speculative(spec: dict[str, Any]) -> str:
    drafters = spec.get("drafters") or []
    out = f"{spec['mtp_layers']} MTP layer(s)" if spec.get("mtp_layers") else "no MTP layers"
    if drafters:
        return out + "; drafters: " + ", ".join(_drafter_words(d) for d in drafters)
    return out + "; no drafter found beside the model"


def resummarise_layers(arch: dict[str, Any]) -> None:
    """The mixers and attention lines again, after a witness settled the layer kinds."""
    section, out = as_dict(arch.get("layers")), arch.get("summary")
    pattern = section.get("pattern")
    if not isinstance(out, dict) or not isinstance(pattern, list):
        return
    layout = LayerLayout([str(k) for k in pattern], section.get("source"))
    out["mixers"] = _mixers(layout) + f" (source: {section.get('settled_by')})"
    out["attention"] = _attention(arch["attention"], layout, arch.get("kv_cache"))


def summary(arch: dict[str, Any], layout: LayerLayout) -> dict[str, str]:
    """``architecture.summary``: mixers, attention, experts, size, speculative."""
    params = arch["params"]
    size = (
        f"{arch['num_layers']} layers; {human(params['total'])} parameters total, "
        f"{human(params['active'])} active per token (source: {params['source']})"
    )
    if params.get("source") == "config" and params.get("assumptions"):
        size += "; an estimate assuming " + "; ".join(params["assumptions"])
    understood = as_dict(arch.get("layers")).get("understood") is not False
    out = {
        "mixers": _mixers(layout, understood),
        "attention": _attention(arch["attention"], layout, arch.get("kv_cache")),
        "experts": _experts(arch["moe"]),
        "size": size,
        "speculative": _speculative(arch["speculative"]),
    }
    confidence = arch.get("confidence")
    if isinstance(confidence, dict) and confidence.get("level") == "low":
        out["confidence"] = (f"LOW: {confidence['reason']}; the {', '.join(confidence['verdicts'])} answers "
                             "above rest on guessed key names")
    return out
