"""The decoder layers of a meta-built model as the code sees them, and the config's derived attributes.

Runs on the host inside the isolated ``model_code`` process (standard library,
Python 3.8+). Per layer: its class, its mixer's class (``A+B`` when a layer holds
two mixers side by side, Falcon-H1), its FFN's class and the per-layer attributes
the code sets on the mixer (``sliding_window``, ``is_sliding``, ``attention_type``,
...); consecutive equal layers are one run. From the config object (after its
class's ``__init__`` derived what it derives): ``layer_types``, windows, chunked
attention, and the other layout keys, run-length compressed where they are lists.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from .model_code_count import FFN_ATTRS, MIXER_ATTRS, mixer_kind

MIXER_CLASS_RE = re.compile(r"attention|attn|mixer|mamba|deltanet|rwkv|ssm|retention|conv", re.IGNORECASE)
# Attributes the families' code sets per layer on the mixer or on the layer.
LAYER_ATTRS = ("attention_type", "layer_type", "is_sliding", "sliding_window", "use_rope", "is_causal",
               "attention_chunk_size", "chunk_size", "is_local", "kv_shared", "is_kv_shared_layer",
               "kv_sharing_target_layer_idx", "use_nope")
CONFIG_ATTRS = ("model_type", "num_hidden_layers", "layer_types", "sliding_window", "sliding_window_pattern",
                "attention_chunk_size", "no_rope_layers", "full_attention_interval", "mlp_only_layers",
                "first_k_dense_replace", "moe_layer_freq", "decoder_sparse_step", "num_experts_per_tok",
                "num_experts", "n_routed_experts", "num_local_experts", "n_shared_experts", "tie_word_embeddings",
                "num_nextn_predict_layers", "num_kv_shared_layers", "interleave_moe_layer_step")
EXPERTS_PER_TOKEN = ("num_experts_per_tok", "num_experts_per_token", "moe_topk", "moe_top_k", "top_k",
                     "experts_per_token", "num_selected_experts", "n_activated_experts")
MAX_LIST = 4096


def _scalar(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)[:200]


def compress(values: List[Any]) -> List[Dict[str, Any]]:
    """``[a, a, b]`` -> ``[{"value": a, "start": 0, "count": 2}, {"value": b, "start": 2, "count": 1}]``."""
    runs: List[Dict[str, Any]] = []
    for index, value in enumerate(values):
        if runs and runs[-1]["value"] == value:
            runs[-1]["count"] += 1
        else:
            runs.append({"value": value, "start": index, "count": 1})
    return runs


def _child(layer: Any, names: tuple) -> List[Any]:
    found = []
    for name in names:
        module = getattr(layer, name, None)
        if module is not None and hasattr(module, "named_modules"):
            found.append(module)
    return found


def _mixers(layer: Any) -> List[Any]:
    mixers = _child(layer, MIXER_ATTRS)
    if mixers:
        return mixers
    return [m for _, m in layer.named_children() if MIXER_CLASS_RE.search(type(m).__name__)][:1]


def describe_layer(layer: Any) -> Dict[str, Any]:
    mixers = _mixers(layer)
    ffn = _child(layer, FFN_ATTRS)
    attrs: Dict[str, Any] = {}
    for owner in [layer] + mixers:
        for name in LAYER_ATTRS:
            if name in attrs or not hasattr(owner, name):
                continue
            try:
                attrs[name] = _scalar(getattr(owner, name))
            except Exception:  # noqa: BLE001 - a property that raises is just not reported
                continue
    return {"class": type(layer).__name__,
            "mixer": "+".join(type(m).__name__ for m in mixers) or None,
            "mixer_kinds": [mixer_kind(m) for m in mixers],
            "ffn": type(ffn[0]).__name__ if ffn else None,
            "attrs": attrs}


def layer_runs(layers: List[Any]) -> List[Dict[str, Any]]:
    """Run-length compressed layer descriptions: ``[{start, count, class, mixer, ffn, attrs}]``."""
    out = []
    for run in compress([describe_layer(layer) for layer in layers]):
        out.append(dict(run["value"], start=run["start"], count=run["count"]))
    return out


def text_config(config: Any) -> Any:
    getter = getattr(config, "get_text_config", None)
    if callable(getter):
        try:
            return getter() or config
        except Exception:  # noqa: BLE001
            return config
    return config


def config_attrs(config: Any) -> Dict[str, Any]:
    """The layout attributes as the config class holds them (lists run-length compressed)."""
    out: Dict[str, Any] = {"class": type(config).__name__, "module": type(config).__module__}
    for name in CONFIG_ATTRS:
        if not hasattr(config, name):
            continue
        try:
            value = getattr(config, name)
        except Exception:  # noqa: BLE001
            continue
        if isinstance(value, (list, tuple)) and len(value) <= MAX_LIST:
            out[name] = compress([_scalar(v) for v in value])
        else:
            out[name] = _scalar(value)
    return out


def experts_per_token(config: Any) -> Optional[int]:
    for name in EXPERTS_PER_TOKEN:
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None
