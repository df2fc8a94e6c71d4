"""Findings read straight off the raw facts: remote errors and modules the model's code lacks."""

from __future__ import annotations

from introspect.analysis.findings import Finding, Severity, pip_fix
from introspect.analysis.result import TargetSection
from introspect.documents.profile_files import Environment
from introspect.remote.contract import ErrorRecord

# Error types the remote reports that are only worth a warning.
WARNING_ERROR_TYPES = {"data-truncated", "listing-truncated", "dangling", "dangling-symlink", "symlink-loop",
                       "scan-truncated", "missing-custom-code", "remote-repo"}

# Fixes for remote error types that have an obvious one.
ERROR_FIXES = {
    "missing-custom-code": "copy the missing .py file from the model's repository into the model dir",
    "too-large": "raise --max-json-bytes if the file is legitimately that large",
    "malformed-json": "re-download or repair the file",
    "not-utf8": "re-download the file; it is not UTF-8 text",
    "too-deep": "re-download or repair the file; no model file nests that deeply",
    "wrong-type": "replace the file with the model's real one: it must hold a JSON object",
    "encoding": "re-save the file as UTF-8 without a byte-order mark (transformers opens it as UTF-8)",
    "not-a-regular-file": "replace the FIFO, socket or device with the real file",
    "header-too-large": "the shard is corrupt or not safetensors: re-download it",
    "truncated-header": "the shard is truncated: re-download it",
    "malformed-header": "the shard is corrupt: re-download it",
    "missing-shard": "a shard named in model.safetensors.index.json is missing: finish the download",
    # The probe's own limits on an isolated task (remote/limits.py, remote/supervisor.py).
    "memory-limit": "pass --memory-limit with a larger size (e.g. 32GiB) only if the task really needs it; 0 turns it off",
    "output-limit": "the task (the model's own code) writes without end: review the model's .py files",
    "link-outside": "replace the link with the model's own file: links out of the model directory are never followed",
}


def error_findings(errors: list[ErrorRecord]) -> list[Finding]:
    """One finding per error record the remote tasks reported (as read: each value is checked)."""
    out = []
    links_seen: set[str] = set()
    for err in errors:
        if not isinstance(err, dict):
            continue
        kind = str(err.get("type") or "error")
        probe = err.get("probe") or "probe"
        if probe == "model_code" and kind == "memory-limit":
            continue  # the model-code witness's own finding names it, with the flag to raise it
        if kind == "link-outside":  # every section that met the link reports it: one finding per link
            if str(err.get("path")) in links_seen:
                continue
            links_seen.add(str(err.get("path")))
            probe = "model dir"
        severity = Severity.WARNING if kind in WARNING_ERROR_TYPES else Severity.ERROR
        code = "probe-timeout" if kind in ("timeout", "ProbeTimeout") else f"{probe}-{kind}".lower()
        if kind == "link-outside":
            code = kind
        hint = err.get("hint")
        out.append(Finding(severity, code, f"{probe}: {err.get('message')}",
                           hint if isinstance(hint, str) and hint else ERROR_FIXES.get(kind)))
    return out


def missing_module_findings(env: Environment, target: TargetSection, already: set[str]) -> list[Finding]:
    """A finding per module the model's own code imports and the target lacks (unless already said)."""
    out = []
    for name in env.missing_modules:
        source = env.custom_code_modules.get(name)
        dist = (source.distribution if source is not None else None) or name
        if dist.lower() in already:
            continue
        out.append(Finding(
            Severity.ERROR, "missing-package",
            f"the model's own code imports {name!r}, but package {dist!r} is not installed in "
            f"{target.get('venv') or target.get('python') or 'the target Python'}",
            pip_fix(target, dist)))
    return out
