"""``introspect.health/v1`` (cli/cmd_health.py ``_run_document``) and ``introspect.history/v1``
(cli/cmd_history.py): venv checks of a fleet, and the runs recorded of them."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from introspect.documents.base import Document, ErrorMember, Number, Record

Status = Literal["pass", "fail", "warn", "info"]


class CheckResult(Record):
    """One check (client/health.py ``result_dict``); ``evidence`` is what that check measured,
    its keys per check (versions, bytes free, the loaded tokenizer's facts, ...)."""

    check: str
    status: Status
    message: str
    fix: str | None
    evidence: dict[str, Any]


class VenvReport(Record):
    path: str
    checks: list[CheckResult]
    drift: list[CheckResult]


class HostReport(Record):
    name: str
    address: str | None
    reachable: bool | None  # null: not checked (the run stopped first)
    seconds: Number
    connections: int
    checks: list[CheckResult]
    venvs: list[VenvReport]


class Counts(Record):
    hosts: int
    unreachable: int
    pass_: int = Field(alias="pass")
    fail: int
    warn: int
    info: int


class HealthDocument(Document):
    SCHEMA: ClassVar[str] = "introspect.health/v1"
    schema_: Literal["introspect.health/v1"] = Field(alias="schema")
    run_id: int | None
    started_at: Number
    finished_at: Number
    seconds: Number
    exit_code: int
    fleet: dict[str, Any]  # parallelism and the connection monitor's counters (client/fleet_monitor)
    summary: Counts
    hosts: list[HostReport]
    history: dict[str, Any]  # where the run was stored, or why it was not
    error: ErrorMember | None = None


class Problem(Record):
    host: str
    venv: str | None
    check: str
    status: Status
    message: str


class RunSummary(Record):
    id: int
    started_at: Number
    finished_at: Number | None
    argv: list[str]
    hosts: int
    pass_: int = Field(alias="pass")
    fail: int
    warn: int
    info: int
    problems: list[Problem]


class RunResult(Record):
    """A stored check result of ``history --run N``: the host and venv, then the check."""

    host: str
    venv: str | None
    check: str
    status: Status
    message: str
    fix: str | None
    evidence: dict[str, Any]


class HistoryDocument(Document):
    SCHEMA: ClassVar[str] = "introspect.history/v1"
    schema_: Literal["introspect.history/v1"] = Field(alias="schema")
    db: str
    runs: list[RunSummary]
    results: list[RunResult] | None = None  # only with --run N
    error: ErrorMember | None = None
