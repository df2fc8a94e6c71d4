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

MIXER_CLASS_RE = re.compile(r"attention|attn|mixer|mamba|deltanet|rwkv|ssm|retention|conv|lstm|rnn|gru|recurren",
                            re.IGNORECASE)
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


SUBLAYER_RE = re.compile(r"(layer|block)$", re.IGNORECASE)


def _mixers(layer: Any, nested: bool = False) -> List[Any]:
    mixers = _child(layer, MIXER_ATTRS)
    if mixers:
        return mixers
    if not nested:
        # A layer made of whole sub-layers (modeling_zamba2.py Zamba2HybridLayer: a mamba_decoder and the
        # shared_transformer block side by side): the mixers of each.
        for _, child in layer.named_children():
            if SUBLAYER_RE.search(type(child).__name__):
                mixers.extend(_mixers(child, True))
        if mixers:
            return mixers
    return [m for _, m in layer.named_children() if MIXER_CLASS_RE.search(type(m).__name__)][:1]


# Numbers the attention modules of transformers keep on themselves (modeling_llama.py LlamaAttention sets
# head_dim, num_key_value_groups; DeepseekV3Attention kv_lora_rank, qk_rope_head_dim ...).
GEOMETRY_ATTRS = ("head_dim", "head_size", "num_heads", "n_heads", "n_head", "num_attention_heads", "split_size", "num_key_value_heads", "num_kv_heads",
                  "num_key_value_groups", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
                  "sliding_window", "attention_chunk_size", "is_cross_attention", "is_causal")
MAX_TENSORS = 48


def _out_features(module: Any) -> Optional[int]:
    for name in ("out_features", "nf"):  # nn.Linear; GPT-2's Conv1D keeps its width as nf
        value = getattr(module, name, None)
        if isinstance(value, int):
            return value
    weight = getattr(module, "weight", None)
    shape = getattr(weight, "shape", None)
    return int(shape[0]) if shape is not None and len(shape) == 2 else None


def _outputs(module: Any) -> Dict[str, int]:
    outputs: Dict[str, int] = {}
    for name, child in module.named_children():
        width = _out_features(child)
        if width is not None:
            outputs[name] = width
    return outputs


def mixer_geometry(mixer: Any) -> Dict[str, Any]:
    """What the controller needs to tell the mixer's kind and per-token cache without knowing its family:
    the output width of each direct projection (k_proj, v_proj, c_attn, kv_a_proj_with_mqa, ...), the
    numbers the module keeps on itself, and its own tensors' names with their ranks (``A_log`` of
    rank 1 or 2 tells Mamba-2 from Mamba-1)."""
    outputs = _outputs(mixer)
    inner = mixer
    if not outputs:
        # A wrapper around the module that holds the projections (modeling_gpt_neo.py GPTNeoAttention
        # keeps them in its .attention): read that one.
        for _, child in mixer.named_children():
            found = _outputs(child)
            if found:
                inner, outputs = child, found
                break
    attrs: Dict[str, Any] = {}
    for owner in (inner, mixer):
        for name in GEOMETRY_ATTRS:
            try:
                value = getattr(owner, name, None)
            except Exception:  # noqa: BLE001
                continue
            if name not in attrs and (value is None or isinstance(value, (bool, int))):
                attrs[name] = value
    tensors = []
    for name, tensor in list(mixer.named_parameters())[:MAX_TENSORS]:
        tensors.append([name, len(getattr(tensor, "shape", ()))])
    return {"class": type(mixer).__name__, "kind": mixer_kind(mixer), "outputs": outputs,
            "attrs": {k: v for k, v in attrs.items() if v is not None}, "tensors": tensors}


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
            "mixers": [mixer_geometry(m) for m in mixers],
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
