"""``introspect.gpus/v1`` (cli/cmd_gpus.py ``as_json``): GPU facts of hosts without a model."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from introspect.documents.base import Document, ErrorMember, Record


class HostError(Record):
    """Why a host gave no facts (errors.py ``IntrospectError.as_dict``; the exit code where the
    command reports it per host)."""

    type: str
    message: str
    hint: str | None
    host: str | None
    stage: str | None
    exit_code: int | None = None


class HostGpus(Record):
    host: str
    python: str | None
    ok: bool
    error: HostError | None
    gpus: dict[str, Any] | None  # the remote side's nvidia-smi facts (remote/facts/host/gpus.py), as read


class GpusDocument(Document):
    SCHEMA: ClassVar[str] = "introspect.gpus/v1"
    schema_: Literal["introspect.gpus/v1"] = Field(alias="schema")
    hosts: list[HostGpus]
    error: ErrorMember | None = None
