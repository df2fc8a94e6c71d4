"""``introspect.profile/v1``: one model's profile (introspect/analysis/result.py ``Profile.to_json``)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field

from introspect.documents.base import Document, ErrorMember, Number, Record
from introspect.documents.profile_architecture import Architecture
from introspect.documents.profile_files import Environment, Files, Target
from introspect.documents.profile_serving import Engines, Gpus, Plan
from introspect.documents.profile_tokenizer import Tokenizer

PROFILE = "introspect.profile/v1"


class Finding(Record):
    """A finding: severity, a stable code, the message, a paste-able fix; some codes carry
    more keys (``keys``, ``package``, ...: analysis/findings.py ``make(**extra)``), kept as given."""

    model_config = ConfigDict(extra="allow")

    severity: Literal["error", "warning", "info"]
    code: str
    message: str
    fix: str | None


class CacheHit(Record):
    """Whether this profile came from the local result cache (client/cache.py)."""

    hit: bool
    digest: str | None = None


class Chosen(Record):
    """A setting's value and who chose it (userconfig.py ``Chosen.as_dict``)."""

    value: Any
    source: str
    where: str


class InventoryChoice(Record):
    path: str | None
    source: str
    where: str


class Settings(Record):
    """Which inventory and remote-code policy a live run used (userconfig.py ``settings_block``)."""

    inventory: InventoryChoice | None
    remote_code: Chosen


class ProfileDocument(Document):
    """A model's profile: where it was taken, each section, the findings, the timings."""

    SCHEMA: ClassVar[str] = PROFILE
    # ``schema_`` in Python (a type checker reads ``alias`` as the constructor's keyword), ``schema`` in JSON.
    schema_: Literal["introspect.profile/v1"] = Field(validation_alias="schema", serialization_alias="schema")
    target: Target
    environment: Environment
    architecture: Architecture
    tokenizer: Tokenizer
    files: Files
    engines: Engines
    gpus: Gpus
    plan: Plan
    findings: list[Finding]
    timings: dict[str, Number | None]  # step -> seconds
    cache: CacheHit | None
    settings: Settings | None = None
    error: ErrorMember | None = None
