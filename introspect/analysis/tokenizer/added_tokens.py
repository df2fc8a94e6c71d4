"""The one judge of a loaded tokenizer against the added tokens its files name.

The remote tasks (the isolated tokenizer load and preflight) record, per id that
``added_tokens_decoder`` (and tokenizer.json's ``added_tokens``) name, what the
loaded tokenizer answers both ways and decoded: ``{"checked", "mismatches",
"items": [{"id", "expected", "id_to_token", "token_to_id", "decoded", "ok", ...}],
"sources"?}``. The tokenizer task lists every id, preflight only the disagreeing
ones; this judge reads either the same way. The files are the ground truth.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from introspect.analysis.tokenizer.shapes import shaped
from introspect.remote.contract import AddedTokenItem, AddedTokensCheck, as_list


@dataclass(frozen=True)
class AddedTokensVerdict:
    """What the check found: how many ids were checked, which disagree."""

    checked: int | None
    mismatches: int | None  # as the remote counted them (every id, even past the items it kept)
    disagree: list[AddedTokenItem] = field(default_factory=list)  # the items whose answers differ
    sources: list[str] = field(default_factory=list)  # the files the ids were read from

    @property
    def failed(self) -> bool:
        """True when the loaded tokenizer disagrees with the files on at least one id."""
        return bool(self.mismatches) or bool(self.disagree)


def judge_added_tokens(check: AddedTokensCheck | None) -> AddedTokensVerdict | None:
    """The verdict on one ``added_tokens_check`` record; None when no check ran (no such files)."""
    if not isinstance(check, Mapping) or not check:
        return None
    disagree = [shaped(item, AddedTokenItem) for item in as_list(check.get("items"))
                if isinstance(item, dict) and not item.get("ok")]
    mismatches = check.get("mismatches")
    checked = check.get("checked")
    return AddedTokensVerdict(
        checked=checked if isinstance(checked, int) and not isinstance(checked, bool) else None,
        mismatches=mismatches if isinstance(mismatches, int) and not isinstance(mismatches, bool) else None,
        disagree=disagree,
        sources=[s for s in as_list(check.get("sources")) if isinstance(s, str)],
    )
