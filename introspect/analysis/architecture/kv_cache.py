"""KV-cache and recurrent-state footprint as the engines keep them.

Attention layers grow with every token: 2 x kv_heads x head_dim elements per
layer (K and V), except MLA which stores one shared latent of
``kv_lora_rank + qk_rope_head_dim`` elements, at the model's dtype; a sparse-attention
indexer adds its key at the engines' fixed fp8 layout (mixer_math.indexer_key_bytes), and a
family whose decoder layer holds two attention modules caches both (families.py
``attention_sublayers``). Linear-attention and SSM layers keep a fixed state per sequence
instead (a short-conv window plus the recurrent matrix), reported apart because it does not
grow with context, at each engine's state dtypes (state_dtypes.py: the recurrent matrix is
float32 by default in SGLang). Sliding-window layers stop growing at the window:
``bytes_per_token_beyond_window`` is the per-token cost once the context is longer than
``sliding_window_cap``.
"""

from __future__ import annotations

from introspect.analysis.architecture import compressed_attention as v4
from introspect.analysis.architecture.config_view import MAX_LAYERS, ConfigView, positive
from introspect.analysis.architecture.families import Family
from introspect.analysis.architecture.kinds import CHUNKED, CSA, HCA, SLIDING
from introspect.analysis.architecture.layers import LayerLayout
from introspect.analysis.architecture.mixer_math import indexer_key_bytes
from introspect.analysis.architecture.mixers import ATTENTION_KINDS, MIXERS, attention_kv_bytes, state_split
from introspect.analysis.architecture.state_dtypes import by_engine_totals, state_entry
from introspect.documents.profile_architecture import Attention, KvCache, KvKind

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


def kv_borrowing_layers(view: ConfigView, family: Family, n: int) -> set[int]:
    """Layers that keep no K/V of their own but read another layer's (cross-layer KV sharing)."""
    if family.cla and view.get_bool("use_cla"):
        # vLLM hunyuan_v1.py _get_cla_factor: layer i computes K/V iff i % cla_share_factor == 0.
        factor = positive(view.get_int("cla_share_factor", maximum=MAX_LAYERS)) or 1
        return {i for i in range(n) if i % factor} if factor > 1 else set()
    # transformers configuration_gemma3n.py: the last num_kv_shared_layers layers reuse the K/V of the
    # last local / global layer before them.
    shared = positive(view.get_int("num_kv_shared_layers", maximum=MAX_LAYERS))
    return set(range(n - shared, n)) if shared and shared < n else set()


def _compressed_cache(
    view: ConfigView, layout: LayerLayout, attention: Attention, width: int, dtype: str | None
) -> KvCache:
    """DeepSeek-V4: a bounded window in every layer, plus compressed entries that grow at 1/ratio."""
    window = v4.window_elements(view) * width
    per_kind: dict[str, KvKind] = {}
    for kind, layers in sorted(layout.components.items()):
        entry = KvKind(layers=layers)
        if kind in (CSA, HCA):
            grow = int(round(v4.growing_elements(view, kind) * width))
            entry.bytes_per_token_per_layer, entry.bytes_per_token = grow, grow * layers
            entry.state_bytes_per_layer, entry.state_bytes_per_sequence = window, window * layers
        elif kind == SLIDING:
            head = (attention.head_dim or 0) * width  # one shared K=V head per token
            entry.bytes_per_token_per_layer, entry.bytes_per_token = head, head * layers
        per_kind[kind] = entry
    growing = sum(per_kind[k].bytes_per_token or 0 for k in (CSA, HCA) if k in per_kind)
    sliding = (per_kind[SLIDING].bytes_per_token or 0) if SLIDING in per_kind else 0
    return KvCache(
        dtype=dtype,
        dtype_assumed=dtype not in DTYPE_BYTES,
        bytes_per_element=width,
        bytes_per_token=growing + sliding,
        per_kind=per_kind,
        state_bytes_per_sequence=sum(e.state_bytes_per_sequence or 0 for e in per_kind.values()),
        sliding_window_cap=attention.sliding_window,
        bytes_per_token_beyond_window=growing,
        compress_rates=v4.compress_rates(view),
    )


def _bounded_caps(attention: Attention) -> dict[str, int | None]:
    """Attention kinds whose cache stops growing, and where: the window, or Llama-4's chunk."""
    return {SLIDING: attention.sliding_window, CHUNKED: attention.attention_chunk_size}


def kv_section(per_kind: dict[str, KvKind], attention: Attention, dtype: str | None, width: int) -> KvCache:
    """The section around per-kind entries: the per-token total, the state per sequence, and what is
    left growing past the sliding window or attention chunk (shared by the rules and the model-code witness)."""
    caps = {kind: cap for kind, cap in _bounded_caps(attention).items() if kind in per_kind}
    attention_bytes = sum(per_kind[k].bytes_per_token or 0 for k in per_kind if k in ATTENTION_KINDS)
    bounded = sum(per_kind[k].bytes_per_token or 0 for k, cap in caps.items() if cap)
    window = max((cap for cap in caps.values() if cap), default=None)
    out = KvCache(
        dtype=dtype,
        dtype_assumed=dtype not in DTYPE_BYTES,  # unknown or absent: 2 bytes assumed
        bytes_per_element=width,
        bytes_per_token=attention_bytes,
        per_kind=per_kind,
        state_bytes_per_sequence=sum(entry.state_bytes_per_sequence or 0 for entry in per_kind.values()),
        sliding_window_cap=window,
        bytes_per_token_beyond_window=attention_bytes - bounded,
    )
    totals = by_engine_totals(per_kind)
    if totals is not None:
        out.state_bytes_per_sequence_by_engine = totals
    return out


def _recurrent_entry(view: ConfigView, kind: str, hidden: int | None, width: int, layers: int) -> KvKind:
    """A recurrent kind's state: at the engines' dtypes, or at the model's where no engine serves the mixer."""
    conv, recurrent = state_split(view, kind, hidden)
    if not conv and not recurrent:
        return KvKind(layers=layers)
    rule = MIXERS[kind].state_rule if kind in MIXERS else None
    if rule is None:
        state = (conv + recurrent) * width
        return KvKind(layers=layers, state_bytes_per_layer=state, state_bytes_per_sequence=state * layers)
    return state_entry(view, rule, conv, recurrent, layers)


def _attention_entry(layout: LayerLayout, kind: str, layers: int, per_layer: int, borrowing: set[int],
                     sublayers: int) -> KvKind:
    """An attention kind's K/V per token: the per-layer figure over the layers that keep their own K/V."""
    shared = sum(1 for i, k in enumerate(layout.pattern) if i in borrowing and kind in k.split("+"))
    entry = KvKind(layers=layers, bytes_per_token_per_layer=per_layer, bytes_per_token=per_layer * (layers - shared))
    if shared:
        entry.kv_shared_layers = shared  # these read another layer's K/V and add nothing
    if sublayers > 1:
        entry.attention_sublayers = sublayers  # per decoder layer, both in the per-layer figure
    return entry


def analyze_kv_cache(
    view: ConfigView, layout: LayerLayout, attention: Attention, hidden: int | None,
    family: Family | None = None,
) -> KvCache:
    """The ``architecture.kv_cache`` section."""
    dtype = model_dtype(view)
    width = DTYPE_BYTES.get(dtype or "", 2)
    sublayers = family.attention_sublayers if family is not None else 1
    per_layer = attention_kv_bytes(attention, width) * sublayers
    if family is not None and family.compressed_attention:
        return _compressed_cache(view, layout, attention, width, dtype)
    borrowing = kv_borrowing_layers(view, family, len(layout.pattern)) if family is not None else set()
    per_kind = {
        kind: _attention_entry(layout, kind, layers, per_layer, borrowing, sublayers) if kind in ATTENTION_KINDS
        else _recurrent_entry(view, kind, hidden, width, layers)
        for kind, layers in sorted(layout.components.items())
    }
    out = kv_section(per_kind, attention, dtype, width)
    if indexer_key_bytes(attention):
        # Included in bytes_per_token_per_layer: the indexer's fp8 key and scale beside the MLA latent.
        out.indexer_bytes_per_token_per_layer = indexer_key_bytes(attention)
    return out
