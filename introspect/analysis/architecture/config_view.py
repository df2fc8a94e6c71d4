"""A safe, typed view of a model's ``config.json``.

config.json comes from an untrusted host: keys can be missing, of the wrong type,
null, absurdly large, or (when a caller hands us Python objects) even cyclic.
Every verdict in ``introspect.analysis`` reads the config through this view, so
the guards live in one place and every other module can assume clean values.

The view also unwraps multimodal and wrapper configs (Kimi-K2.5's ``kimi_k25``
with everything in ``text_config``; LLaVA-style ``text_config``; InternVL's
``llm_config``; DeepSeek-VL's ``language_config``; Qwen-Omni's
``thinker_config.text_config``: the contract's ``WRAPPER_TEXT_CONFIG_KEYS``) and
remembers which keys each verdict read, so the profile can cite its evidence.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from introspect.analysis.architecture.config_checks import check_number, kind_of, non_finite
from introspect.remote.contract import WRAPPER_TEXT_CONFIG_KEYS, JSONObject

# Bounds that keep arithmetic and list building cheap whatever the file says.
MAX_DEPTH = 24  # nesting levels kept when copying the config
MAX_ITEMS = 200_000  # entries kept per list / dict
MAX_LAYERS = 100_000  # no real model has more; a bigger value is garbage
MAX_SIZE = 10**12  # any width, count or vocab beyond this is garbage

# Keys that hold the language model inside a wrapper config, in search order: the contract's list.
NESTED_TEXT_KEYS = WRAPPER_TEXT_CONFIG_KEYS

# Keys a wrapper may keep at its top level while the text model lives nested.
INHERITED_KEYS = frozenset(
    {"quantization_config", "compression_config", "torch_dtype", "dtype", "tie_word_embeddings", "vocab_size"}
)

# Sub-config blocks some families keep their attention / FFN settings in. transformers
# configuration_dbrx.py: DbrxConfig.sub_configs = {"attn_config": DbrxAttentionConfig,
# "ffn_config": DbrxFFNConfig} (kv_n_heads, ffn_hidden_size, moe_num_experts, moe_top_k live there).
NESTED_BLOCKS = ("attn_config", "ffn_config")

# Keys whose presence marks a dict as a language-model config worth descending into.
_MODEL_MARKERS = (
    "num_hidden_layers",
    "n_layer",
    "num_layers",
    "n_layers",
    "hidden_size",
    "d_model",
    "n_embd",
    "text_config",
    "model_type",
)


def sanitize(value: Any, _depth: int = 0, _stack: frozenset[int] = frozenset()) -> Any:
    """Copy ``value`` into plain JSON-like data: no cycles, bounded depth and size.

    A dict that contains itself (directly or further down) is cut at the repeat,
    non-string keys are stringified, and anything exotic becomes its ``repr``-free
    type name so nothing downstream ever sees a custom object.
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if _depth >= MAX_DEPTH:
        return None
    marker = id(value)
    if marker in _stack:
        return None  # a loop back to an enclosing container: cut it
    stack = _stack | {marker}
    try:
        if isinstance(value, Mapping):
            out: JSONObject = {}
            for count, (key, item) in enumerate(value.items()):
                if count >= MAX_ITEMS:
                    break
                out[key if isinstance(key, str) else str(key)] = sanitize(item, _depth + 1, stack)
            return out
        if isinstance(value, (list, tuple)):
            return [sanitize(item, _depth + 1, stack) for item in value[:MAX_ITEMS]]
    except Exception:  # a hostile Mapping whose items() raises
        return None
    return None


def _looks_like_model(data: Mapping[str, Any]) -> bool:
    return any(key in data for key in _MODEL_MARKERS)


def unwrap(root: Mapping[str, Any]) -> tuple[JSONObject, list[str]]:
    """Find the language-model config inside a wrapper.

    Returns the text config and the key path taken (empty when the config is flat).
    A nested config is only taken when it looks like a model, so a wrapper that
    keeps its text fields at the top (old Qwen2-VL) stays flat.
    """
    current: JSONObject = dict(root)
    path: list[str] = []
    for _ in range(4):  # Qwen-Omni nests two levels; four is generous
        for key in NESTED_TEXT_KEYS:
            child = current.get(key)
            if isinstance(child, dict) and child and _looks_like_model(child):
                current = child
                path.append(key)
                break
        else:
            break
    return current, path


def _as_int(value: Any, minimum: int, maximum: int) -> int | None:
    # bool is an int subclass; `true` is never a layer count.
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return None
        if abs(value) > maximum:
            return None
        value = int(value)
    if not isinstance(value, int):
        return None
    if value < minimum or value > maximum:
        return None
    return value


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        if abs(value) > MAX_SIZE:
            return None
        return float(value)
    if isinstance(value, float) and math.isfinite(value):
        return value
    return None


class ConfigView:
    """Typed getters over a sanitized config dict (config.json as read: a ``JSONObject``), with
    fallbacks and evidence (config key -> the value it answered with).

    Lookups try each alias in order, first in the text config, then (for keys in
    ``INHERITED_KEYS``) in the wrapper, then in the family's documented defaults.
    Every key that answered is recorded in ``evidence``. A value present in the file that
    a getter cannot use (wrong type, implausible, not finite: :mod:`config_checks`) is
    recorded in ``rejected`` and answers None: it never falls through to a default.
    """

    def __init__(
        self,
        data: Mapping[str, Any],
        *,
        parent: Mapping[str, Any] | None = None,
        defaults: Mapping[str, Any] | None = None,
        prefix: str = "",
        model_type: str | None = None,
        rejected: dict[str, tuple[Any, str]] | None = None,
        accepted: set[str] | None = None,
        rejections: list[str] | None = None,
    ) -> None:
        self.data: JSONObject = dict(data)
        self.parent: JSONObject = dict(parent) if parent else {}
        self.defaults: JSONObject = dict(defaults) if defaults else {}
        self.prefix = prefix
        self.read: set[str] = set()
        self.evidence: JSONObject = {}
        self.model_type = model_type
        # Shared with sub-views, so a bad linear_attn_config.head_dim is reported like a top-level key.
        self.rejected: dict[str, tuple[Any, str]] = {} if rejected is None else rejected
        self.accepted: set[str] = set() if accepted is None else accepted
        # Every rejection in order, so a caller can tell which verdict met which bad key.
        self.rejections: list[str] = [] if rejections is None else rejections
        self.touched: dict[str, list[str]] = {}  # verdict section -> the rejected keys it met

    # -- raw access -------------------------------------------------------------

    def lookup(self, *keys: str) -> tuple[str | None, Any]:
        """First alias with a non-null value: ``(where, value)``; ``(None, None)`` if none."""
        for key in keys:
            self.read.add(key)
            if self.data.get(key) is not None:
                return self.prefix + key, self.data[key]
            if key in INHERITED_KEYS and self.parent.get(key) is not None:
                return key, self.parent[key]
        for key in keys:
            for block in NESTED_BLOCKS:
                nested = self.data.get(block)
                if isinstance(nested, dict) and nested.get(key) is not None:
                    return f"{self.prefix}{block}.{key}", nested[key]
        for key in keys:
            if self.defaults.get(key) is not None:
                return f"default({key})", self.defaults[key]
        return None, None

    def present(self, *keys: str) -> bool:
        """True when any alias holds a non-null value in the file itself (or one of its sub-config blocks)."""
        self.read.update(keys)
        blocks = [b for b in (self.data.get(name) for name in NESTED_BLOCKS) if isinstance(b, dict)]
        return any(self.data.get(key) is not None or any(b.get(key) is not None for b in blocks) for key in keys)

    def _typed(self, keys: Iterable[str], convert: Any, number: str | None = None) -> Any:
        for key in keys:
            where, value = self.lookup(key)
            if where is None:
                continue
            from_file = not where.startswith("default(")
            reason = check_number(key, value, self.model_type, number == "int") if number and from_file else None
            converted = convert(value) if reason is None else None
            if converted is None:
                if from_file and value != "":
                    reason = reason or ("outside the range this verdict accepts" if number
                                        else f"{kind_of(value)}, not what this key holds")
                    self.rejected.setdefault(where, (value, reason))
                    self.rejections.append(where)
                return None
            self.accepted.add(where)
            # Long lists (layer_types) are cited by length, not copied into the profile again.
            long = isinstance(converted, list) and len(converted) > 8
            self.evidence[where] = f"[{len(converted)} items]" if long else converted
            return converted
        return None

    # -- typed getters ----------------------------------------------------------

    def get_int(self, *keys: str, minimum: int = 0, maximum: int = MAX_SIZE) -> int | None:
        return self._typed(keys, lambda v: _as_int(v, minimum, maximum), "int")

    def get_float(self, *keys: str) -> float | None:
        return self._typed(keys, _as_float, "float")

    def get_bool(self, *keys: str) -> bool | None:
        return self._typed(keys, lambda v: v if isinstance(v, bool) else None)

    def get_str(self, *keys: str) -> str | None:
        return self._typed(keys, lambda v: v if isinstance(v, str) and v else None)

    def get_dict(self, *keys: str) -> JSONObject | None:
        for key in keys:
            where, value = self.lookup(key)
            if isinstance(value, dict) and non_finite(value) is None:  # a NaN / Infinity marker is no block
                self.evidence.setdefault(where or key, "{...}")
                return value
        return None

    def get_int_list(self, *keys: str, minimum: int = 0, maximum: int = MAX_SIZE) -> list[int] | None:
        """A list of ints; null when any element is not one (a half-valid list is not trusted)."""

        def convert(value: Any) -> list[int] | None:
            if not isinstance(value, list):
                return None
            out = [_as_int(item, minimum, maximum) for item in value]
            ints = [item for item in out if item is not None]
            return ints if len(ints) == len(out) else None

        return self._typed(keys, convert)

    def get_str_list(self, *keys: str) -> list[str] | None:
        def convert(value: Any) -> list[str] | None:
            if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
                return None
            return list(value)

        return self._typed(keys, convert)

    def sub(self, key: str) -> ConfigView | None:
        """A view on a nested dict (``linear_attn_config``, ``vision_config``)."""
        value = self.get_dict(key)
        if value is None:
            return None
        return ConfigView(value, prefix=f"{self.prefix}{key}.", model_type=self.model_type,
                          rejected=self.rejected, accepted=self.accepted, rejections=self.rejections)


def positive(value: int | None) -> int | None:
    """``value`` when it is a usable size (> 0), else None."""
    return value if value is not None and value > 0 else None
