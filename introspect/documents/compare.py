"""``introspect.compare/v1`` (analysis/diff/compare.py ``compare_rows``) and ``introspect.diff/v1``
(analysis/diff/document.py): which hosts or profiles differ."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from introspect.documents.base import Document, ErrorMember, Record


class CompareCounts(Record):
    rows: int
    compared: int
    errors: int


class Column(Record):
    """One fact across the rows: the majority value and the rows that differ from it."""

    key: str
    title: str
    kind: str
    judged: bool
    majority: Any
    majority_rows: int
    distinct: int
    known_rows: int
    differs: bool
    odd: list[str]


class Row(Record):
    label: str
    source: str
    file: str | None
    host: str | None
    model_path: str | None
    exit_code: int | None
    error: dict[str, Any] | None  # why the row has no profile: type, message, hint, host, stage
    facts: dict[str, Any]  # fact key -> its cell (value, shown text, why unknown)
    odd: list[str]


class CompareDocument(Document):
    SCHEMA: ClassVar[str] = "introspect.compare/v1"
    schema_: Literal["introspect.compare/v1"] = Field(alias="schema")
    differs: bool
    differing: list[str]
    counts: CompareCounts
    min_free_bytes: int | None
    columns: list[Column]
    rows: list[Row]
    model: str | None = None
    error: ErrorMember | None = None


class Labels(Record):
    a: str
    b: str


class DiffDocument(Document):
    SCHEMA: ClassVar[str] = "introspect.diff/v1"
    schema_: Literal["introspect.diff/v1"] = Field(alias="schema")
    identical: bool
    labels: Labels
    groups: dict[str, dict[str, Any]]  # section -> {identical, changes, ...} (analysis/diff/document.py)
    error: ErrorMember | None = None
