""""Unknown" is an answer: a layer layout the rules did not understand is not "all full attention".

The config rules fall back to "every layer is full attention" (or "every layer slides"
when one window key exists) when config.json names no layout they know. That is right
for a family whose layers really are uniform (Llama, GPT-2), and wrong, stated as fact,
for a family that names its layers with keys the rules do not read: per-layer codes,
index lists, block-type lists, sub-configs under family-specific names, or the marks of
a recurrent mixer (a state size, a conv kernel). transformers raises on what it does not
understand and vLLM refuses to start; the rules say "unknown" instead, with the keys.

Checked after every verdict ran, so ``view.read`` holds every key any verdict read.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from introspect.analysis.architecture.config_view import ConfigView
from introspect.analysis.architecture.layers import ALL_SLIDING, FALLBACK_SOURCES, LayerLayout
from introspect.analysis.architecture.mixers import ATTENTION_KINDS
from introspect.analysis.findings import Finding, Severity
from introspect.documents.profile_architecture import Architecture

# Key names that say something about which mixer each layer has.
_LAYOUT_NAME = re.compile(
    r"layer|block|pattern|type|mixer|attn|attention|ssm|mamba|recurrent|rnn|conv|hybrid|cross|global|local"
    r"|interval|period|schedule|mlstm|slstm|xlstm|rwkv|retention|deltanet|gla|hyena|lru|linear", re.IGNORECASE)
# Scalars that only a recurrent or state-space mixer has (a family whose row is missing shows them).
_RECURRENT_MARK = re.compile(
    r"^(ssm_|mamba_|d_state$|state_size$|ssm_state_size$|conv_kernel|conv_l_cache$|d_conv$|time_step|dt_rank$"
    r"|rnn_|lru_width$|recurrent_|num_blocks$|block_types$|rwkv|mlstm|slstm|xlstm|gla_|deltanet|retention)",
    re.IGNORECASE)
# Words of keys that tune a layer without changing its mixer or its cache (RoPE on or off per layer,
# dropout, norms, biases, scales).
_TUNING = re.compile(r"rope|dropout|norm|bias|init|eps|scal|softcap|multiplier|token|vocab|label|lora", re.IGNORECASE)
# Keys that match the patterns above but never describe the layer layout.
_NOT_LAYOUT = frozenset({
    "architectures", "model_type", "torch_dtype", "dtype", "layer_norm_eps", "layer_norm_epsilon", "hidden_act",
    "rope_type", "position_embedding_type", "problem_type", "attention_dropout", "attn_pdrop", "initializer_range",
    "layer_norm_type", "norm_type", "attention_bias", "attention_probs_dropout_prob", "token_type_ids",
    "type_vocab_size", "tokenizer_class", "pad_token_type_id", "classifier_dropout", "use_cache",
    "attn_implementation", "_attn_implementation", "output_attentions", "add_cross_attention",
    "attention_softmax_in_fp32", "scale_attention_softmax_in_fp32", "attn_logit_softcapping",
    "final_logit_softcapping", "query_pre_attn_scalar", "attention_multiplier", "cross_attention_hidden_size",
    "num_attention_heads", "num_key_value_heads", "attention_head_dim", "attention_heads",
})


def unread_layout_keys(view: ConfigView, n: int) -> list[str]:
    """Keys of config.json that look like a layer layout and that no verdict read."""
    found = []
    for key, value in view.data.items():
        if key in view.read or key in _NOT_LAYOUT or key.startswith("_") or _TUNING.search(key):
            continue
        if _RECURRENT_MARK.search(key) or (_LAYOUT_NAME.search(key) and _layout_shaped(value, n)):
            found.append(view.prefix + key)
    return sorted(found)


def _layout_shaped(value: Any, n: int) -> bool:
    """A per-layer list, an index list, a one-character-per-layer string, or a sub-config of lists."""
    if isinstance(value, list):
        return bool(value) and not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0
                                       for v in value)
    if isinstance(value, str):
        return len(value) == n and n > 1
    if isinstance(value, dict):
        return any(isinstance(v, (list, dict)) or _RECURRENT_MARK.search(str(k)) for k, v in value.items())
    return False


def layout_unknown(arch: Architecture, view: ConfigView, layout: LayerLayout, known: bool = True) -> list[Finding]:
    """Null the layer kinds, pure attention and the KV figure when the layout was not understood.

    A window key alone says every layer slides only in a family whose row says so (Mistral); in
    another it may bound some layers or none (transformers 5.24 modeling_kyutai_speech_to_text.py
    keeps ``sliding_window`` on every layer and masks with ``create_causal_mask``: full attention)."""
    n = len(layout.pattern)
    if not n:
        return []
    keys = unread_layout_keys(view, n) if layout.source in FALLBACK_SOURCES else []
    window_only = not known and layout.source == ALL_SLIDING
    if not keys and not layout.unknown and not window_only:
        return []
    what = ([f"layer types not understood: {', '.join(layout.unknown[:10])}"] if layout.unknown else []) + (
        [f"config keys not understood: {', '.join(keys[:12])}"] if keys else []) + (
        ["a sliding window with no layout, in a family introspect has no row for"] if window_only else [])
    section = arch.layers
    section.pattern = section.kinds = section.pure_attention = None
    section.understood = False
    section.unknown_keys = keys + list(layout.unknown)
    arch.kv_cache = None
    return [Finding(
        Severity.ERROR, "layout-unknown",
        f"which mixer each of the {n} layers has is unknown ({'; '.join(what)}): layer kinds, pure attention "
        "and the KV cache are not stated",
        "# run the probe with torch and transformers in --venv so the model's own code settles the layout",
        {"keys": keys, "layer_types": list(layout.unknown)})]


# Per-layer lists that can change what a layer caches (transformers 5.24 configuration_mistral_large4.py
# kv_source_layers: layers that reuse another layer's K/V; indexer_types).
_CACHE_NAME = re.compile(r"kv|key|value|head|cache|share|source|index", re.IGNORECASE)


def kv_geometry_unknown(arch: Architecture, view: ConfigView, layout: LayerLayout, known: bool) -> list[Finding]:
    """Null the KV figure when each attention layer's K/V width rests on a guess: per-layer keys about
    the cache that no rule read, or several attention kinds in a family without a row (transformers 5.24
    modeling_gemma4.py gives its full layers a wider head than its sliding ones, modeling_mimo_v2_flash.py
    its sliding layers other KV heads, modeling_dots3_note.py MLA on some layers and GQA on the others;
    none of it is in a key the generic rules read)."""
    n = len(layout.pattern)
    if not n or arch.kv_cache is None:
        return []
    lists = sorted(view.prefix + k for k, v in view.data.items() if k not in view.read and isinstance(v, list)
                   and len(v) == n and _CACHE_NAME.search(k) and not _TUNING.search(k))
    kinds = sorted({p for kind in layout.pattern for p in kind.split("+") if p in ATTENTION_KINDS})
    mixed = not known and len(kinds) > 1
    if not lists and not mixed:
        return []
    why = (f"per-layer keys not understood: {', '.join(lists[:6])}" if lists else
           f"{' and '.join(kinds)} layers in a family introspect has no row for, with one head geometry in the "
           "config for all of them")
    arch.kv_cache = None
    return [Finding(Severity.ERROR, "kv-geometry-unknown",
                    f"the KV cache per token is not stated: {why}",
                    "# run the probe with torch and transformers in --venv so the model's own code settles it",
                    {"keys": lists, "kinds": kinds})]


# Each "not stated" finding and the field whose null it announces: once a witness fills the field
# (the config class, the model's code), the finding no longer holds.
_ANNOUNCES: dict[str, Callable[[Architecture], bool]] = {
    "layout-unknown": lambda arch: arch.layers.understood is False,
    "kv-geometry-unknown": lambda arch: arch.kv_cache is None,
    "layers-unknown": lambda arch: arch.num_layers is None,
}


UNKNOWN_CODES = frozenset(_ANNOUNCES)


def still_unknown(arch: Architecture, findings: list[Finding]) -> list[Finding]:
    """``findings`` less the "not stated" ones whose field a witness has since settled."""
    return [f for f in findings if f.code not in _ANNOUNCES or _ANNOUNCES[f.code](arch)]
