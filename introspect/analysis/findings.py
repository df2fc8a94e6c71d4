"""The finding record (typed), its JSON form, and the fixes that name exact commands."""

from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class Severity(str, Enum):
    """How bad a finding is; the JSON spells the value."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """Sort order of the profile's findings: errors first."""
        return _RANK[self]


_RANK = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


@dataclass(frozen=True)
class Finding:
    """One finding: ``{severity, code, message, fix, **extra}`` in JSON.

    ``extra`` keeps the machine-readable details some findings carry
    (``package`` of a missing package, ``ids`` of mismatched tokens), in order.
    """

    severity: Severity
    code: str
    message: str
    fix: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"severity": self.severity.value, "code": self.code, "message": self.message,
                               "fix": self.fix}
        out.update(self.extra)
        return out

    @property
    def key(self) -> tuple[str, str, str]:
        """What makes two findings the same one (the profile keeps the first)."""
        return self.severity.value, self.code, self.message


def make(severity: str | Severity, code: str, message: str, fix: str | None = None, **extra: Any) -> Finding:
    """A typed finding; ``severity`` may be spelled as in the JSON."""
    return Finding(Severity(severity), code, message, fix, dict(extra))


def finding(severity: str, code: str, message: str, fix: str | None = None,
            **extra: Any) -> dict[str, Any]:
    """One finding in its JSON form: ``{severity: error|warning|info, code, message, fix}``."""
    return make(severity, code, message, fix, **extra).to_json()


def pip_fix(target: dict[str, Any], package: str) -> str:
    """The exact install command for the target's interpreter."""
    venv = target.get("venv")
    if venv:
        return f"{shlex.quote(posixpath.join(venv, 'bin', 'pip'))} install {shlex.quote(package)}"
    python = target.get("python") or "python3"
    return f"{shlex.quote(python)} -m pip install {shlex.quote(package)}"
