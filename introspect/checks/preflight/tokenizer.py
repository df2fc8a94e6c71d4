"""The ``tokenizer`` check: the tokenizer loads, agrees with its files, and decodes every id."""

from __future__ import annotations

import shlex
from typing import Any, TypedDict

from introspect.analysis.list_caps import list_totals
from introspect.analysis.tokenizer.added_tokens import AddedTokensVerdict, judge_added_tokens
from introspect.analysis.tokenizer.autotokenizer_verdict import stand_in_fix
from introspect.analysis.tokenizer.shapes import shaped
from introspect.checks.preflight.common import (
    SHOWN,
    Check,
    comment,
    fix_lines,
    no_evidence,
    quote,
    section,
    stand_in,
)
from introspect.remote.contract import AddedTokensCheck as RawCheck
from introspect.remote.contract import DecodeSweep, PreflightReply, PreflightTokenizer, as_dict, as_list


def check_tokenizer(evidence: PreflightReply, pip: str) -> Check:
    tok, err = section(evidence.get("tokenizer"))
    if tok is None:
        return no_evidence("tokenizer", evidence, "the tokenizer load", err)
    if not tok.get("loaded"):
        return _load_failure(tok, pip, as_dict(evidence.get("model")).get("path"))
    base = {k: tok.get(k) for k in ("class", "is_fast", "len", "vocab_size", "transformers_version",
                                    "load_seconds", "trust_remote_code")}
    reason = stand_in(evidence)
    if reason is not None:  # it "loads", but would tokenize every text to nothing or unk: fails as in health
        model = as_dict(evidence.get("model")).get("path")
        return Check("tokenizer", "fail", dict(base, stand_in=True, stand_in_reason=reason),
                     stand_in_fix(model, "run preflight again"),
                     f"AutoTokenizer built a stand-in {tok.get('class')}, not the model's tokenizer: {reason}")
    added = shaped(tok.get("added_tokens_check"), RawCheck)
    sweep = shaped(tok.get("decode_sweep"), DecodeSweep)
    evidence_out = dict(base, added_tokens=_added_summary(added), decode_sweep=_sweep_summary(sweep))
    verdict = judge_added_tokens(added)
    if verdict is not None and verdict.failed:
        return _added_mismatch(tok, verdict, evidence_out)
    if sweep.get("failures"):
        ids = [i.get("id") for i in as_list(sweep.get("items"))]
        return Check("tokenizer", "fail", evidence_out,
                     comment("do not generate data with this tokenizer: decode() raises for ids the model can "
                             f"emit ({quote(ids)}); fix the tokenizer code or its vocabulary files"),
                     f"decode([id]) raises for {sweep['failures']} of {sweep.get('total')} ids")
    where = f"{tok.get('class')} (transformers {tok.get('transformers_version')})"
    foreign = _foreign_class(tok)
    if foreign is not None:
        return Check("tokenizer", "warn", dict(evidence_out, declared_classes=tok.get("declared_classes")),
                     foreign[1], foreign[0])
    agree = (f"{added['checked']} added tokens agree both ways with {', '.join(as_list(added.get('sources')))}"
             if added else "no added tokens listed in the files")
    if sweep and not sweep.get("complete"):
        return Check("tokenizer", "warn", evidence_out, comment("raise --timeout to sweep every id"),
                     f"{where} loaded; {agree}; decode([id]) checked for only {sweep.get('checked')} "
                     f"of {sweep.get('total')} ids within the time budget")
    return Check("tokenizer", "pass", evidence_out, None,
                 f"{where} loaded; {agree}; decode([id]) works for all {sweep.get('total', '?')} ids")


def _foreign_class(tok: PreflightTokenizer) -> tuple[str, str] | None:
    """(message, fix) when the loaded class is not the model's own (auto_map) class."""
    declared = [c for c in as_list(tok.get("declared_classes")) if isinstance(c, str)]
    if not declared or tok.get("class") in declared:
        return None
    message = (f"loaded {tok.get('class')}, not the model's own {' / '.join(declared)} (auto_map): transformers "
               "built a substitute (an automatic conversion) that a server running the model's code may not match")
    if tok.get("trust_remote_code") is False:
        return message, comment("drop --no-remote-code, so the data is tokenized by the model's own tokenizer class")
    return message, comment("load with trust_remote_code=True from the model dir, so the auto_map class is used")


class Shown(TypedDict):
    """The first SHOWN items of a remote list as evidence, with the true count."""

    items: list[Any]  # the remote records, as reported
    items_total: int
    items_truncated: bool


class AddedSummary(Shown):
    """The added-tokens check (remote/facts/tokenizer/added_tokens.py) in the check's evidence."""

    sources: object
    checked: object
    mismatches: object


def _added_summary(added: RawCheck) -> AddedSummary | None:
    if not added:
        return None
    shown = _shown(added)
    return {"sources": added.get("sources"), "checked": added.get("checked"), "mismatches": added.get("mismatches"),
            "items": shown["items"], "items_total": shown["items_total"], "items_truncated": shown["items_truncated"]}


class SweepSummary(TypedDict):
    """The decode sweep (remote/facts/tokenizer/decode_sweep.py) in the check's evidence, keys in this order."""

    total: object
    checked: object
    complete: object
    failures: object
    seconds: object
    items: list[Any]  # the remote records, as reported
    items_total: int
    items_truncated: bool


def _sweep_summary(sweep: DecodeSweep) -> SweepSummary | None:
    if not sweep:
        return None
    shown = _shown(sweep)
    return {"total": sweep.get("total"), "checked": sweep.get("checked"), "complete": sweep.get("complete"),
            "failures": sweep.get("failures"), "seconds": sweep.get("seconds"), "items": shown["items"],
            "items_total": shown["items_total"], "items_truncated": shown["items_truncated"]}


def _shown(facts: RawCheck | DecodeSweep) -> Shown:
    """The first SHOWN items as evidence, with the true count (the remote one, else the list's)."""
    items = as_list(facts.get("items"))
    total = list_totals(facts, "items")["items_total"]
    return {"items": items[:SHOWN], "items_total": total, "items_truncated": total > min(len(items), SHOWN)}


def _load_failure(tok: PreflightTokenizer, pip: str, model: Any = None) -> Check:
    error = as_dict(tok.get("error"))
    cause = error.get("cause")
    missing = [str(p) for p in as_list(error.get("missing_packages"))]
    evidence = {"error": {k: error.get(k) for k in ("type", "message", "cause", "missing_packages")},
                "trust_remote_code": tok.get("trust_remote_code"),
                "transformers_version": tok.get("transformers_version")}
    fix: str | None
    if missing:
        fix = f"{pip} install " + " ".join(shlex.quote(p) for p in missing)
    elif cause == "remote-code-refused":
        fix = comment("drop --no-remote-code: this tokenizer is the model's own code, and the data must be built "
                      "with it")
    elif cause == "incompatible-code":
        major = str(tok.get("transformers_version") or "").split(".")[0]
        why = "the model's tokenizer code does not fit this transformers"
        fix = (fix_lines(f"{pip} install {shlex.quote(f'transformers<{major}')}  # {why}",
                         comment("or update the tokenizer code from the model's repository"))
               if major.isdigit() else
               comment(f"{why}: update the code from the model's repository, or install the transformers "
                       "release it was written for"))
    elif cause == "link-outside":  # the message names each link; its target is never read
        fix = (f"ls -l {shlex.quote(str(model or '.'))}  # replace each link named with the model's own file: "
               "links out of the model directory are never followed")
    elif cause == "missing-files":
        fix = (f"ls -l {shlex.quote(str(model or '.'))}  # the model dir lacks tokenizer files: copy "
               "tokenizer_config.json and the vocabulary files next to config.json")
    else:
        fix = comment("fix the load error shown (run `introspect probe` on the same venv for the full traceback)")
    return Check("tokenizer", "fail", evidence, fix,
                 f"AutoTokenizer.from_pretrained fails: {error.get('type')}: {error.get('message')}")


def _added_mismatch(tok: PreflightTokenizer, verdict: AddedTokensVerdict, evidence: dict[str, Any]) -> Check:
    items = verdict.disagree
    first = as_dict(items[0]) if items else {}
    detail = (f"id {first.get('id')} is {first.get('expected')!r} in {first.get('source')} but the loaded "
              f"tokenizer gives decode([{first.get('id')}])={first.get('decoded')!r}, "
              f"convert_ids_to_tokens={first.get('id_to_token')!r}, "
              f"convert_tokens_to_ids={first.get('token_to_id')!r}, encode={first.get('encoded')!r}")
    ids = quote(i.get("id") for i in items)
    if tok.get("is_fast"):
        fix = comment("load the slow tokenizer class (AutoTokenizer.from_pretrained(path, trust_remote_code=True, "
                      "use_fast=False)): the automatic fast conversion shifted special-token ids; regenerate "
                      "tokenizer.json only from a tokenizer that passes this check")
    else:
        fix = comment(f"the tokenizer code and tokenizer_config.json's added_tokens_decoder disagree on ids {ids}: "
                      "restore the files of the model's repository (or correct those entries) until "
                      "decode([id]) and encode(token) agree with them; do not generate data before")
    return Check("tokenizer", "fail", evidence, fix,
                 f"{verdict.mismatches} of {verdict.checked} added tokens disagree with the files: {detail}")
