"""``introspect.raw/v1``: the remote side's facts as they came (``probe --save-raw``), the input
``introspect profile`` rebuilds a profile from (client/model.py, remote/contract.py ``RawFacts``).

Raw facts are JSON read in: the sections keep the remote side's own TypedDicts
(introspect/remote/sections.py, standard library only) and stay JSON objects here. The
document is open (``extra="allow"``): sections a newer remote side adds are kept, in order, after
the known ones.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field

from introspect.documents.base import Document, Number, Record


class RawTarget(Record):
    """The ``target`` block (remote/contract.py ``TargetBlock``); raw facts saved before
    transports had schemes carry no ``scheme``."""

    scheme: str | None = None
    host: str | None
    port: int | None
    user: str | None
    container: str | None = None
    python: str | None
    venv: str | None
    model_path: str | None


class ErrorRecord(Record):
    """One error of a task (remote/contract.py ``ErrorRecord``): ``{probe?, type, message, path?, ...}``."""

    model_config = ConfigDict(extra="allow")

    type: str
    message: str


class Options(Record):
    model_config = ConfigDict(extra="allow")

    remote_code: bool | None = None
    load_tokenizer: bool | None = None


class RawDocument(Document):
    model_config = ConfigDict(extra="allow")

    SCHEMA: ClassVar[str] = "introspect.raw/v1"
    schema_: Literal["introspect.raw/v1"] = Field(alias="schema")
    target: RawTarget
    errors: list[ErrorRecord] = Field(default_factory=list)
    fatal: dict[str, Any] | None = None  # why the probe stopped: type, message, hint, exit_code, host
    tokenizer_probe: dict[str, Any] | None = None
    options: Options | None = None
    python: dict[str, Any] | None = None
    files: dict[str, Any] | None = None
    tokenizer_files: dict[str, Any] | None = None
    safetensors: dict[str, Any] | None = None
    drafters: list[dict[str, Any]] | None = None
    environment: dict[str, Any] | None = None
    hashes: dict[str, Any] | None = None
    fingerprint: dict[str, Any] | None = None
    timings: dict[str, Number | None] = Field(default_factory=dict)
