"""Damaged raw facts (``introspect profile RAW.json`` of a hand-edited or corrupted file)
become findings, never an internal error.

:func:`repair_raw` checks the shape every section is read with (an object where an
object belongs, a string where a path belongs) and drops what does not fit, naming it;
:func:`guarded` runs one section's analysis and, should damage deeper down still make it
raise, leaves that section empty with a finding that names the section and the error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, cast

from pydantic import ValidationError

from introspect.analysis.findings import Finding, Severity
from introspect.remote.contract import RawFacts

T = TypeVar("T")

_FIX = "re-run `introspect probe --save-raw` to get undamaged raw facts"

# Section -> the JSON type it must have when present (null is always allowed).
SECTION_TYPES: dict[str, type] = {
    "target": dict, "files": dict, "options": dict, "environment": dict, "python": dict,
    "tokenizer_files": dict, "tokenizer_probe": dict, "safetensors": dict, "timings": dict,
    "cache": dict, "fatal": dict, "hashes": dict, "errors": list, "drafters": list, "settings": dict,
    "model_code_probe": dict,
}
# Fields read as strings (paths, names) inside a section.
STRING_FIELDS: dict[str, tuple[str, ...]] = {
    "target": ("scheme", "host", "user", "python", "venv", "model_path", "container"),
    "files": ("model_path", "real_path", "status", "config_source"),
    "environment": ("python_version", "python_executable"),
}
LIST_FIELDS: dict[str, tuple[str, ...]] = {"files": ("listing", "custom_code"), "environment": ("missing_modules",)}
# Fields read as counts.
INT_FIELDS: dict[str, tuple[str, ...]] = {"target": ("port",)}


def _damaged(where: str, value: object, expected: str) -> Finding:
    return Finding(Severity.ERROR, "raw-damaged",
                   f"raw facts: {where} is {type(value).__name__}, expected {expected}; ignored", _FIX)


def repair_raw(raw: object) -> tuple[RawFacts, list[Finding]]:
    """A shallow copy of ``raw`` (raw facts as read: any JSON value) with wrongly-typed sections and
    fields removed, and a finding each: what is left has the shapes :class:`RawFacts` names."""
    out, findings = dict(raw) if isinstance(raw, dict) else {}, []
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
            for field in INT_FIELDS.get(name, ()):
                value = section.get(field)
                if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                    findings.append(_damaged(f"{name}.{field}", section.pop(field), "an integer"))
    if isinstance(out.get("errors"), list):
        out["errors"] = [item for item in out["errors"] if isinstance(item, dict)]
    if isinstance(out.get("timings"), dict):
        out["timings"] = timings = dict(out["timings"])
        for step, seconds in list(timings.items()):
            if seconds is not None and (not isinstance(seconds, (int, float)) or isinstance(seconds, bool)):
                findings.append(_damaged(f"timings.{step}", timings.pop(step), "a number"))
    return cast(RawFacts, out), findings


def guarded(name: str, fn: Callable[[], T], fallback: Callable[[], T], findings: list[Finding]) -> T:
    """``fn()``, or ``fallback()`` and a ``raw-damaged`` finding when damaged facts make it raise."""
    try:
        return fn()
    except Exception as exc:  # damaged input deep in a section must cost that section only
        findings.append(Finding(Severity.ERROR, "raw-damaged",
                                f"raw facts: the {name} facts are damaged ({_why(exc)}"[:300]
                                + "); that section is left empty", _FIX))
        return fallback()


def _why(exc: Exception) -> str:
    """What was wrong, in one line: a value its section's record cannot hold names where it is."""
    if isinstance(exc, ValidationError) and exc.errors():
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        return f"{where}: {first['msg'].lower()}, not {type(first.get('input')).__name__}{more}"
    return f"{type(exc).__name__}: {exc}"
