"""Witness 2a: the model's config class, as transformers builds it (no torch needed).

Runs on the host inside the isolated ``model_code`` process (standard library at import
time, Python 3.8+; transformers is handed in by the caller). The class's ``__init__``
derives what config.json leaves out: per-layer lists (``layer_types`` and the like),
windows, ``head_dim``, and the defaults of absent keys (``tie_word_embeddings``,
``hidden_act``, biases). :func:`config_dict` ships all of it, so the controller can run
its rules on the config the model code will actually see.

When ``auto_map`` names code files the directory lacks (common in re-saved or trimmed
checkpoints) but the installed transformers knows the ``model_type`` natively, the native
class is used and the reason kept: transformers itself only falls back to it with
``trust_remote_code=False`` (models/auto/configuration_auto.py ``AutoConfig.from_pretrained``,
``resolve_trust_remote_code``), which would refuse every other model with code.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional, Tuple

from ...readers import json_safe
from ..tokenizer.tokenizer_load import short

# Keys with no bearing on the architecture that can be large (a classifier's label maps).
DROPPED_KEYS = ("id2label", "label2id", "auto_map", "_name_or_path", "transformers_version")
MAX_DICT_BYTES = 1 << 20


def load_config(transformers: Any, path: str, trust: bool) -> Tuple[Any, Optional[Dict[str, Any]]]:
    """(config, fallback): ``fallback`` says why the native class stood in for the model's own."""
    try:
        return transformers.AutoConfig.from_pretrained(path, trust_remote_code=trust), None
    except Exception as exc:  # noqa: BLE001 - the native class may still read it
        native = _native_class(path)
        if native is None:
            raise
        config = native.from_pretrained(path)
        # The model classes would otherwise follow auto_map to the missing files again
        # (models/auto/auto_factory.py _BaseAutoModelClass.from_config checks config.auto_map).
        config.auto_map = {}
        return config, {"class": type(config).__name__, "model_type": getattr(config, "model_type", None),
                        "reason": "%s: %s" % (type(exc).__name__, short(str(exc), 300))}


def _native_class(path: str) -> Any:
    """The installed transformers' own config class for config.json's model_type, or None."""
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as handle:
            model_type = json.load(handle).get("model_type")
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING

        return CONFIG_MAPPING[model_type] if isinstance(model_type, str) and model_type in CONFIG_MAPPING else None
    except Exception:  # noqa: BLE001 - no native class: the original error stands
        return None


def config_dict(config: Any) -> Optional[Dict[str, Any]]:
    """The config as its class holds it (derived lists and defaults included), JSON-safe and capped."""
    try:
        data = config.to_dict()
    except Exception:  # noqa: BLE001 - a class without to_dict: the attributes alone are reported
        return None
    if not isinstance(data, dict):
        return None
    _add_derived(config, data)
    out = json_safe(_without(data))
    if not isinstance(out, dict) or len(json.dumps(out, default=str)) > MAX_DICT_BYTES:
        return None
    return out


# Per-layer lists a class exposes as a property or through attribute_map, which to_dict leaves out
# (transformers configuration_recurrent_gemma.py: attribute_map {"layer_types": "layers_block_type"}).
DERIVED_LISTS = ("layer_types", "mlp_layer_types")


def _add_derived(config: Any, data: Dict[str, Any]) -> None:
    """Fill ``data`` (the config's to_dict) with its derived per-layer lists, sub-configs included."""
    for name in DERIVED_LISTS:
        if name in data:
            continue
        try:
            value = getattr(config, name, None)
        except Exception:  # noqa: BLE001 - a property that raises derives nothing
            continue
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            data[name] = list(value)
    for key, sub in data.items():
        nested = getattr(config, key, None) if isinstance(sub, dict) else None
        if nested is not None and hasattr(nested, "to_dict"):
            _add_derived(nested, sub)


def _without(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without(v) for k, v in value.items() if k not in DROPPED_KEYS}
    if isinstance(value, (list, tuple)):
        return [_without(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)  # a dtype or an enum: its name is what the rules read
