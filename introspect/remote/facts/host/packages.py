"""Preflight: the pipeline's distributions, and the modules the tokenizer's own code imports.

Runs on the host: standard library only, Python 3.8+; packages are looked up by
metadata and ``find_spec``, never imported. The tokenizer's code is followed with
:mod:`introspect.remote.facts.model.custom_code`, the one parser of auto_map references.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any, Dict, List, Tuple

from ...contract import DEFAULT_JSON_CAP, ModuleEntry
from ...readers import read_json_capped
from ..model import custom_code
from . import environment


def check_packages(model_path: str, packages: List[str]) -> Dict[str, Any]:
    """The pipeline's distributions, and the modules the tokenizer's own code imports.

    ``{"python", "prefix", "in_venv", "tokenizer_code": [files],
       "items": [{"name", "kind": "distribution" | "module", "required_by", "version",
                  "available", "install"}], "missing": [pip names]}``
    """
    items: List[Dict[str, Any]] = []
    for name in packages:
        version = environment.package_version(name)
        items.append({"name": name, "kind": "distribution", "required_by": "pipeline", "version": version,
                      "available": version is not None, "install": name})
    code_files, modules = _tokenizer_code_imports(model_path)
    described, _missing, _errs = environment.describe_modules(modules)
    listed = set(_normalise(i["name"]) for i in items)
    for module in modules:
        info = described.get(module) or ModuleEntry()
        install = info.get("distribution") or module
        if _normalise(module) in listed or _normalise(install) in listed:
            continue  # already checked as a pipeline distribution
        version = environment.package_version(install) if info.get("available") else None
        items.append({"name": module, "kind": "module", "required_by": "tokenizer code", "version": version,
                      "available": bool(info.get("available")), "install": install})
    missing = [i["install"] for i in items if not i["available"]]
    return {"python": sys.executable, "prefix": sys.prefix,
            "in_venv": sys.prefix != getattr(sys, "base_prefix", sys.prefix), "tokenizer_code": code_files,
            "items": items, "missing": sorted(set(missing), key=missing.index)}


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _tokenizer_code_imports(model_path: str) -> Tuple[List[str], List[str]]:
    """(code files, third-party modules) of the tokenizer's auto_map code, followed transitively."""
    if not os.path.isdir(model_path):
        return [], []
    refs: List[Tuple[str, str]] = []
    for name in ("tokenizer_config.json", "config.json"):
        value, _err = read_json_capped(os.path.join(model_path, name), DEFAULT_JSON_CAP)
        amap = value.get("auto_map") if isinstance(value, dict) else None
        tok_ref = amap.get("AutoTokenizer") if isinstance(amap, dict) else None
        if tok_ref:
            refs.extend(custom_code.auto_map_references({"auto_map": {"AutoTokenizer": tok_ref}}, name + ":"))
    if not refs:
        return [], []
    local = custom_code.local_module_names(os.listdir(model_path))
    entries, _truncated, _errors = custom_code.collect_custom_code(model_path, refs, local, DEFAULT_JSON_CAP)
    modules: List[str] = []
    for entry in entries:
        for module in entry.get("imports") or []:
            if module not in modules:
                modules.append(module)
    return [e["file"] for e in entries], modules

