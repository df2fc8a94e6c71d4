"""The small documents: ``introspect.env/v1`` (cli/cmd_env.py), ``introspect.cache/v1``
(cli/cmd_cache.py) and ``introspect.error/v1`` (cli/jsonout.py)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from introspect.documents.base import Document, ErrorMember, Record


class Installed(Record):
    version: str
    location: str


class PythonFacts(Record):
    version: str
    implementation: str
    executable: str


class PlatformFacts(Record):
    system: str
    release: str
    machine: str
    platform: str


class PathFact(Record):
    path: str
    exists: bool


class EnvDocument(Document):
    """What a bug report needs: versions, platform, paths, settings; secrets shown as ``<set>``."""

    SCHEMA: ClassVar[str] = "introspect.env/v1"
    schema_: Literal["introspect.env/v1"] = Field(alias="schema")
    introspect: Installed
    python: PythonFacts
    platform: PlatformFacts
    packages: dict[str, str | None]  # distribution -> version (null: not installed)
    paths: dict[str, PathFact]
    settings: dict[str, dict[str, Any]]  # setting -> {value, source, where} (or its error)
    environment: dict[str, str]  # relevant variable -> value or "<set>"
    error: ErrorMember | None = None


class CacheDocument(Document):
    """``cache info --json`` (printed without ``introspect_version``)."""

    SCHEMA: ClassVar[str] = "introspect.cache/v1"
    schema_: Literal["introspect.cache/v1"] = Field(alias="schema")
    path: str
    entries: int
    bytes: int
    max_bytes: int
    partial_files: int


class ErrorDocument(Document):
    """A command that failed before it could print its own document."""

    SCHEMA: ClassVar[str] = "introspect.error/v1"
    schema_: Literal["introspect.error/v1"] = Field(alias="schema")
    error: ErrorMember
