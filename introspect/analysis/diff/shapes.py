"""The shapes of ``introspect.diff/v1`` as the diff builds them (pure): a change, a group, the result.

The document model (introspect/documents/compare.py ``DiffDocument``) keeps each group an open
object; these TypedDicts are the keys :mod:`introspect.analysis.diff.document` writes.
"""

from __future__ import annotations

from typing import Any, TypedDict


class Change(TypedDict):
    """One key path whose values differ; ``a`` / ``b``: the two profiles' values (any JSON value)."""

    key: str
    a: Any
    b: Any


class TemplateDiff(TypedDict):
    """The two chat templates as a unified diff (the tokenizer group's ``template_diff``)."""

    source_a: str | None
    source_b: str | None
    sha256_a: str | None
    sha256_b: str | None
    lines: list[str]
    truncated: bool
    text_available: bool


class _GroupKeys(TypedDict):
    identical: bool
    changes: list[Change]
    notes: list[str]


class DiffGroup(_GroupKeys, total=False):
    template_diff: TemplateDiff | None  # the tokenizer group only


class Labels(TypedDict):
    a: str
    b: str


class DiffResult(TypedDict):
    """The ``introspect.diff/v1`` document without its stamp."""

    identical: bool
    labels: Labels
    groups: dict[str, DiffGroup]
