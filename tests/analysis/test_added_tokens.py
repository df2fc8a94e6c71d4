"""The one judge of a loaded tokenizer against added_tokens_decoder, on both record shapes."""

from __future__ import annotations

from introspect.analysis.tokenizer.added_tokens import judge_added_tokens
from introspect.analysis.tokenizer.section import analyze_tokenizer

GOOD = {"id": 163584, "expected": "[BOS]", "id_to_token": "[BOS]", "token_to_id": 163584, "decoded": "[BOS]",
        "ok": True}
BAD = {"id": 163607, "expected": "</think>", "id_to_token": "<|reserved_token_163607|>", "token_to_id": 163606,
       "decoded": "<|im_end|>", "ok": False}


def test_no_check_ran() -> None:
    assert judge_added_tokens(None) is None
    assert judge_added_tokens({}) is None


def test_tokenizer_task_record_lists_every_id() -> None:
    verdict = judge_added_tokens({"checked": 2, "mismatches": 1, "items": [GOOD, BAD]})
    assert verdict is not None and verdict.failed
    assert (verdict.checked, verdict.mismatches, verdict.disagree) == (2, 1, [BAD])


def test_preflight_record_lists_only_the_disagreeing_ids() -> None:
    record = {"sources": ["tokenizer_config.json"], "checked": 256, "mismatches": 1,
              "items": [dict(BAD, source="tokenizer_config.json")]}
    verdict = judge_added_tokens(record)
    assert verdict is not None and verdict.failed and verdict.sources == ["tokenizer_config.json"]
    assert [i["id"] for i in verdict.disagree] == [163607]


def test_agreeing_tokenizer_passes() -> None:
    verdict = judge_added_tokens({"checked": 1, "mismatches": 0, "items": [GOOD]})
    assert verdict is not None and not verdict.failed and verdict.disagree == []


def test_malformed_counts_are_null_not_trusted() -> None:
    verdict = judge_added_tokens({"checked": "many", "mismatches": True, "items": "x"})
    assert verdict is not None and (verdict.checked, verdict.mismatches, verdict.disagree) == (None, None, [])


def test_tokenizer_section_uses_the_judge() -> None:
    probe = {"loaded": True, "class": "TikTokenTokenizer",
             "added_tokens_check": {"checked": 2, "mismatches": 1, "items": [GOOD, BAD]}}
    section, findings = analyze_tokenizer({}, probe, config=None, target={}, remote_code_allowed=True)
    assert section["added_tokens_check"] == {"checked": 2, "checked_total": 2, "checked_truncated": False,
                                             "mismatches": 1, "items": [BAD], "items_total": 1,
                                             "items_truncated": False}
    [mismatch] = [f for f in findings if f["code"] == "special-token-mismatch"]
    assert mismatch["ids"] == [163607] and "on 1 of 2 ids" in mismatch["message"]
