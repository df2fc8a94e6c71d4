"""The base classes of every typed document: closed records, JSON text the CLI prints, schema names.

A key present in a document is a field that was set; a key absent is a field left unset
(``exclude_unset``), so a model read from a document writes the same keys back, in the
order of the fields (today's key order), with the same values: ``to_json()`` is
byte-for-byte what the CLI prints. Numbers that may be integral are ``int | float`` (never
bare ``float``: pydantic would turn ``1`` into ``1.0`` and change the text).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

Number = int | float  # a JSON number: an int stays an int, a float a float


class Record(BaseModel):
    """A closed JSON object: every key is a field, an unknown key is an error (``extra="forbid"``).

    ``strict``: no coercion (``"1"`` is not an int, ``True`` is not an int), so validating a
    document never changes a value."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: set fields only, by their JSON names, in field order."""
        return self.model_dump(by_alias=True, exclude_unset=True)

    def to_json(self, indent: int | None = 2) -> str:
        """The text the CLI prints (``json.dumps(..., indent=2)``), without the final newline."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)


class TokenId(Record):
    """A token and its id (``{"token": "<s>", "id": 1}``)."""

    token: str | None
    id: int | None


class ErrorMember(Record):
    """The ``error`` member: of an ``introspect.error/v1`` document, or of a command's own
    document when the command failed after computing it (introspect/cli/jsonout.py)."""

    code: str
    message: str
    fix: str | None
    exit_code: int
    host: str | None


class Document(Record):
    """A top-level document: ``schema`` first, then ``introspect_version`` where the CLI stamps it
    (``jsonout.stamped``; absent in documents built by the library and in the golden files)."""

    SCHEMA: ClassVar[str]  # e.g. "introspect.profile/v1"
    schema_: str = Field(alias="schema")
    introspect_version: str | None = None

    @classmethod
    def schema_name(cls) -> str:
        """``introspect.profile/v1`` -> ``profile``."""
        return cls.SCHEMA.split(".", 1)[1].split("/", 1)[0]

    @classmethod
    def schema_version(cls) -> str:
        return cls.SCHEMA.rsplit("/", 1)[1]
