"""The model's JSON configs: config.json, generation_config.json, and the ids they name.

Runs on the host: standard library only, Python 3.8+. Nothing here raises; read
errors are records (tagged with the ``files`` section where that section reports them).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

from ...contract import DEFAULT_JSON_CAP, WRAPPER_TEXT_CONFIG_KEYS, ErrorRecord, tag
from ...readers import json_safe, read_json_capped, read_json_file

PROBE = "files"
CONFIG = "config.json"
GENERATION_CONFIG = "generation_config.json"


def read_config(path: str, cap: int, optional: bool) -> Tuple[Optional[Dict[str, Any]], List[ErrorRecord]]:
    """A JSON object file; a missing optional file is not an error."""
    if optional and not os.path.lexists(path):
        return None, []
    value, err, warning = read_json_file(path, cap)
    if err is not None:
        return None, [tag(err, PROBE)]
    # 1e400 parses as inf (parse_constant never sees it): keep the reply valid JSON.
    return json_safe(value), [tag(warning, PROBE)] if warning is not None else []


def text_config_sections(config: Any) -> List[Tuple[str, Dict[str, Any]]]:
    """(label, config) of the nested text configs of a wrapper, then the top level.

    The language model's embedding is what ids index: a multimodal wrapper (kimi_k25,
    llava, qwen-vl) keeps it in a nested text config, which wins over the top level.
    """
    if not isinstance(config, dict):
        return []
    out = []
    for key in WRAPPER_TEXT_CONFIG_KEYS:
        if isinstance(config.get(key), dict):
            out.append((CONFIG + ":" + key, config[key]))
    out.append((CONFIG, config))
    return out


def vocab_and_eos(model_path: str) -> Dict[str, Any]:
    """vocab_size (nested text configs too) and EOS ids of config.json and generation_config.json.

    ``{"vocab_size", "vocab_size_source", "config_eos": [ids] | null, "config_eos_source",
       "generation_eos": [ids] | null, "generation_config_present", "errors": [...]}``
    """
    out: Dict[str, Any] = {"vocab_size": None, "vocab_size_source": None, "config_eos": None, "config_eos_source": None,
           "generation_eos": None, "generation_config_present": False, "errors": []}
    config, err = read_json_capped(os.path.join(model_path, CONFIG), DEFAULT_JSON_CAP)
    if err is not None:
        out["errors"].append(err)
    for label, section in text_config_sections(config):
        if out["vocab_size"] is None and isinstance(section.get("vocab_size"), int):
            out["vocab_size"], out["vocab_size_source"] = section["vocab_size"], label
        if out["config_eos"] is None and section.get("eos_token_id") is not None:
            out["config_eos"], out["config_eos_source"] = id_list(section["eos_token_id"]), label
    gen_path = os.path.join(model_path, GENERATION_CONFIG)
    out["generation_config_present"] = os.path.exists(gen_path)
    if out["generation_config_present"]:
        gen, err = read_json_capped(gen_path, DEFAULT_JSON_CAP)
        if err is not None:
            out["errors"].append(err)
        elif gen.get("eos_token_id") is not None:
            out["generation_eos"] = id_list(gen["eos_token_id"])
    return out


def id_list(value: Any) -> Optional[List[int]]:
    """Token ids from an int or a list of them (bools are not ids); None when there are none."""
    values = value if isinstance(value, list) else [value]
    ids = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    return ids or None
