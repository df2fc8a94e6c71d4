"""The finding record and the fixes that name exact commands."""

from __future__ import annotations

import posixpath
import shlex
from typing import Any


def finding(severity: str, code: str, message: str, fix: str | None = None,
            **extra: Any) -> dict[str, Any]:
    """One finding: ``{severity: error|warning|info, code, message, fix}``."""
    out: dict[str, Any] = {"severity": severity, "code": code, "message": message, "fix": fix}
    out.update(extra)
    return out


def pip_fix(target: dict[str, Any], package: str) -> str:
    """The exact install command for the target's interpreter."""
    venv = target.get("venv")
    if venv:
        return f"{shlex.quote(posixpath.join(venv, 'bin', 'pip'))} install {shlex.quote(package)}"
    python = target.get("python") or "python3"
    return f"{shlex.quote(python)} -m pip install {shlex.quote(package)}"
