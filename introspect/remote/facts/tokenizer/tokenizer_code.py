"""The tokenizer's own code (auto_map AutoTokenizer): which files, and the reserved ids it declares.

Runs on the host: standard library only, Python 3.8+. Class references and
relative imports are parsed by :mod:`introspect.remote.facts.model.custom_code`, the one
parser of both. What the class declares (Kimi-style ``num_reserved_special_tokens``,
literal or through a module constant, the f-string placeholder naming the unnamed
reserved ids, lists and dicts of specials) is read by the AST in
:mod:`introspect.remote.facts.tokenizer.static_specials`, never by a regex. Nothing here raises.
"""

from __future__ import annotations

import os
from typing import Any, List, Optional, Tuple

from ... import confine
from ...contract import DEFAULT_JSON_CAP, ErrorRecord, RemoteCodeInfo, tag
from ...readers import read_json_capped, sha256_file
from ...sections import ModuleInfo
from ..model.custom_code import class_reference, module_file, referenced_class, written_parts
from . import static_specials

PROBE = "tokenizer_files"


def remote_code(path: str, cap: int, tokenizer_config: Any) -> Tuple[Optional[RemoteCodeInfo], List[ErrorRecord]]:
    """The auto_map tokenizer class of the model dir, or None when it names none."""
    errors: List[ErrorRecord] = []
    auto_map, source = _auto_map(path, cap, tokenizer_config)
    if auto_map is None:
        return None, errors
    slow_ref, fast_ref = _split_auto_map(auto_map)
    info = RemoteCodeInfo(auto_map=auto_map, auto_map_source=source, slow=_module_info(path, slow_ref),
                          fast=_module_info(path, fast_ref), num_reserved_special_tokens=None, reserved_extra=0,
                          reserved_declared_in=None, placeholder=None)
    for entry in (info["slow"], info["fast"]):
        if entry is not None and entry["exists"] and info["num_reserved_special_tokens"] is None:
            errors.extend(_static_specials(path, entry, cap, info))
    return info, errors


def _auto_map(path: str, cap: int, tokenizer_config: Any) -> Tuple[Any, Optional[str]]:
    amap = tokenizer_config.get("auto_map") if isinstance(tokenizer_config, dict) else None
    value = amap.get("AutoTokenizer") if isinstance(amap, dict) else None
    if value:
        return value, "tokenizer_config.json"
    # Some repos declare the tokenizer class only in config.json. Its read errors are
    # the files section's to report, not repeated here.
    model_config, _ = read_json_capped(os.path.join(path, "config.json"), cap)
    auto = (model_config or {}).get("auto_map")
    if isinstance(auto, dict) and auto.get("AutoTokenizer"):
        return auto["AutoTokenizer"], "config.json"
    return None, None


def _split_auto_map(value: Any) -> Tuple[Optional[str], Optional[str]]:
    if isinstance(value, str):
        return value, None
    if isinstance(value, (list, tuple)):
        slow = value[0] if len(value) > 0 and isinstance(value[0], str) else None
        fast = value[1] if len(value) > 1 and isinstance(value[1], str) else None
        return slow, fast
    return None, None


def _module_info(path: str, ref: Optional[str]) -> Optional[ModuleInfo]:
    """"repo--pkg.module.Class" -> the module file inside the model dir (if it is one)."""
    if not ref:
        return None
    parsed = class_reference(ref)
    if parsed is None:  # not a usable reference: named as written, never followed
        module, cls = written_parts(ref)
        unusable: ModuleInfo = {"ref": ref, "module": module or None, "class": cls, "file": None, "exists": False,
                    "size": None, "sha256": None}
        return unusable
    rel = module_file(parsed.module)
    file = os.path.join(path, rel)
    info: ModuleInfo = {"ref": ref, "module": parsed.module, "class": parsed.name, "file": rel,
            "exists": False, "size": None, "sha256": None}
    confine.confine(path)
    try:
        confine.check(file)
    except confine.LinkOutside:
        # There, but through a link out of the model dir: neither sized nor hashed (the target's
        # size would be shipped). The listing names the link; the static read reports it too.
        info["exists"] = True
        return info
    info["exists"] = os.path.isfile(file)
    if info["exists"]:
        info["size"] = os.path.getsize(file)
        info["sha256"], _ = sha256_file(file)
    return info


def _static_specials(path: str, entry: ModuleInfo, cap: int, info: RemoteCodeInfo) -> List[ErrorRecord]:
    """The class's declared specials, read by the AST (static_specials), into the remote-code facts."""
    rel = entry["file"] or ""
    found, errs = static_specials.scan_specials(path, rel, entry["class"], cap)
    info["static"] = found
    reserved = found.get("reserved") or {}
    if isinstance(reserved.get("count"), int):
        info["num_reserved_special_tokens"] = reserved["count"]
        info["reserved_extra"] = reserved.get("extra") or 0
        info["reserved_declared_in"] = reserved.get("resolved_in") or reserved.get("declared_in")
    placeholder = found.get("placeholder") or {}
    if placeholder.get("mode") == "id":
        info["placeholder"] = placeholder.get("template")
    return [tag(err, PROBE) for err in errs]


def declared_classes(model_path: str) -> List[str]:
    """The tokenizer classes the model's own code provides (tokenizer_config.json auto_map).

    When the loaded class is none of them, transformers built something else (e.g. an
    automatic fast conversion with --no-remote-code) that a server running the model's
    code may not match.
    """
    config, err = read_json_capped(os.path.join(model_path, "tokenizer_config.json"), DEFAULT_JSON_CAP)
    amap = config.get("auto_map") if err is None else None
    refs = amap.get("AutoTokenizer") if isinstance(amap, dict) else None
    refs = refs if isinstance(refs, list) else [refs]
    return [referenced_class(ref) for ref in refs if isinstance(ref, str) and ref]
