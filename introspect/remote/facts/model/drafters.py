"""Section ``drafters``: speculative-decoding drafter configs beside or inside the model dir.

Runs on the host: standard library only, Python 3.8+. Nothing here raises; errors
are records tagged with the ``files`` section. Also the drafter digest of
``introspect models`` (which signals, which target model a drafter names).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

from ...contract import DEFAULT_JSON_CAP, DRAFTER_JSON_CAP, Drafter, ErrorRecord, error_record
from ...readers import json_safe, read_json_capped
from .listing import check_model_dir, scan_names

PROBE = "files"
MAX_DRAFTER_ENTRIES = 200  # candidate directories examined for drafter configs
_DRAFTER_WORDS = ("eagle", "dflash", "mtp", "medusa", "nextn", "draft")
# Where drafter configs record the model they were trained against.
TARGET_KEYS = ("target_model", "target_model_name_or_path", "target_model_path", "target_model_id",
               "verifier_name_or_path", "base_model", "base_model_name_or_path", "target")
TARGET_SECTIONS = ("dflash_config", "eagle_config", "speculators_config")


def _err(kind: str, message: str, path: Optional[str] = None) -> ErrorRecord:
    return error_record(kind, message, path, probe=PROBE)


def drafter_signals(config: Any) -> List[str]:
    """Why a config looks like a speculative-decoding drafter (empty when it does not)."""
    if not isinstance(config, dict):
        return []
    found = []
    for key in ("draft_vocab_size", "eagle_config", "dflash_config", "target_layer_ids"):
        if key in config:
            found.append(key)
    for nested in ("dflash_config", "eagle_config"):
        sub = config.get(nested)
        if isinstance(sub, dict) and "target_layer_ids" in sub and "target_layer_ids" not in found:
            found.append("%s.target_layer_ids" % nested)
    if "block_size" in config and "mask_token_id" in config:
        found.append("block_size+mask_token_id")
    archs = config.get("architectures")
    if isinstance(archs, list):
        for arch in archs:
            if isinstance(arch, str) and any(w in arch.lower() for w in _DRAFTER_WORDS):
                found.append("architectures:%s" % arch)
    mtype = config.get("model_type")
    if isinstance(mtype, str) and any(w in mtype.lower() for w in _DRAFTER_WORDS):
        found.append("model_type:%s" % mtype)
    return found


def drafter_target(config: Any) -> Tuple[Optional[str], Optional[str]]:
    """(target model, the key it was read from) when a drafter config states one."""
    if not isinstance(config, dict):
        return None, None
    places = [("", config)]
    for section in TARGET_SECTIONS:
        if isinstance(config.get(section), dict):
            places.append((section + ".", config[section]))
    spec = config.get("speculators_config")
    if isinstance(spec, dict) and isinstance(spec.get("verifier"), dict):
        # speculators packaging: {"verifier": {"name_or_path": "org/Target", ...}}
        places.insert(0, ("speculators_config.verifier.", spec["verifier"]))
    for prefix, cfg in places:
        keys = TARGET_KEYS + (("name_or_path",) if prefix.endswith("verifier.") else ())
        for key in keys:
            value = cfg.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip(), prefix + key
    return None, None


def describe_drafter(config: Any) -> Optional[Dict[str, Any]]:
    """``{"signals", "target", "target_key"}`` for a drafter config, else None."""
    signals = drafter_signals(config)
    if not signals:
        return None
    target, key = drafter_target(config)
    return {"signals": signals, "target": target, "target_key": key}


def _drafter_candidates(model_path: str) -> Tuple[List[Tuple[str, str]], bool, List[ErrorRecord]]:
    """(directory, relation) pairs to examine, likeliest first, bounded."""
    model_real = os.path.realpath(model_path)
    parent = os.path.dirname(os.path.abspath(model_path.rstrip("/") or "/"))
    pairs: List[Tuple[str, str]] = []
    errors = []
    for base, relation in ((model_path, "child"), (parent, "sibling")):
        names, _trunc, err = scan_names(base)
        if err is not None:
            if relation == "child":
                errors.append(err)
            continue
        for name in names:
            full = os.path.join(base, name)
            if relation == "sibling" and os.path.realpath(full) == model_real:
                continue
            pairs.append((full, relation))
    model_name = os.path.basename(model_real).lower()

    def rank(pair: Tuple[str, str]) -> Tuple[int, str]:
        name = os.path.basename(pair[0]).lower()
        hinted = any(w in name for w in _DRAFTER_WORDS) or (model_name and model_name in name)
        return (0 if hinted else 1, pair[0])

    pairs.sort(key=rank)
    truncated = len(pairs) > MAX_DRAFTER_ENTRIES
    return pairs[:MAX_DRAFTER_ENTRIES], truncated, errors


def collect_drafters(model_path: str, *,
                     json_cap: int = DEFAULT_JSON_CAP) -> Tuple[List[Drafter], List[ErrorRecord]]:
    """Drafter configs in sub-directories of the model dir and in its sibling directories."""
    try:
        return _collect_drafters(model_path, json_cap)
    except Exception as exc:
        return [], [_err("internal-error", "drafter scan: %s: %s" % (type(exc).__name__, exc), str(model_path))]


def _collect_drafters(model_path: str, json_cap: int) -> Tuple[List[Drafter], List[ErrorRecord]]:
    _status, err = check_model_dir(model_path)
    if err is not None:
        return [], []  # the files section reports the model path itself
    cap = min(json_cap, DRAFTER_JSON_CAP)
    pairs, truncated, errors = _drafter_candidates(model_path)
    found = []
    for path, relation in pairs:
        cfg_path = os.path.join(path, "config.json")
        if not os.path.isdir(path) or not os.path.isfile(cfg_path):
            continue
        # Other models' broken configs beside ours are not our errors: skipped quietly.
        config, err = read_json_capped(cfg_path, cap)
        signals = drafter_signals(config) if err is None else []
        if signals:
            found.append(Drafter(path=path, relation=relation, matched=signals, config=json_safe(config)))
    if truncated:
        errors.append(_err("scan-truncated", "more than %d directories beside %s: the drafter scan looked at "
                           "the first %d" % (MAX_DRAFTER_ENTRIES, model_path, MAX_DRAFTER_ENTRIES), model_path))
    return found, errors
