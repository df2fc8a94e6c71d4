"""``introspect.preflight/v1`` (client/preflight.py ``build_report``) and
``introspect.fleet-preflight/v1`` (cli/cmd_preflight.py): the gate of a data-generation job."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from introspect.documents.base import Document, ErrorMember, Number, Record
from introspect.documents.gpus import HostError
from introspect.documents.profile import Settings


class PreflightCheck(Record):
    """One gate check (client/preflight.py ``Check`` and its title); ``evidence`` per check."""

    name: str
    status: str
    evidence: dict[str, Any]
    fix: str | None
    message: str
    title: str


class PreflightDocument(Document):
    SCHEMA: ClassVar[str] = "introspect.preflight/v1"
    schema_: Literal["introspect.preflight/v1"] = Field(alias="schema")
    ready: bool
    target: dict[str, Any]  # the raw target block: scheme, host, port, user, python, venv, model_path
    checks: list[PreflightCheck]
    errors: list[dict[str, Any]]  # the remote side's error records
    timings: dict[str, Number | None]
    settings: Settings | None = None
    error: ErrorMember | None = None


class FleetPreflightHost(Record):
    host: str
    exit_code: int
    ready: bool
    report: PreflightDocument | None
    error: HostError | None


class FleetPreflightDocument(Document):
    SCHEMA: ClassVar[str] = "introspect.fleet-preflight/v1"
    schema_: Literal["introspect.fleet-preflight/v1"] = Field(alias="schema")
    model: str
    hosts: list[FleetPreflightHost]
    ready: int
    total: int
    error: ErrorMember | None = None
