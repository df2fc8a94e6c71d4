"""The one shape of a capped list (pure): the list keeps its key, ``<key>_total`` and ``<key>_truncated`` beside it.

The remote side cuts some lists (docs/raw-facts.md, "Capped lists") and says so with the
same two keys; the profile repeats them. A raw file of an older probe without them gets
the list's own length and ``truncated`` only when the length says so.
"""

from __future__ import annotations

from typing import Any


def count(value: Any) -> int | None:
    """A non-negative int, else None (a bool is no count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def list_totals(facts: dict[str, Any], key: str) -> dict[str, Any]:
    """``{<key>_total, <key>_truncated}`` of ``facts[key]``: as reported, else the list's own length."""
    items = facts.get(key)
    shown = len(items) if isinstance(items, list) else 0
    total = count(facts.get(key + "_total"))
    total = shown if total is None or total < shown else total
    return {key + "_total": total, key + "_truncated": facts.get(key + "_truncated") is True or total > shown}
