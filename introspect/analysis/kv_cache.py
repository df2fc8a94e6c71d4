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

from introspect.analysis.config_view import ConfigView, positive
from introspect.analysis.layers import FULL, GDN, KDA, MAMBA, MAMBA2, SLIDING, LayerLayout
from introspect.analysis.params import mamba1_dims, mamba2_dims

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


def _attention_elements(attention: dict[str, Any]) -> int:
    if attention.get("type") == "MLA":
        return (attention.get("kv_lora_rank") or 0) + (attention.get("qk_rope_head_dim") or 0)
    kv_heads, head_dim = attention.get("num_kv_heads") or 0, attention.get("head_dim") or 0
    v_dim = attention.get("v_head_dim") or head_dim
    return kv_heads * (head_dim + v_dim)


def _state_elements(view: ConfigView, kind: str, hidden: int | None) -> int:
    """Fixed per-sequence state of one recurrent layer (conv window + recurrent matrix)."""
    if kind == GDN:
        nk = positive(view.get_int("linear_num_key_heads")) or 16
        nv = positive(view.get_int("linear_num_value_heads")) or 32
        dk = positive(view.get_int("linear_key_head_dim")) or 128
        dv = positive(view.get_int("linear_value_head_dim")) or 128
        conv = positive(view.get_int("linear_conv_kernel_dim")) or 4
        return (2 * nk * dk + nv * dv) * (conv - 1) + nv * dk * dv
    if kind == KDA:
        sub = view.sub("linear_attn_config")
        heads = (sub.get_int("num_heads") if sub else None) or 32
        dim = (sub.get_int("head_dim") if sub else None) or 128
        conv = (sub.get_int("short_conv_kernel_size") if sub else None) or 4
        return 3 * heads * dim * (conv - 1) + heads * dim * dim
    if hidden is None:
        return 0
    if kind == MAMBA:
        d_inner, d_state, d_conv, _ = mamba1_dims(view, hidden)
        return d_inner * (d_conv - 1) + d_inner * d_state
    if kind == MAMBA2:
        d_inner, groups, d_state, _, d_conv = mamba2_dims(view, hidden)
        return (d_inner + 2 * groups * d_state) * (d_conv - 1) + d_inner * d_state
    return 0


def analyze_kv_cache(
    view: ConfigView, layout: LayerLayout, attention: dict[str, Any], hidden: int | None
) -> dict[str, Any]:
    """The ``architecture.kv_cache`` section."""
    dtype = model_dtype(view)
    width = DTYPE_BYTES.get(dtype or "", 2)
    per_layer = _attention_elements(attention) * width
    per_kind: dict[str, dict[str, Any]] = {}
    for kind, layers in sorted(layout.components.items()):
        entry: dict[str, Any] = {"layers": layers}
        if kind in (FULL, SLIDING):
            entry["bytes_per_token_per_layer"] = per_layer
            entry["bytes_per_token"] = per_layer * layers
        else:
            state = _state_elements(view, kind, hidden) * width
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
