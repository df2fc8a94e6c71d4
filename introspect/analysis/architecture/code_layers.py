"""Each decoder layer as the model's own code built it (the meta-device witness). Pure: no I/O.

The remote ``model_code`` task describes every decoder layer's mixer module: its class,
whether its own tensors keep a recurrent state (``A_log``, ``dt_bias``, ``conv1d``, RWKV's
decay), the output width of each direct projection and the numbers the module keeps on
itself (:mod:`introspect.remote.facts.model.model_code_layers`). This module turns that into one
canonical kind per layer and the K/V elements the layer caches per token, the same way
for every family: by the modules' tensors and shapes, never by ``model_type``.

The per-token cache of a layer follows vLLM v1's per-layer specs
(vllm/v1/kv_cache_interface.py: ``FullAttentionSpec`` / ``SlidingWindowSpec`` keep K and V
per token, ``MLAAttentionSpec`` one latent, ``CrossAttentionSpec`` the encoder's K/V per
request, ``MambaSpec`` a fixed state): K/V widths are the k and v projections' outputs, an
MLA layer's the latent ``kv_lora_rank + qk_rope_head_dim``.

The task's reply is read as it came (``JSONObject``, every value checked): ``layers.runs`` (start,
count, class, attrs, mixers: class, kind, outputs, attrs, tensors) and ``config.layer_types``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from introspect.analysis.architecture.kinds import (
    CHUNKED,
    CONV,
    CROSS,
    FULL,
    GDN,
    KDA,
    LINEAR,
    MAMBA,
    MAMBA2,
    MLP,
    RECURRENT,
    RWKV,
    SLIDING,
)
from introspect.analysis.architecture.mixers import ATTENTION_KINDS, FIXED_NAMES
from introspect.remote.contract import JSONObject, as_dict, as_list

K_NAMES = ("k_proj", "key", "wk", "Wk", "k", "to_k", "k_lin", "key_proj")  # Wk: modeling_ctrl.py
V_NAMES = ("v_proj", "value", "wv", "Wv", "v", "to_v", "v_lin", "value_proj")
KV_NAMES = ("kv_proj", "wkv", "kv", "to_kv", "key_value")
QKV_NAMES = ("qkv_proj", "c_attn", "query_key_value", "Wqkv", "wqkv", "qkv", "W_pack", "to_qkv", "in_proj_qkv")
LATENT_NAMES = ("kv_a_proj_with_mqa",)  # modeling_deepseek_v3.py DeepseekV3Attention: latent + rope key
_DECAY = ("time_decay", "time_first", "time_faaaa")


@dataclass(frozen=True)
class CodeLayer:
    """One decoder layer: its kind (``a+b`` for mixers side by side) and its per-token K/V elements."""

    kind: str | None  # None: a layer whose mixer the witness could not identify
    kv_elements: int | None  # None: an attention layer whose K/V width the module did not show
    kv_shared: bool = False  # reads another layer's K/V (Gemma-3n), caches nothing itself
    # Attention whose window the module does not keep (modeling_mistral.py applies config.sliding_window
    # in the mask, not per layer): full or sliding is then the config's to say, not the module's.
    flavour_shown: bool = True


def code_layers(probe: JSONObject, query_width: int | None = None) -> list[CodeLayer] | None:
    """The built model's decoder layers, in order; None when the witness built nothing to read.
    ``query_width``: the config's query heads x head width, for a fused q/k/v projection whose
    module keeps no head count."""
    section = as_dict(probe.get("layers"))
    runs = [r for r in as_list(section.get("runs")) if isinstance(r, dict)]
    if not runs or not all(isinstance(r.get("mixers"), list) for r in runs):
        return None  # no model, or raw facts from a probe before per-mixer geometry was sent
    types = _config_layer_types(as_dict(probe.get("config")))
    out: list[CodeLayer] = []
    for run in runs:
        for offset in range(int(run.get("count") or 0)):
            index = int(run.get("start") or 0) + offset
            out.append(_layer(run, types.get(index), query_width))
    return out if out and len(out) == section.get("count") else None


def _config_layer_types(config: JSONObject) -> dict[int, str]:
    """Layer index -> the config class's own ``layer_types`` entry (run-length compressed on the wire)."""
    out: dict[int, str] = {}
    for run in as_list(config.get("layer_types")):
        run = as_dict(run)
        for offset in range(int(run.get("count") or 0)):
            out[int(run.get("start") or 0) + offset] = str(run.get("value"))
    return out


def _layer(run: JSONObject, config_type: str | None, query_width: int | None = None) -> CodeLayer:
    mixers = [as_dict(m) for m in as_list(run.get("mixers"))]
    attrs = as_dict(run.get("attrs"))
    if not mixers:  # no module that mixes tokens was found: the config class may still name the kind
        return CodeLayer(FIXED_NAMES.get(config_type) if config_type is not None else None, None)
    kinds, elements = [], 0
    known = shown = True
    for mixer in mixers:
        kind = mixer_kind(mixer, attrs, config_type, str(run.get("class") or ""))
        shown = shown and not (kind == FULL and _plain_attention(mixer, attrs, config_type))
        kinds.append(kind)
        if kind in (FULL, SLIDING, CHUNKED):
            width = kv_elements(mixer, query_width)
            known = known and width is not None
            elements += width or 0
    shared = bool(attrs.get("is_kv_shared_layer") or attrs.get("kv_shared"))
    if shared:  # modeling_gemma3n.py: a KV-shared layer reads an earlier layer's cache and keeps none
        known, elements = True, 0
    kinds.sort(key=lambda k: k not in ATTENTION_KINDS)  # "full_attention+mamba2", as the rules spell it
    return CodeLayer("+".join(kinds), elements if known else None, shared, shown)


def _plain_attention(mixer: JSONObject, layer_attrs: JSONObject, config_type: str | None) -> bool:
    """Attention with no per-layer sign of being full or windowed (no layer_types, no window attribute)."""
    own = as_dict(mixer.get("attrs"))
    return config_type is None and not any(k in own for k in ("sliding_window", "attention_chunk_size")) and not any(
        k in layer_attrs for k in ("attention_type", "layer_type", "is_sliding", "sliding_window"))


def mixer_kind(mixer: JSONObject, layer_attrs: JSONObject, config_type: str | None, layer_class: str) -> str:
    """One mixer's canonical kind, from its tensors first and its class name second."""
    name = str(mixer.get("class") or "")
    if mixer.get("kind") == "recurrent":
        return _recurrent_kind(name, [t for t in as_list(mixer.get("tensors")) if isinstance(t, list)])
    own = as_dict(mixer.get("attrs"))
    if re.search(r"(mlp|moe|feed_?forward|ffn|experts?|block)$", name, re.IGNORECASE) and not re.search(
            r"attn|attention", name, re.IGNORECASE):
        return MLP  # modeling_nemotron_h.py: a "-" block's mixer slot holds NemotronHMLP
    if own.get("is_cross_attention") is True or re.search(r"cross", name + layer_class, re.IGNORECASE):
        return CROSS
    if config_type is not None and FIXED_NAMES.get(config_type) in (FULL, SLIDING, CHUNKED):
        return FIXED_NAMES[config_type]
    for key in ("attention_type", "layer_type"):  # set per layer by e.g. modeling_gpt_neo.py, modeling_cohere2.py
        value = layer_attrs.get(key) or own.get(key)
        if isinstance(value, str) and FIXED_NAMES.get(value) in (FULL, SLIDING, CHUNKED):
            return FIXED_NAMES[value]
    if layer_attrs.get("is_sliding") is True or _positive(own.get("sliding_window")):
        return SLIDING
    if _positive(own.get("attention_chunk_size")) or _positive(layer_attrs.get("attention_chunk_size")):
        return CHUNKED
    return FULL


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _recurrent_kind(name: str, tensors: list[list[Any]]) -> str:
    """Recurrent mixers told apart by their own tensors (names and ranks), then their class names.

    transformers modeling_mamba.py MambaMixer: ``A_log`` is (d_inner, d_state), rank 2;
    modeling_mamba2.py Mamba2Mixer: ``A_log`` is (num_heads,), rank 1, as in every Mamba-2 copy
    (Bamba, Nemotron-H, Falcon-H1, Zamba2, GraniteMoeHybrid); modeling_qwen3_next.py
    Qwen3NextGatedDeltaNet also has a rank-1 ``A_log`` beside ``dt_bias``, so the delta-rule
    mixers are told by class name first; modeling_rwkv.py RwkvSelfAttention keeps ``time_decay``.
    """
    ranks = {str(t[0]).split(".")[-1]: t[1] for t in tensors if len(t) == 2}
    if re.search(r"gated_?delta|gdn", name, re.IGNORECASE):
        return GDN
    if re.search(r"kimi\w*delta|kda", name, re.IGNORECASE):  # modeling_kimi_linear.py KimiLinearDeltaAttention
        return KDA
    if any(d in ranks for d in _DECAY) or re.search(r"rwkv", name, re.IGNORECASE):
        return RWKV
    if ranks.get("A_log") == 2:
        return MAMBA
    if ranks.get("A_log") == 1 and re.search(r"mamba|ssm|mixer", name, re.IGNORECASE):
        return MAMBA2
    if "A_log" not in ranks and re.search(r"conv", name, re.IGNORECASE):
        return CONV
    if re.search(r"lightning|linear", name, re.IGNORECASE):
        return LINEAR
    return RECURRENT


def kv_elements(mixer: JSONObject, query_width: int | None = None) -> int | None:
    """K/V elements one attention mixer caches per token, from its projections' widths."""
    outputs = {str(k): v for k, v in as_dict(mixer.get("outputs")).items() if _positive(v)}
    attrs = as_dict(mixer.get("attrs"))
    latent = _first(outputs, LATENT_NAMES)
    rank, rope = _count(attrs, "kv_lora_rank"), attrs.get("qk_rope_head_dim")
    if latent is not None or rank is not None:
        return rank + rope if rank is not None and isinstance(rope, int) else latent
    k, v = _first(outputs, K_NAMES), _first(outputs, V_NAMES)
    if k is not None and v is not None:
        return k + v
    fused = _first(outputs, KV_NAMES)
    if fused is not None:
        return fused
    qkv = _first(outputs, QKV_NAMES)
    if qkv is None:
        return None
    heads = _count(attrs, "num_heads") or _count(attrs, "n_heads") or _count(attrs, "n_head") \
        or _count(attrs, "num_attention_heads")
    head_dim = _count(attrs, "head_dim") or _count(attrs, "head_size")
    queries = heads * head_dim if heads is not None and head_dim is not None else _count(attrs, "split_size")
    queries = queries or query_width  # the config's heads x head_dim (modeling_gpt_neox.py keeps no head count)
    if queries is not None and qkv > queries:
        return qkv - queries  # what the fused projection makes beyond the queries: K and V
    kv_heads = _count(attrs, "num_key_value_heads") or _count(attrs, "num_kv_heads")
    if kv_heads is not None and head_dim is not None:
        return 2 * kv_heads * head_dim
    return None  # a fused projection whose split neither the module nor the config shows: unknown


def _count(attrs: JSONObject, name: str) -> int | None:
    value = attrs.get(name)
    return value if _positive(value) else None


def _first(outputs: dict[str, int], names: tuple[str, ...]) -> int | None:
    return next((outputs[n] for n in names if n in outputs), None)
