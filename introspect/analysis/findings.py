"""The finding record (typed), its JSON form, and the fixes that name exact commands."""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from introspect.documents.profile import Finding as FindingRecord


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
    (``package`` of a missing package, ``ids`` of mismatched tokens), in order: JSON values.
    """

    severity: Severity
    code: str
    message: str
    fix: str | None = None
    extra: dict[str, object] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        """The finding's JSON object: the four keys, then the extra ones."""
        out: dict[str, object] = {"severity": self.severity.value, "code": self.code, "message": self.message,
                                  "fix": self.fix}
        out.update(self.extra)
        return out

    def record(self) -> FindingRecord:
        """The finding as the profile document holds it (extra keys kept, in order)."""
        return FindingRecord.model_validate(self.to_json())

    @property
    def key(self) -> tuple[str, str, str]:
        """What makes two findings the same one (the profile keeps the first)."""
        return self.severity.value, self.code, self.message


def make(severity: str | Severity, code: str, message: str, fix: str | None = None, **extra: object) -> Finding:
    """A typed finding; ``severity`` may be spelled as in the JSON."""
    return Finding(Severity(severity), code, message, fix, dict(extra))


def finding(severity: str, code: str, message: str, fix: str | None = None,
            **extra: object) -> dict[str, object]:
    """One finding in its JSON form: ``{severity: error|warning|info, code, message, fix}``."""
    return make(severity, code, message, fix, **extra).to_json()


def pip_fix(target: Mapping[str, object], package: str) -> str:
    """The exact install command for the target's interpreter (``target``: the profile's target
    section, or the raw facts' target block as read)."""
    venv = target.get("venv")
    if isinstance(venv, str) and venv:
        return f"{shlex.quote(posixpath.join(venv, 'bin', 'pip'))} install {shlex.quote(package)}"
    python = target.get("python")
    python = python if isinstance(python, str) and python else "python3"
    return f"{shlex.quote(python)} -m pip install {shlex.quote(package)}"
