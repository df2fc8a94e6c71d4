"""Section ``files``: the model directory's listing, configs, index summary and custom code.

Runs on the host under its own interpreter: standard library only, Python 3.8+.
Nothing here raises to the caller: the collector returns ``(facts, errors)`` where
errors are records ``{"probe": "files", "type", "message", "path"?}``. The shape
is :class:`introspect.remote.contract.FilesFacts`; each part is read by its own
module (listing, configs, native_config, index, custom_code).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

from ...contract import DEFAULT_JSON_CAP, ErrorRecord, FilesFacts, error_record, tag
from ...readers import read_json_capped
from . import configs, custom_code, index, listing, native_config

PROBE = "files"
# Files besides config.json whose auto_map names code of the model's own.
AUTO_MAP_FILES = ("tokenizer_config.json", "preprocessor_config.json", "processor_config.json")


def _err(kind: str, message: str, path: Optional[str] = None) -> ErrorRecord:
    return error_record(kind, message, path, probe=PROBE)


def _empty_facts(model_path: str) -> FilesFacts:
    return FilesFacts(model_path=model_path, real_path=None, status="ok", listing=[], listing_total=0,
                      listing_truncated=False, total_size=0, config=None, generation_config=None,
                      preprocessor_config_present=False, index=None, auto_map_sources={}, custom_code=[],
                      custom_code_truncated=False)


def collect_files(model_path: str, *, json_cap: int = DEFAULT_JSON_CAP) -> Tuple[FilesFacts, List[ErrorRecord]]:
    """Facts about the model directory. Never raises."""
    facts = _empty_facts(model_path)
    try:
        return _collect_files(model_path, json_cap, facts)
    except Exception as exc:  # a bug here must cost this section only, not the run
        return facts, [_err("internal-error", "files probe: %s: %s" % (type(exc).__name__, exc), str(model_path))]


def _collect_files(model_path: str, json_cap: int, facts: FilesFacts) -> Tuple[FilesFacts, List[ErrorRecord]]:
    status, err = listing.check_model_dir(model_path)
    facts["status"] = status
    if err is not None:
        return facts, [err]
    errors: List[ErrorRecord] = []
    facts["real_path"] = os.path.realpath(model_path)
    names, truncated, err = listing.scan_names(model_path)
    if err is not None:
        facts["status"] = err["type"]
        return facts, [err]
    rows, link_errors = listing.list_dir(model_path, names)
    errors.extend(link_errors)
    facts["listing"] = rows
    facts["listing_total"] = len(names)
    facts["listing_truncated"] = truncated or len(names) > listing.MAX_LISTING
    facts["total_size"] = sum(r["size"] or 0 for r in rows if r["kind"] == "file")
    if not listing.looks_like_model_dir(model_path, names):
        facts["status"] = "not-a-model-dir"
        errors.append(_err("not-a-model-dir", "%s has no config.json, weights or tokenizer files: "
                           "not a model directory" % model_path, model_path))
        return facts, errors
    _collect_configs(model_path, json_cap, facts, errors)
    _collect_code(model_path, names, json_cap, facts, errors)
    return facts, errors


def _collect_configs(model_path: str, json_cap: int, facts: FilesFacts, errors: List[ErrorRecord]) -> None:
    join = os.path.join
    config, errs = configs.read_config(join(model_path, configs.CONFIG), json_cap, optional=True)
    facts["config"] = config
    errors.extend(errs)
    if config is None and not errs:
        config = _native_config(model_path, json_cap, facts, errors)
    if config is None and not errs and facts.get("config_source") is None:
        errors.append(_err("missing-config", "%s has no config.json: the architecture cannot be read"
                           % model_path, join(model_path, configs.CONFIG)))
    gen, errs = configs.read_config(join(model_path, configs.GENERATION_CONFIG), json_cap, optional=True)
    facts["generation_config"] = gen
    errors.extend(errs)
    facts["preprocessor_config_present"] = os.path.lexists(join(model_path, "preprocessor_config.json"))
    # The safetensors section owns the index and reports its errors; here only the summary.
    facts["index"], _index_error = index.summarize_index(model_path)


def _native_config(model_path: str, json_cap: int, facts: FilesFacts,
                   errors: List[ErrorRecord]) -> Optional[Dict[str, Any]]:
    """Mistral/Meta params.json, mapped to HF keys (native_config), when there is no config.json."""
    path = os.path.join(model_path, "params.json")
    if not os.path.lexists(path):
        return None
    params, err = read_json_capped(path, json_cap)
    if err is not None:
        errors.append(tag(err, PROBE))
        facts["config_source"] = "params.json"
        return None
    config = native_config.to_hf_config(params)
    if config is not None:
        facts["config"] = config
        facts["config_source"] = "params.json"
        facts["native_params"] = params
    return config


def _collect_code(model_path: str, names: List[str], json_cap: int, facts: FilesFacts,
                  errors: List[ErrorRecord]) -> None:
    config = facts["config"]
    refs = custom_code.auto_map_references(config, "config.json:") if config else []
    sources: Dict[str, Any] = {"config.json": None if config is not None else "absent-or-invalid"}
    for fname in AUTO_MAP_FILES:
        path = os.path.join(model_path, fname)
        if not os.path.lexists(path):
            continue
        value, err = read_json_capped(path, json_cap)
        sources[fname] = None if err is None else err["type"]
        # tokenizer_config.json belongs to the tokenizer_files section, which reports its errors.
        if err is not None and fname != "tokenizer_config.json":
            errors.append(tag(err, PROBE))
        if value is not None:
            refs.extend(custom_code.auto_map_references(value, fname + ":"))
    facts["auto_map_sources"] = sources
    code, truncated, errs = custom_code.collect_custom_code(model_path, refs, custom_code.local_module_names(names),
                                                            json_cap)
    facts["custom_code"] = code
    facts["custom_code_truncated"] = truncated
    errors.extend(errs)
