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

from typing import Any

from introspect.analysis.findings import Finding, make
from introspect.analysis.list_caps import count, list_totals
from introspect.analysis.tokenizer.tokenizer_limits import preflight_command
from introspect.remote.contract import as_dict

NAMED = ("bos", "eos", "pad", "unk", "mask")


def with_totals(section: dict[str, Any], probe: dict[str, Any] | None, from_files: dict[str, Any]) -> dict[str, Any]:
    """The section with the totals beside their lists (a new dict, key order kept).

    A fact the probe did not report at all (a raw file of an older probe) gets no
    source: the loss check (tokenizer_agreement) then reads no "none" into it.
    """
    sources = as_dict(section.get("sources"))
    from_probe = probe is not None and sources.get("special_tokens") not in ("files", None)
    origin = probe if from_probe and probe is not None else from_files
    if probe is not None and section.get("loaded"):
        for fact in (*NAMED, "special_tokens"):
            if fact not in probe and sources.get(fact) not in ("files", None):
                sources[fact] = None
    out: dict[str, Any] = {}
    for key, value in section.items():
        out[key] = value
        if key == "special_tokens":
            out.update(list_totals(dict(origin, special_tokens=value), "special_tokens"))
    check = section.get("added_tokens_check")
    if isinstance(check, dict) and probe is not None:
        out["added_tokens_check"] = _check_totals(check, as_dict(probe.get("added_tokens_check")))
    return out


def _check_totals(check: dict[str, Any], raw: dict[str, Any]) -> dict[str, Any]:
    checked = count(check.get("checked")) or 0
    listed = check.get("items")
    items: list[Any] = listed if isinstance(listed, list) else []
    named = count(raw.get("checked_total"))
    named = checked if named is None or named < checked else named
    bad = count(check.get("mismatches"))
    bad = len(items) if bad is None or bad < len(items) else bad
    return {
        "checked": check.get("checked"), "checked_total": named,
        "checked_truncated": raw.get("checked_truncated") is True or named > checked,
        "mismatches": check.get("mismatches"),
        "items": items, "items_total": bad, "items_truncated": bad > len(items),
        **{k: v for k, v in check.items() if k not in ("checked", "mismatches", "items")},
    }


def cap_findings(section: dict[str, Any], target: dict[str, Any]) -> list[Finding]:
    """An info finding when the added-tokens check covered only the first ids the files name."""
    check = as_dict(section.get("added_tokens_check"))
    if check.get("checked_truncated") is not True:
        return []
    checked, named = check.get("checked"), check.get("checked_total")
    return [make(
        "info", "added-tokens-check-partial",
        f"the added-tokens check of the loaded tokenizer covered the first {checked} of the {named} ids "
        f"added_tokens_decoder names (the probe's cap); ids past {checked} were not compared",
        preflight_command(target) + "  # preflight checks every id, encoded and decoded both ways",
        checked=checked, checked_total=named,
    )]
