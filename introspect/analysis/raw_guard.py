"""Damaged raw facts (``introspect profile RAW.json`` of a hand-edited or corrupted file)
become findings, never an internal error.

:func:`repair_raw` checks the shape every section is read with (an object where an
object belongs, a string where a path belongs) and drops what does not fit, naming it;
:func:`guarded` runs one section's analysis and, should damage deeper down still make it
raise, leaves that section empty with a finding that names the section and the error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from introspect.analysis.findings import Finding, Severity

T = TypeVar("T")

_FIX = "re-run `introspect probe --save-raw` to get undamaged raw facts"

# Section -> the JSON type it must have when present (null is always allowed).
SECTION_TYPES: dict[str, type] = {
    "target": dict, "files": dict, "options": dict, "environment": dict, "python": dict,
    "tokenizer_files": dict, "tokenizer_probe": dict, "safetensors": dict, "timings": dict,
    "cache": dict, "fatal": dict, "hashes": dict, "errors": list, "drafters": list,
}
# Fields read as strings (paths, names) inside a section.
STRING_FIELDS: dict[str, tuple[str, ...]] = {
    "target": ("scheme", "host", "user", "python", "venv", "model_path"),
    "files": ("model_path", "real_path", "status", "config_source"),
    "environment": ("python_version", "python_executable"),
}
LIST_FIELDS: dict[str, tuple[str, ...]] = {"files": ("listing", "custom_code"), "environment": ("missing_modules",)}


def _damaged(where: str, value: Any, expected: str) -> Finding:
    return Finding(Severity.ERROR, "raw-damaged",
                   f"raw facts: {where} is {type(value).__name__}, expected {expected}; ignored", _FIX)


def repair_raw(raw: dict[str, Any]) -> tuple[dict[str, Any], list[Finding]]:
    """A shallow copy of ``raw`` with wrongly-typed sections and fields removed, and a finding each."""
    out, findings = dict(raw), []
    for name, kind in SECTION_TYPES.items():
        if out.get(name) is not None and not isinstance(out[name], kind):
            findings.append(_damaged(name, out.pop(name), "an object" if kind is dict else "a list"))
    for name, fields in STRING_FIELDS.items():
        section = out.get(name)
        if isinstance(section, dict):
            section = out[name] = dict(section)
            for field in fields:
                if section.get(field) is not None and not isinstance(section[field], str):
                    findings.append(_damaged(f"{name}.{field}", section.pop(field), "a string"))
            for field in LIST_FIELDS.get(name, ()):
                if section.get(field) is not None and not isinstance(section[field], list):
                    findings.append(_damaged(f"{name}.{field}", section.pop(field), "a list"))
    if isinstance(out.get("errors"), list):
        out["errors"] = [item for item in out["errors"] if isinstance(item, dict)]
    return out, findings


def guarded(name: str, fn: Callable[[], T], fallback: Callable[[], T], findings: list[Finding]) -> T:
    """``fn()``, or ``fallback()`` and a ``raw-damaged`` finding when damaged facts make it raise."""
    try:
        return fn()
    except Exception as exc:  # damaged input deep in a section must cost that section only
        findings.append(Finding(Severity.ERROR, "raw-damaged",
                                f"raw facts: the {name} facts are damaged ({type(exc).__name__}: {exc}"[:300]
                                + "); that section is left empty", _FIX))
        return fallback()
