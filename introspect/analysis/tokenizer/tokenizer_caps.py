"""The tokenizer section's capped lists, said out loud (pure, no I/O).

Every list the remote side cuts keeps its key, with ``<key>_total`` (its true length)
and ``<key>_truncated`` beside it, in the raw facts and in the profile alike
(docs/raw-facts.md, "Capped lists"). Here the section gets them:

* ``special_tokens``: from whichever side the list came from (the probe, whose native
  path cuts at 5,000, or the files, whose sentencepiece reader ships 4,096 pieces);
* ``added_tokens_check``: ``checked_total`` (ids the files name: the load checks the
  first 5,000) and ``items_total`` (the disagreeing items, as counted on the host).

A cut check is also said as an info finding: a mismatch past the cut is not looked for.
"""

from __future__ import annotations

from introspect.analysis.findings import Finding, make
from introspect.analysis.list_caps import count, list_totals
from introspect.analysis.result import TargetSection
from introspect.analysis.tokenizer.added_tokens import AddedTokensVerdict, judge_added_tokens
from introspect.analysis.tokenizer.shapes import FileFacts
from introspect.analysis.tokenizer.tokenizer_limits import preflight_command
from introspect.documents.base import TokenId
from introspect.documents.profile_tokenizer import AddedTokensCheck, Tokenizer
from introspect.remote.contract import AddedTokensCheck as RawCheck
from introspect.remote.contract import TokenizerProbe


def special_totals(shown: list[TokenId], origin: TokenizerProbe | FileFacts) -> tuple[int, bool]:
    """(special_tokens_total, special_tokens_truncated) of the section's list, as the side it came
    from reported them (the probe, whose native path cuts at 5,000, or the files, whose
    sentencepiece reader ships 4,096 pieces)."""
    totals = list_totals({"special_tokens": shown, "special_tokens_total": origin.get("special_tokens_total"),
                          "special_tokens_truncated": origin.get("special_tokens_truncated")}, "special_tokens")
    return totals["special_tokens_total"], totals["special_tokens_truncated"]


def check_totals(verdict: AddedTokensVerdict, probe: TokenizerProbe) -> AddedTokensCheck | None:
    """The ``added_tokens_check`` block: the verdict with the totals the host counted beside its lists;
    None for a damaged record without its counts (:func:`damaged_check` says so)."""
    raw = probe.get("added_tokens_check") or RawCheck()
    checked, mismatches, items = verdict.checked, verdict.mismatches, verdict.disagree
    if checked is None or mismatches is None:
        return None
    named = count(raw.get("checked_total"))
    named = checked if named is None or named < checked else named
    bad = count(mismatches)
    bad = len(items) if bad is None or bad < len(items) else bad
    return AddedTokensCheck(
        checked=checked, checked_total=named, checked_truncated=raw.get("checked_truncated") is True or named > checked,
        mismatches=mismatches, items=[dict(item) for item in items], items_total=bad, items_truncated=bad > len(items),
    )


def cap_findings(section: Tokenizer, target: TargetSection) -> list[Finding]:
    """An info finding when the added-tokens check covered only the first ids the files name."""
    check = section.added_tokens_check
    if check is None or check.checked_truncated is not True:
        return []
    checked, named = check.checked, check.checked_total
    return [make(
        "info", "added-tokens-check-partial",
        f"the added-tokens check of the loaded tokenizer covered the first {checked} of the {named} ids "
        f"added_tokens_decoder names (the probe's cap); ids past {checked} were not compared",
        preflight_command(target) + "  # preflight checks every id, encoded and decoded both ways",
        checked=checked, checked_total=named,
    )]


def damaged_check(probe: TokenizerProbe | None) -> list[Finding]:
    """The error for an added-tokens check that came back without its counts (a damaged raw file):
    the section shows no check rather than a verdict without numbers."""
    verdict = judge_added_tokens(probe.get("added_tokens_check")) if probe is not None else None
    if verdict is None or (verdict.checked is not None and verdict.mismatches is not None):
        return []
    return [make("error", "raw-damaged",
                 "raw facts: tokenizer_probe.added_tokens_check has no count of the ids checked or of the "
                 "mismatches; ignored", "re-run `introspect probe --save-raw` to get undamaged raw facts")]
