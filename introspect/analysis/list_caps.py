"""The one shape of a capped list (pure): the list keeps its key, ``<key>_total`` and ``<key>_truncated`` beside it.

The remote side cuts some lists (docs/raw-facts.md, "Capped lists") and says so with the
same two keys; the profile repeats them. A raw file of an older probe without them gets
the list's own length and ``truncated`` only when the length says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple


class ListTotals(NamedTuple):
    total: int  # the list's true length
    truncated: bool  # whether the list shown was cut


def count(value: object) -> int | None:
    """A non-negative int, else None (a bool is no count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def totals_of(facts: Mapping[str, object], key: str) -> ListTotals:
    """The true length of ``facts[key]`` and whether it was cut: as reported, else the list's own length."""
    items = facts.get(key)
    shown = len(items) if isinstance(items, list) else 0
    total = count(facts.get(key + "_total"))
    total = shown if total is None or total < shown else total
    return ListTotals(total, facts.get(key + "_truncated") is True or total > shown)


def list_totals(facts: Mapping[str, object], key: str) -> dict[str, Any]:
    """``{<key>_total, <key>_truncated}`` of ``facts[key]``, the members a section spreads in beside the list."""
    total, truncated = totals_of(facts, key)
    return {key + "_total": total, key + "_truncated": truncated}
