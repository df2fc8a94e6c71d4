"""Shape of the added-tokens check (facts.added_tokens), as the tokenizer and preflight tasks emit it.

Re-exported by :mod:`introspect.remote.sections` and :mod:`introspect.remote.contract`;
import it from there. Standard library only, Python 3.8.
"""

from __future__ import annotations

from typing import Any, List, TypedDict


class AddedTokenItem(TypedDict, total=False):
    """One id the files name, checked against the loaded tokenizer."""

    id: int
    expected: str
    id_to_token: Any  # the value, or {"error": "Type: message"}
    token_to_id: Any
    decoded: Any
    encoded: Any  # preflight only: encode(token) must be [id]
    ok: bool
    source: str  # preflight only: the file that names the token


class AddedTokensCheck(TypedDict, total=False):
    sources: List[str]  # preflight only
    checked: int
    mismatches: int
    checked_total: int  # ids the files name; checked: the first of them (tasks.tokenizer MAX_CHECKED_IDS)
    checked_truncated: bool
    items: List[AddedTokenItem]
    items_total: int  # items of the uncut list over the checked ids (preflight keeps the first MAX_ITEMS)
    items_truncated: bool
