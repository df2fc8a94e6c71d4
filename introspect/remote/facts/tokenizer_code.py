"""The tokenizer's own code (auto_map AutoTokenizer): which files, and the reserved ids it declares.

Runs on the host: standard library only, Python 3.8+. Class references and
relative imports are parsed by :mod:`introspect.remote.facts.custom_code`, the one
parser of both. Kimi-style classes declare ``num_reserved_special_tokens`` and name
the unnamed reserved ids with an f-string placeholder; both are read from the
source text. Nothing here raises.
"""

from __future__ import annotations

import os
import re
from typing import Any, List, Optional, Set, Tuple

from ..contract import DEFAULT_JSON_CAP, ErrorRecord, RemoteCodeInfo, tag
from ..readers import read_json_capped, read_text_capped, sha256_file
from ..sections import ModuleInfo
from .custom_code import class_reference, module_file, referenced_class, relative_import_files

PROBE = "tokenizer_files"
MAX_SCANNED_FILES = 16
_RESERVED_RE = re.compile(
    r"^[ \t]*(?:self\.)?num_reserved_special_tokens[ \t]*(?::[^=\n]+)?=[ \t]*(\d+)", re.MULTILINE
)
_RESERVED_EXTRA_RE = re.compile(r"num_reserved_special_tokens\s*\+\s*(\d+)")
_PLACEHOLDER_RE = re.compile(r"""f(["'])(<\|[^"'{}\n]*)\{\s*(\w+)\s*\}([^"'{}\n]*\|>)\1""")


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
        rel = entry["file"] if entry is not None and entry["exists"] else None
        if rel is not None and info["num_reserved_special_tokens"] is None:
            errors.extend(_scan_code(path, rel, cap, info))
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
        module, _, cls = ref.split("--", 1)[-1].rpartition(".")
        unusable: ModuleInfo = {"ref": ref, "module": module or None, "class": cls, "file": None, "exists": False,
                    "size": None, "sha256": None}
        return unusable
    rel = module_file(parsed.module)
    file = os.path.join(path, rel)
    info: ModuleInfo = {"ref": ref, "module": parsed.module, "class": parsed.name, "file": rel,
            "exists": os.path.isfile(file), "size": None, "sha256": None}
    if info["exists"]:
        info["size"] = os.path.getsize(file)
        info["sha256"], _ = sha256_file(file)
    return info


def _scan_code(path: str, rel: str, cap: int, info: RemoteCodeInfo) -> List[ErrorRecord]:
    """Find the reserved-id count and placeholder name in the module and its relative imports."""
    errors: List[ErrorRecord] = []
    queue = [rel]
    seen: Set[str] = set()
    while queue and len(seen) < MAX_SCANNED_FILES:
        current = queue.pop(0)
        if current in seen:
            continue
        seen.add(current)
        file = os.path.join(path, current)
        if not os.path.isfile(file):
            continue
        source, err = read_text_capped(file, cap)
        if err is not None:
            errors.append(tag(err, PROBE))
            continue
        if source is None:
            continue
        _scan_source(source, current, info)
        queue.extend(relative_import_files(path, current, source))
    return errors


def _scan_source(source: str, rel: str, info: RemoteCodeInfo) -> None:
    found = _RESERVED_RE.search(source)
    if found and info["num_reserved_special_tokens"] is None:
        info["num_reserved_special_tokens"] = int(found.group(1))
        info["reserved_declared_in"] = rel
        extra = _RESERVED_EXTRA_RE.search(source)
        info["reserved_extra"] = int(extra.group(1)) if extra else 0
    placeholder = _PLACEHOLDER_RE.search(source)
    if placeholder and info["placeholder"] is None:
        # The f-string's variable is the id in Kimi's class ({i} over the reserved range).
        info["placeholder"] = placeholder.group(2) + "{id}" + placeholder.group(4)


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
