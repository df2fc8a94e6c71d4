"""Plausibility rules for the numbers a verdict reads from config.json, and what a bad one voids.

:class:`~introspect.analysis.architecture.config_view.ConfigView` consults :func:`check_number` on
every numeric lookup: a value of the wrong type (``"8"``, a list, ``true``), out of
range (0 or -1 heads, 1e308 hidden size) or not finite is *rejected*, never replaced
by a default. A quoted number is a bad value too: no family's config class converts it;
transformers 5 validates the declared field types (huggingface_hub strict dataclasses:
``LlamaConfig(num_key_value_heads="8")`` raises ``StrictDataclassFieldValidationError``),
so the model would not even load.

After the verdicts ran, :func:`invalid_findings` turns the keys that were rejected
and never accepted by another getter (``moe_layer_freq`` is an int or a list) into
one finding each, and :func:`voided_sections` says which derived figures depend on
them, so the caller nulls those instead of printing a number computed from a default.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from introspect.analysis.findings import Finding, Severity
from introspect.remote.readers import JSON_CONSTANT_KEY

_LAYERS = 1 << 12  # no released model has more than a few hundred decoder layers
_WIDTH = 1 << 17  # hidden sizes stop near 2**14 today; 2**17 leaves room and stops garbage
_HEADS = 1 << 14
_FFN = 1 << 21
_VOCAB = 1 << 24
_CONTEXT = 1 << 31  # Llama-4 Scout declares 10M positions; 2**31 still fits every engine's int32

# (minimum, maximum) per key, whatever the getter's own range. Keys without a rule are
# only checked for type and the getter's range.
INT_RULES: dict[str, tuple[int, int]] = {
    **dict.fromkeys(("num_hidden_layers", "n_layer", "num_layers", "n_layers"), (1, _LAYERS)),
    **dict.fromkeys(("hidden_size", "n_embd", "d_model", "dim", "model_dim"), (1, _WIDTH)),
    **dict.fromkeys(("num_attention_heads", "n_head", "n_heads", "attention_heads"), (1, _HEADS)),
    **dict.fromkeys(("num_key_value_heads", "num_kv_heads", "n_head_kv", "n_kv_heads", "num_kv",
                     "multi_query_group_num", "num_query_groups"), (1, _HEADS)),
    **dict.fromkeys(("head_dim", "attention_head_dim", "kv_channels", "d_head"), (1, _HEADS)),
    **dict.fromkeys(("intermediate_size", "n_inner", "ffn_hidden_size", "d_ff", "ffn_dim",
                     "moe_intermediate_size", "expert_intermediate_size", "moe_ffn_hidden_size"), (1, _FFN)),
    # A shared expert's width may be 0, which every config class declaring it accepts (a plain
    # `int` field): Qwen2MoeConfig, Qwen3NextConfig, Qwen3_5MoeConfig shared_expert_intermediate_size,
    # GraniteMoeHybridConfig / GraniteMoeSharedConfig shared_intermediate_size (the latter's default
    # is 0: configuration_granitemoeshared.py), NemotronHConfig moe_shared_expert_intermediate_size.
    # What 0 builds is read in moe._shared, family by family.
    **dict.fromkeys(("shared_expert_intermediate_size", "shared_intermediate_size",
                     "moe_shared_expert_intermediate_size"), (0, _FFN)),
    **dict.fromkeys(("vocab_size", "n_vocab", "padded_vocab_size"), (1, _VOCAB)),
    **dict.fromkeys(("max_position_embeddings", "n_positions", "n_ctx", "max_sequence_length",
                     "seq_length", "max_seq_len"), (1, _CONTEXT)),
    **dict.fromkeys(("n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts",
                     "num_routed_experts"), (0, 1 << 16)),
    **dict.fromkeys(("num_experts_per_tok", "experts_per_token", "num_experts_per_token", "moe_topk",
                     "moe_top_k", "num_selected_experts"), (0, 1 << 16)),
    **dict.fromkeys(("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"),
                    (0, _HEADS)),
    **dict.fromkeys(("full_attention_interval", "attn_layer_period", "expert_layer_period",
                     "decoder_sparse_step", "interleave_moe_layer_step"), (1, _LAYERS)),
    "first_k_dense_replace": (0, _LAYERS),
    "sliding_window": (0, _CONTEXT),
}

# Family-aware bounds: a row overrides INT_RULES for one model_type. Mamba-2's config
# class names its SSM heads num_heads (transformers configuration_mamba2.py), which may
# exceed the attention-head bound of a transformer.
FAMILY_RULES: dict[str, dict[str, tuple[int, int]]] = {
    "mamba2": {"num_heads": (1, 1 << 16)},
}

# Which derived figures a section's bad key voids (the section's own answer included).
DEPENDENTS: dict[str, tuple[str, ...]] = {
    "identity": ("kv_cache", "params"),
    "num_layers": ("layers", "attention", "moe", "kv_cache", "params"),
    "layers": ("layers", "attention", "moe", "kv_cache", "params"),
    "attention": ("attention", "kv_cache", "params"),
    "moe": ("moe", "params"),
    "params": ("params",),
    "kv_cache": ("kv_cache",),
}


# transformers 5 writes a non-finite float as {"__float__": "Infinity"} and reads it back as the float
# (configuration_utils.py to_json_string line 1329, _decode_special_floats lines 1167-1178); the
# probe sends a bare NaN / Infinity of config.json as {JSON_CONSTANT_KEY: "Infinity"} (remote/readers.py).
FLOAT_TAG = "__float__"
CONSTANTS = ("NaN", "Infinity", "-Infinity")


def non_finite(value: Any) -> str | None:
    """``"NaN"`` / ``"Infinity"`` / ``"-Infinity"`` when ``value`` stands for a float transformers
    reads as non-finite (a float, either marker), else None."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict) and len(value) == 1:
        key, name = next(iter(value.items()))
        if key in (JSON_CONSTANT_KEY, FLOAT_TAG) and name in CONSTANTS:
            return str(name)
    return None


def _rule(key: str, model_type: str | None) -> tuple[int, int] | None:
    family = FAMILY_RULES.get(model_type or "", {})
    return family.get(key, INT_RULES.get(key))


def kind_of(value: Any) -> str:
    constant = non_finite(value)
    if constant is not None:
        return constant
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a quoted string" if _numeric_text(value) else "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _numeric_text(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def check_number(key: str, value: Any, model_type: str | None, want_int: bool) -> str | None:
    """Why ``value`` cannot stand for ``key`` (None when it can). Type, finiteness and the
    key's plausible range; the getter applies its own range afterwards."""
    if non_finite(value) is not None:
        return "not a finite number"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{kind_of(value)}, not a number"
    if want_int and isinstance(value, float) and not value.is_integer():
        return "not a whole number"
    rule = _rule(key, model_type)
    if rule is not None and not rule[0] <= value <= rule[1]:
        return f"outside the plausible range {rule[0]}..{rule[1]}"
    return None


def show(value: Any, limit: int = 60) -> str:
    """A short JSON-ish rendering of a bad value for a message."""
    constant = non_finite(value)
    if constant is not None:
        return constant
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def invalid_keys(rejected: Mapping[str, tuple[Any, str]], accepted: set[str]) -> dict[str, tuple[Any, str]]:
    """Keys some getter rejected and no getter accepted."""
    return {key: found for key, found in rejected.items() if key not in accepted}


def voided_sections(touched: Mapping[str, list[str]], invalid: Mapping[str, Any]) -> dict[str, list[str]]:
    """``{derived figure: [bad keys it depends on]}`` from the keys each section read."""
    out: dict[str, list[str]] = {}
    for section, keys in touched.items():
        bad = [key for key in dict.fromkeys(keys) if key in invalid]
        for figure in DEPENDENTS.get(section, ()) if bad else ():
            out.setdefault(figure, [])
            out[figure] += [key for key in bad if key not in out[figure]]
    return out


def invalid_findings(invalid: Mapping[str, tuple[Any, str]], voided: Mapping[str, list[str]],
                     config_path: str | None) -> list[Finding]:
    """One error finding per bad key: the file, the key, its value, why, and what it voids."""
    out = []
    where = config_path or "config.json"
    for key, (value, reason) in sorted(invalid.items()):
        figures = sorted(figure for figure, keys in voided.items() if key in keys)
        unknown = f"; unknown because of it: {', '.join(figures)}" if figures else ""
        out.append(Finding(
            Severity.ERROR, "config-invalid-value",
            f"{where}: {key} = {show(value)} is {reason}{unknown}",
            f"correct {key.rsplit('.', 1)[-1]} in config.json (a plain JSON number), or re-download the file",
            {"key": key, "value": show(value), "reason": reason, "file": where, "voids": figures}))
    return out


def bare_constants(value: Any, path: str = "") -> list[tuple[str, str]]:
    """``[(key path, constant)]`` of every bare NaN / Infinity the probe marked in a config, in file order."""
    if isinstance(value, dict):
        if set(value) == {JSON_CONSTANT_KEY}:
            return [(path, str(value[JSON_CONSTANT_KEY]))]
        return [found for key, item in value.items() for found in bare_constants(item, f"{path}.{key}" if path else key)]
    if isinstance(value, list):
        return [found for index, item in enumerate(value) for found in bare_constants(item, f"{path}[{index}]")]
    return []


def constant_findings(config: Mapping[str, Any], config_path: str | None) -> list[Finding]:
    """One warning for a config.json that holds bare NaN / Infinity constants: Python's json and
    transformers read them (as floats), strict JSON parsers refuse the whole file. Only a key a
    verdict needs as a number is rejected, by :func:`check_number`, with its own finding."""
    found = bare_constants(config)
    if not found:
        return []
    where = config_path or "config.json"
    listed = ", ".join(f"{key} = {constant}" for key, constant in found[:5])
    more = f" and {len(found) - 5} more" if len(found) > 5 else ""
    return [Finding(
        Severity.WARNING, "config-not-strict-json",
        f"{where} is not strict JSON: {listed}{more}; Python's json and transformers read these as floats, "
        "strict JSON parsers (Rust, Go, JavaScript, jq) refuse the whole file",
        "nothing to change for transformers; for strict JSON readers, re-save the config with transformers 5, "
        'which writes such a value as {"__float__": "Infinity"}',
        {"keys": [key for key, _constant in found], "file": where})]
