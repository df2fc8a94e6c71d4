"""KV-cache and recurrent-state footprint at the model's own dtype.

Attention layers grow with every token: 2 x kv_heads x head_dim elements per
layer (K and V), except MLA which stores one shared latent of
``kv_lora_rank + qk_rope_head_dim`` elements. Linear-attention and SSM layers
keep a fixed state per sequence instead (a short-conv window plus the recurrent
matrix), reported apart because it does not grow with context. Sliding-window
layers stop growing at the window: ``bytes_per_token_beyond_window`` is the
per-token cost once the context is longer than ``sliding_window_cap``.
"""

from __future__ import annotations

from typing import Any

from introspect.analysis.config_view import ConfigView
from introspect.analysis.kinds import FULL, SLIDING
from introspect.analysis.layers import LayerLayout
from introspect.analysis.mixers import ATTENTION_KINDS, attention_kv_elements, state_elements

DTYPE_BYTES = {
    "float32": 4,
    "fp32": 4,
    "float": 4,
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "fp8": 1,
    "float64": 8,
}


def model_dtype(view: ConfigView) -> str | None:
    """The declared weight dtype, normalised ("torch.bfloat16" -> "bfloat16")."""
    raw = view.get_str("torch_dtype", "dtype")
    if raw is None:
        return None
    return raw.lower().removeprefix("torch.")


def analyze_kv_cache(
    view: ConfigView, layout: LayerLayout, attention: dict[str, Any], hidden: int | None
) -> dict[str, Any]:
    """The ``architecture.kv_cache`` section."""
    dtype = model_dtype(view)
    width = DTYPE_BYTES.get(dtype or "", 2)
    per_layer = attention_kv_elements(attention) * width
    per_kind: dict[str, dict[str, Any]] = {}
    for kind, layers in sorted(layout.components.items()):
        entry: dict[str, Any] = {"layers": layers}
        if kind in ATTENTION_KINDS:
            entry["bytes_per_token_per_layer"] = per_layer
            entry["bytes_per_token"] = per_layer * layers
        else:
            state = state_elements(view, kind, hidden) * width
            if state:
                entry["state_bytes_per_layer"] = state
                entry["state_bytes_per_sequence"] = state * layers
        per_kind[kind] = entry

    full_bytes = per_kind.get(FULL, {}).get("bytes_per_token", 0)
    sliding_bytes = per_kind.get(SLIDING, {}).get("bytes_per_token", 0)
    window = attention.get("sliding_window") if SLIDING in per_kind else None
    return {
        "dtype": dtype,
        "dtype_assumed": dtype not in DTYPE_BYTES,  # unknown or absent: 2 bytes assumed
        "bytes_per_element": width,
        "bytes_per_token": full_bytes + sliding_bytes,
        "per_kind": per_kind,
        "state_bytes_per_sequence": sum(
            entry.get("state_bytes_per_sequence", 0) for entry in per_kind.values()
        ),
        "sliding_window_cap": window,
        "bytes_per_token_beyond_window": full_bytes if window else full_bytes + sliding_bytes,
    }
