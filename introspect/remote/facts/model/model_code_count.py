"""A model built on the meta device, counted: exact parameters by component, layers by class.

Runs on the host inside the isolated ``model_code`` process (standard library,
Python 3.8+; the model object comes from torch, which this module never imports).
Components are told apart by module paths and class names only, the same way for
every family, so a family never seen before is still counted exactly:

- ``vision`` / ``audio``: anything under a module whose name or class names a vision
  tower or projector (``vision_tower``, ``visual``, ``multi_modal_projector``, ...);
- ``lm_head``: the output head (``lm_head``, ``output``, ``embed_out``);
- ``embedding``: ``nn.Embedding`` weights outside the decoder layers;
- inside a decoder layer: the mixer (``attention`` or ``recurrent`` by its class),
  the FFN (``experts_routed``, ``experts_shared``, ``router``, ``dense_ffn``) and the
  layer's own ``norms``; decoder layers past ``num_hidden_layers`` in the same list
  and modules named ``mtp``/``nextn`` are ``mtp``;
- the rest outside the layers: ``final_norm`` (norm classes) or ``other``.

Persistent buffers (a router's ``e_score_correction_bias``) are stored in the
checkpoint, so they are counted beside the parameters (``buffers``); tied weights
count once (``named_parameters`` removes duplicates).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

VISION_RE = re.compile(r"vision|visual|vit\b|siglip|clip|image|patch_embed|mm_projector|multi_modal_projector"
                       r"|mlp1\b|merger", re.IGNORECASE)
AUDIO_RE = re.compile(r"audio|speech|whisper|encodec", re.IGNORECASE)
MTP_RE = re.compile(r"(^|\.)(mtp|nextn|mtp_layers|mtp_block)s?(\.|$)", re.IGNORECASE)
HEAD_NAMES = ("lm_head", "output", "embed_out", "lm_heads")
NORM_RE = re.compile(r"norm", re.IGNORECASE)
# Mixers that keep a recurrent state rather than a KV cache: told by their own tensors first (the
# SSM / delta-rule decay ``A_log`` and ``dt_bias``, RWKV's ``time_decay``, a causal ``conv1d``), then
# by class names. Names alone mislead: Kimi-Linear's full MLA layer is ``KimiLinearAttention``.
RECURRENT_TENSORS = ("A_log", "dt_bias", "time_decay", "time_first", "time_faaaa", "conv1d")
RECURRENT_RE = re.compile(r"mamba|ssm|deltanet|delta_net|deltaattention|gdn|kda|rwkv|lightning|retention"
                          r"|hyena|timemix|time_mix|shortconv|griffin|xlstm", re.IGNORECASE)
# Words that name a recurrent mixer less surely: a family may carry them in every class name
# (modeling_recurrent_gemma.py RecurrentGemmaAttention is plain attention).
WEAK_RECURRENT_RE = re.compile(r"recurren|rnn|lstm|gru", re.IGNORECASE)
ATTENTION_PROJECTIONS = {"qkv_proj", "c_attn", "query_key_value", "Wqkv", "wqkv", "kv_a_proj_with_mqa"}
MIXER_ATTRS = ("self_attn", "attention", "attn", "self_attention", "mixer", "linear_attn", "mamba", "time_mixer",
               "temporal_block", "conv", "token_mixer", "attn_layer", "mamba_layer", "feed_forward_attn")
FFN_ATTRS = ("mlp", "feed_forward", "ffn", "block_sparse_moe", "moe", "channel_mixer", "feedforward", "mlp_layer",
             "intermediate", "output", "fc1", "fc2", "fc_in", "fc_out", "c_fc", "dense_h_to_4h", "dense_4h_to_h")
SHARED_RE = re.compile(r"shared_expert|shared_mlp|shared_experts|shared_expert_gate|shared_ffn", re.IGNORECASE)
EXPERTS_RE = re.compile(r"(^|\.)experts(\.|$)")
ROUTER_RE = re.compile(r"(^|\.)(gate|router|routers|gate_proj_router)(\.|$)")
COMPONENTS = ("embedding", "attention", "recurrent", "experts_routed", "experts_shared", "router", "dense_ffn",
              "norms", "final_norm", "lm_head", "mtp", "vision", "audio", "other")


def decoder_layers(model: Any, num_layers: Optional[int]) -> Tuple[Optional[str], List[Any]]:
    """(dotted path, modules) of the decoder-layer list outside vision/audio towers: one of exactly
    ``num_layers`` blocks first, else the shallowest list of at least that many (MTP layers stored
    after the decoder layers); the shallowest list of blocks when the count is unknown."""
    candidates = []
    for name, module in model.named_modules():
        if type(module).__name__ != "ModuleList" or _multimodal(name):
            continue
        children = list(module)
        if not children or (num_layers and len(children) < num_layers) or not all(_is_block(c) for c in children):
            continue
        exact = bool(num_layers) and len(children) == num_layers
        candidates.append((not exact, name.count("."), -len(children), name, children))
    if not candidates:
        return None, []
    best = min(candidates, key=lambda c: c[:3])
    return best[3], best[4]


def mixer_kind(module: Any) -> str:
    """"recurrent" for a mixer that keeps a state instead of a KV cache, else "attention"."""
    for name, _ in module.named_parameters():
        if name.split(".")[-1] in RECURRENT_TENSORS or name.split(".")[0] in RECURRENT_TENSORS:
            return "recurrent"
    for name, _ in module.named_modules():
        if name.split(".")[-1] in RECURRENT_TENSORS:
            return "recurrent"
    name = type(module).__name__
    if RECURRENT_RE.search(name):  # lightning attention has q/k/v too (modeling_minimax.py)
        return "recurrent"
    # Projections to queries, keys and values make it attention whatever else the class is called
    # (modeling_recurrent_gemma.py RecurrentGemmaAttention sits beside RecurrentGemmaRecurrentBlock).
    children = {child for child, _ in module.named_children()}
    if {"k_proj", "v_proj"} <= children or children & ATTENTION_PROJECTIONS:
        return "attention"
    return "recurrent" if WEAK_RECURRENT_RE.search(name) else "attention"


def _mixer_kinds(layers: List[Any]) -> Dict[str, str]:
    """Class name -> mixer kind, for every direct child of the decoder layers (one check per class)."""
    kinds: Dict[str, str] = {}
    for layer in layers:
        for _, child in layer.named_children():
            name = type(child).__name__
            if name not in kinds:
                kinds[name] = mixer_kind(child)
    return kinds


def _is_block(module: Any) -> bool:
    """A decoder layer holds submodules (a plain expert list's Linear layers do not count)."""
    return any(True for _ in module.children()) and type(module).__name__ not in ("Linear", "Embedding")


def _multimodal(name: str) -> bool:
    return bool(VISION_RE.search(name) or AUDIO_RE.search(name))


_INDEX_RE = re.compile(r"(?<=\.)\d+(?=\.)")


def count_components(model: Any, num_layers: Optional[int]) -> Dict[str, Any]:
    """``{parameters, buffers, total, components, layers_path, per_layer}`` of a built model."""
    path, layers = decoder_layers(model, num_layers)
    prefix = path + "." if path else None
    classes: Dict[str, str] = {}
    buffers_found: List[Tuple[str, int]] = []
    for module_name, module in model.named_modules():  # one walk: classes and persistent buffers
        classes[module_name] = type(module).__name__
        skip: Any = getattr(module, "_non_persistent_buffers_set", set())
        for buffer_name, tensor in module.named_buffers(recurse=False):
            if tensor is not None and buffer_name not in skip and tensor.is_floating_point():
                buffers_found.append(((module_name + "." if module_name else "") + buffer_name, int(tensor.numel())))
    components = dict.fromkeys(COMPONENTS, 0)
    per_layer: Dict[int, Dict[str, int]] = {}
    in_layer_cache: Dict[str, str] = {}  # a tensor's path inside its layer, numbers as "#" -> component
    kinds = _mixer_kinds(layers)
    totals = [0, 0]
    tensors = [(n, int(t.numel()), 0) for n, t in model.named_parameters()] + [(n, c, 1) for n, c in buffers_found]
    for name, numel, is_buffer in tensors:
        totals[is_buffer] += numel
        layer = None
        if prefix and name.startswith(prefix) and name[len(prefix):].split(".")[0].isdigit():
            index_text, _, rest = name[len(prefix):].partition(".")
            layer = int(index_text)
            key = _INDEX_RE.sub("#", rest)
            if key not in in_layer_cache:
                in_layer_cache[key] = _in_layer(rest, _owners(name, classes)[len(prefix.split(".")):], kinds)
            component = "mtp" if num_layers and layer >= num_layers else in_layer_cache[key]
            per_layer.setdefault(layer, {})
            per_layer[layer][component] = per_layer[layer].get(component, 0) + numel
        else:
            component = _outside_layers(name, _owners(name, classes))
        components[component] += numel
    return {"parameters": totals[0], "buffers": totals[1], "total": totals[0] + totals[1],
            "components": {k: v for k, v in components.items() if v},
            "layers_path": path, "layers_found": len(layers), "per_layer": per_layer}


def _owners(name: str, classes: Dict[str, str]) -> List[str]:
    """Class names of every module on the tensor's path, outermost first."""
    parts = name.split(".")[:-1]
    return [classes.get(".".join(parts[:i]), "") for i in range(1, len(parts) + 1)]


def _outside_layers(name: str, owners: List[str]) -> str:
    if _multimodal(name) or any(_multimodal(c) for c in owners):
        return "audio" if AUDIO_RE.search(name + " ".join(owners)) else "vision"
    if MTP_RE.search(name):
        return "mtp"
    last_module = name.rsplit(".", 2)[-2] if name.count(".") else ""
    if last_module in HEAD_NAMES or name.split(".")[0] in HEAD_NAMES:
        return "lm_head"
    owner = owners[-1] if owners else ""
    if owner == "Embedding" or "embed" in name.lower() or re.search(r"(^|\.)(wte|wpe)(\.|$)", name):
        return "embedding"
    if NORM_RE.search(owner) or NORM_RE.search(name):
        return "final_norm"
    return "other"


def _in_layer(rest: str, owners: List[str], kinds: Dict[str, str]) -> str:
    """One tensor of a decoder layer, by its path inside the layer."""
    top = rest.split(".")[0]
    top_class = owners[0] if owners else ""
    if top in FFN_ATTRS or re.search(r"mlp|moe|feedforward|ffn|expert", top_class, re.IGNORECASE):
        if SHARED_RE.search(rest):
            return "experts_shared"
        if EXPERTS_RE.search(rest):
            return "experts_routed"
        if ROUTER_RE.search(rest) or any(re.search(r"router|gate$", c, re.IGNORECASE) for c in owners[1:]):
            return "router"
        return "dense_ffn"
    if NORM_RE.search(top_class) or (NORM_RE.search(top) and top not in MIXER_ATTRS):
        return "norms"
    if top in MIXER_ATTRS or re.search(r"attention|attn|mixer|mamba|deltanet|rwkv|conv", top_class, re.IGNORECASE):
        return kinds.get(top_class, "attention")
    return "other"


def one_expert(model_layers: List[Any], per_layer: Dict[int, Dict[str, int]]) -> Dict[int, Tuple[int, int]]:
    """Layer index -> (routed expert count, parameters of one routed expert), for MoE layers."""
    out: Dict[int, Tuple[int, int]] = {}
    for index, layer in enumerate(model_layers):
        routed = per_layer.get(index, {}).get("experts_routed", 0)
        if not routed:
            continue
        count = _expert_count(layer)
        if count:
            out[index] = (count, routed // count)
    return out


def _expert_count(layer: Any) -> Optional[int]:
    for name, module in layer.named_modules():
        if not EXPERTS_RE.search("." + name) or SHARED_RE.search(name) or not name.endswith("experts"):
            continue
        if type(module).__name__ == "ModuleList":
            return len(module)
        for attr in ("num_experts", "num_local_experts", "n_routed_experts", "n_experts"):
            value = getattr(module, attr, None)
            if isinstance(value, int) and value > 0:
                return value
        for tensor in module.parameters(recurse=False):
            if tensor.dim() == 3:
                return int(tensor.shape[0])
    return None
