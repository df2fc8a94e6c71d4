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
from typing import Any, Dict, Iterator, List, Optional, Tuple

VISION_RE = re.compile(r"vision|visual|vit\b|siglip|clip|image|patch_embed|mm_projector|multi_modal_projector"
                       r"|mlp1\b|merger", re.IGNORECASE)
AUDIO_RE = re.compile(r"audio|speech|whisper|encodec", re.IGNORECASE)
MTP_RE = re.compile(r"(^|\.)(mtp|nextn|mtp_layers|mtp_block)s?(\.|$)", re.IGNORECASE)
HEAD_NAMES = ("lm_head", "output", "embed_out", "lm_heads")
NORM_RE = re.compile(r"norm", re.IGNORECASE)
# Mixer classes that keep a recurrent state rather than a KV cache.
RECURRENT_RE = re.compile(r"mamba|ssm|deltanet|delta_net|gdn|kda|rwkv|linearattention|linear_attention|lightning"
                          r"|recurrent|retention|hyena|timemix|time_mix|shortconv|griffin|xlstm", re.IGNORECASE)
MIXER_ATTRS = ("self_attn", "attention", "attn", "self_attention", "mixer", "linear_attn", "mamba", "time_mixer",
               "temporal_block", "conv", "token_mixer", "attn_layer", "mamba_layer", "feed_forward_attn")
FFN_ATTRS = ("mlp", "feed_forward", "ffn", "block_sparse_moe", "moe", "channel_mixer", "feedforward", "mlp_layer")
SHARED_RE = re.compile(r"shared_expert|shared_mlp|shared_experts|shared_expert_gate|shared_ffn", re.IGNORECASE)
EXPERTS_RE = re.compile(r"(^|\.)experts(\.|$)")
ROUTER_RE = re.compile(r"(^|\.)(gate|router|routers|gate_proj_router)(\.|$)")
COMPONENTS = ("embedding", "attention", "recurrent", "experts_routed", "experts_shared", "router", "dense_ffn",
              "norms", "final_norm", "lm_head", "mtp", "vision", "audio", "other")


def decoder_layers(model: Any, num_layers: Optional[int]) -> Tuple[Optional[str], List[Any]]:
    """(dotted path, modules) of the decoder-layer list: the longest ModuleList outside vision/audio
    whose length is at least ``num_layers`` (when known)."""
    best: Tuple[Optional[str], List[Any]] = (None, [])
    for name, module in model.named_modules():
        if type(module).__name__ != "ModuleList" or _multimodal(name):
            continue
        children = list(module)
        if num_layers and len(children) < num_layers:
            continue
        if len(children) > len(best[1]) and children and all(_is_block(c) for c in children):
            best = (name, children)
    return best


def _is_block(module: Any) -> bool:
    """A decoder layer holds submodules (a plain expert list's Linear layers do not count)."""
    return any(True for _ in module.children()) and type(module).__name__ not in ("Linear", "Embedding")


def _multimodal(name: str) -> bool:
    return bool(VISION_RE.search(name) or AUDIO_RE.search(name))


def count_components(model: Any, num_layers: Optional[int]) -> Dict[str, Any]:
    """``{parameters, buffers, total, components, layers_path, per_layer}`` of a built model."""
    path, layers = decoder_layers(model, num_layers)
    prefix = path + "." if path else None
    classes = _module_classes(model)
    components = dict.fromkeys(COMPONENTS, 0)
    per_layer: Dict[int, Dict[str, int]] = {}
    params = buffers = 0
    for name, numel, is_buffer in _tensors(model):
        component, layer = _classify(name, classes, prefix, num_layers)
        components[component] += numel
        if layer is not None:
            per_layer.setdefault(layer, {})
            per_layer[layer][component] = per_layer[layer].get(component, 0) + numel
        if is_buffer:
            buffers += numel
        else:
            params += numel
    return {"parameters": params, "buffers": buffers, "total": params + buffers,
            "components": {k: v for k, v in components.items() if v},
            "layers_path": path, "layers_found": len(layers), "per_layer": per_layer}


def _tensors(model: Any) -> Iterator[Tuple[str, int, bool]]:
    for name, tensor in model.named_parameters():
        yield name, int(tensor.numel()), False
    for module_name, module in model.named_modules():
        skip = getattr(module, "_non_persistent_buffers_set", set())
        for buffer_name, tensor in module.named_buffers(recurse=False):
            if tensor is None or buffer_name in skip or not tensor.is_floating_point():
                continue
            yield (module_name + "." if module_name else "") + buffer_name, int(tensor.numel()), True


def _module_classes(model: Any) -> Dict[str, str]:
    return {name: type(module).__name__ for name, module in model.named_modules()}


def _owners(name: str, classes: Dict[str, str]) -> List[str]:
    """Class names of every module on the tensor's path, outermost first."""
    parts = name.split(".")[:-1]
    return [classes.get(".".join(parts[:i]), "") for i in range(1, len(parts) + 1)]


def _classify(name: str, classes: Dict[str, str], prefix: Optional[str],
              num_layers: Optional[int]) -> Tuple[str, Optional[int]]:
    owners = _owners(name, classes)
    if _multimodal(name) or any(_multimodal(c) for c in owners):
        return ("audio" if AUDIO_RE.search(name + " ".join(owners)) else "vision"), None
    if MTP_RE.search(name):
        return "mtp", None
    if prefix and name.startswith(prefix):
        index_text, _, rest = name[len(prefix):].partition(".")
        index = int(index_text) if index_text.isdigit() else None
        if index is not None and num_layers and index >= num_layers:
            return "mtp", index
        layer_owners = owners[len(prefix.split(".")) :]
        return _in_layer(rest, layer_owners), index
    last_module = name.rsplit(".", 2)[-2] if name.count(".") else ""
    if last_module in HEAD_NAMES or name.split(".")[0] in HEAD_NAMES:
        return "lm_head", None
    owner = owners[-1] if owners else ""
    if owner == "Embedding" or "embed" in name.lower() or re.search(r"(^|\.)(wte|wpe)(\.|$)", name):
        return "embedding", None
    if NORM_RE.search(owner) or NORM_RE.search(name):
        return "final_norm", None
    return "other", None


def _in_layer(rest: str, owners: List[str]) -> str:
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
        return "recurrent" if RECURRENT_RE.search(top_class) or RECURRENT_RE.search(top) else "attention"
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
