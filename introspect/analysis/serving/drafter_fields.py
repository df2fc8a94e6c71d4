"""The fields a drafter's config.json takes from its target, each from the target or null with why. Pure.

A DFlash drafter (SpecForge's ``DFlashDraftModel``, a ``Qwen3Config`` model; SGLang's
srt/models/dflash.py; vLLM's qwen3_dflash.py) and an EAGLE-3 head (``LlamaForCausalLMEagle3``, a
``LlamaConfig`` model) build their layers from these keys. SpecForge's own draft-config generator
copies the same keys from the target's text config (specforge 0.2.0 training/model_loading.py,
``_TARGET_ARCHITECTURE_FIELDS``). A key missing from a drafter config is not an error there: the
config class fills in *its* default (transformers 5 ``Qwen3Config``: 32 heads, 32 KV heads,
head_dim 128, 32768 positions, FFN 22016), another model's numbers. So every key is written: the
target's value, or null with the reason in ``notes`` (a null fails loudly when the class builds).

Two derivations, both stated in ``notes``:

* MLA targets (DeepSeek-V3, Kimi-K2) have no GQA head width: queries and keys are
  ``qk_nope_head_dim + qk_rope_head_dim`` wide, values ``v_head_dim``. The drafter's
  ``head_dim`` is ``v_head_dim``, as in the published Kimi-K2.5 DFlash drafter (head_dim 128,
  tests/data/families/kimi-k2.5-with-drafters.json); ``num_key_value_heads`` is the config's
  own (the heads the latent expands to).
* The RoPE keys are copied as the target writes them (``rope_theta`` / ``rope_scaling`` /
  ``rope_parameters``): the drafter attends at the target's positions.
"""

from __future__ import annotations

from introspect.analysis.architecture.config_view import sanitize
from introspect.documents.profile_architecture import Architecture, Attention
from introspect.remote.contract import JSONObject, as_dict

ROPE_KEYS = ("rope_theta", "rope_scaling", "rope_parameters")
_EPS_KEYS = ("layer_norm_eps", "layer_norm_epsilon", "norm_eps", "norm_epsilon")


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def text_view(config: object, nesting: list[str]) -> JSONObject:
    """The target's text config (read as config.json holds it): ``config`` followed down the
    architecture section's ``nesting``."""
    view = as_dict(config)
    for key in nesting:
        view = as_dict(view.get(key)) or view
    return view


def _attention(att: Attention, fields: JSONObject, notes: dict[str, str]) -> None:
    heads, kv_heads, head_dim = _int(att.num_heads), _int(att.num_kv_heads), _int(att.head_dim)
    if heads is None:
        why = (f"the target has no attention heads ({att.type or 'no attention facts'}): the drafter's "
               "attention shape is a training choice; set it by hand")
        for key in ("num_attention_heads", "num_key_value_heads", "head_dim"):
            fields[key] = None
            notes[key] = why
        return
    fields["num_attention_heads"] = heads
    fields["num_key_value_heads"] = kv_heads
    fields["head_dim"] = head_dim
    if kv_heads is None:
        notes["num_key_value_heads"] = "the target's config gives no KV head count"
    if att.type == "MLA":
        v_dim = _int(att.v_head_dim)
        fields["head_dim"] = v_dim
        notes["head_dim"] = (f"MLA target: queries and keys are {head_dim} wide, values {v_dim}; a GQA drafter "
                             "takes the value width (the published Kimi-K2.5 DFlash drafter: head_dim 128)"
                             if v_dim else "MLA target without v_head_dim: no GQA head width to copy")
        notes["num_key_value_heads"] = (f"MLA target: the config's num_key_value_heads ({kv_heads}), the heads its "
                                        "latent KV expands to; a drafter may train with fewer (Kimi-K2.5-DFlash: 8)")
    elif head_dim is None:
        notes["head_dim"] = "the target's head width is unknown"


def _copied(text: JSONObject, fields: JSONObject, notes: dict[str, str]) -> None:
    """intermediate_size, RoPE, rms_norm_eps and hidden_act as the target's text config writes them."""
    fields["intermediate_size"] = _int(text.get("intermediate_size"))
    if fields["intermediate_size"] is None:
        notes["intermediate_size"] = "the target's config gives no intermediate_size (its dense FFN width)"
    rope = {key: sanitize(text[key]) for key in ROPE_KEYS if key in text}
    if rope:
        fields.update(rope)
    else:
        fields["rope_theta"] = None
        notes["rope_theta"] = ("the target's config gives no RoPE settings (rope_theta, rope_scaling, "
                               "rope_parameters): its class default applies there; set the drafter's by hand")
    eps = text.get("rms_norm_eps")
    fields["rms_norm_eps"] = eps if isinstance(eps, (int, float)) and not isinstance(eps, bool) else None
    if fields["rms_norm_eps"] is None:
        other = [key for key in _EPS_KEYS if key in text]
        notes["rms_norm_eps"] = ("the target's config gives no rms_norm_eps"
                                 + (f" (it has {other[0]}: a LayerNorm model)" if other else "")
                                 + "; the drafter's RMSNorm eps is a training choice")
    act = text.get("hidden_act")
    fields["hidden_act"] = act if isinstance(act, str) else None
    if fields["hidden_act"] is None:
        notes["hidden_act"] = "the target's config gives no hidden_act"


def target_fields(arch: Architecture, config: object) -> tuple[JSONObject, dict[str, str]]:
    """(fields, notes): the drafter config keys taken from the target (a part of the drafter's
    config.json, whose RoPE values are copied as config.json writes them); ``notes`` say why a key
    is null or how it was derived."""
    fields: JSONObject = {"hidden_size": _int(arch.hidden_size)}
    notes: dict[str, str] = {}
    _attention(arch.attention, fields, notes)
    text = text_view(config, arch.nesting)
    _copied(text, fields, notes)
    fields["max_position_embeddings"] = _int(arch.max_context)
    fields["vocab_size"] = _int(arch.vocab_size)
    fields["dtype"] = arch.dtype
    if isinstance(text.get("attention_bias"), bool):
        fields["attention_bias"] = text["attention_bias"]
    for key, why in (("hidden_size", "the target's hidden size is unknown"),
                     ("max_position_embeddings", "the target's config gives no context length"),
                     ("vocab_size", "the target's vocabulary size is unknown"),
                     ("dtype", "the target's config names no dtype")):
        if fields[key] is None:
            notes[key] = why
    if not text:
        notes["config"] = "no config.json was read: only the architecture section's facts are known"
    return fields, notes
