"""``introspect.models/v1`` (cli/cmd_models.py ``as_json``) and ``introspect.fleet-profiles/v1``
(cli/cmd_probe.py): documents about many hosts."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from introspect.documents.base import Document, ErrorMember, Record
from introspect.documents.gpus import HostError


class HostModels(Record):
    host: str
    python: str | None
    ok: bool
    error: HostError | None
    models: list[dict[str, Any]]  # model directories as the remote discovery read them
    warnings: list[Any]
    roots: list[Any]
    hf_cache: dict[str, Any] | None
    truncated: bool


class ModelsDocument(Document):
    SCHEMA: ClassVar[str] = "introspect.models/v1"
    schema_: Literal["introspect.models/v1"] = Field(alias="schema")
    hosts: list[HostModels]
    listing: dict[str, Any]  # sort, reverse, filters, limit, shown, total (cli/listing.py Controls)
    error: ErrorMember | None = None


class FleetProfilesDocument(Document):
    SCHEMA: ClassVar[str] = "introspect.fleet-profiles/v1"
    schema_: Literal["introspect.fleet-profiles/v1"] = Field(alias="schema")
    model: str
    hosts: list[dict[str, Any]]  # per host: its exit code and its profile or error (client/fleet probes)
    fleet: dict[str, Any]  # parallelism and the connection monitor's counters
    error: ErrorMember | None = None
