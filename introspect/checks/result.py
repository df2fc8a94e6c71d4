"""The result of one named health check, shared by the checks and the history."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["pass", "fail", "warn", "info"]


@dataclass(frozen=True)
class CheckResult:
    check: str
    status: Status
    message: str
    fix: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def failed(self) -> bool:
        return self.status == "fail"


def exit_code(results: Iterable[CheckResult]) -> int:
    """0 all healthy, 1 at least one check failed (2 is for inventory errors)."""
    return 1 if any(r.status == "fail" for r in results) else 0
