"""The ``loss-masks`` check: how assistant-only loss masks can be built with this template."""

from __future__ import annotations

from typing import Any, TypedDict

from introspect.analysis.tokenizer.shapes import shaped
from introspect.checks.preflight.common import (
    Check,
    TextDiff,
    around,
    comment,
    loaded_tokenizer,
    needs_tokenizer,
    no_evidence,
    section,
)
from introspect.remote.contract import AssistantMask, MasksFacts, PreflightReply, as_dict, as_list


def check_loss_masks(evidence: PreflightReply) -> Check:
    if loaded_tokenizer(evidence) is None:
        return needs_tokenizer("loss-masks", evidence)
    masks, err = section(evidence.get("masks"))
    if masks is None:
        template = as_dict(evidence.get("template"))
        if template and not template.get("present"):
            return Check("loss-masks", "fail", {}, comment("add the model's chat template first"),
                         "no chat template: assistant turns cannot be located")
        if template.get("runaway"):  # the chat-template check names the limit and the fix
            return Check("loss-masks", "skipped", {"template_runaway": True}, None,
                         "not checked: the chat template does not finish rendering")
        return no_evidence("loss-masks", evidence, "the loss masks", err)
    direct = shaped(masks.get("assistant_tokens_mask"), AssistantMask)
    prefix = {name: _prefix_summary(value) for name, value in as_dict(masks.get("prefix")).items()}
    out = {"generation_markers": masks.get("generation_markers"), "assistant_tokens_mask": direct,
           "prefix": prefix}
    if direct.get("ok"):
        return Check("loss-masks", "pass", dict(out, method="assistant_tokens_mask"), None,
                     "method: apply_chat_template(return_assistant_tokens_mask=True) ({% generation %} markers): "
                     f"{direct.get('masked_tokens')} of {direct.get('tokens')} tokens masked in, every assistant "
                     "turn covered")
    note = _direct_note(masks, direct)
    plain, reasoning = prefix.get("plain"), prefix.get("reasoning")
    if plain is not None and plain["ok"] and (reasoning is None or reasoning["ok"]):
        return Check("loss-masks", "pass", dict(out, method="prefix"), None,
                     f"{note}; method: prefix property (each assistant turn = render(messages[:k+1]) minus "
                     "render(messages[:k], add_generation_prompt=True), a prefix of the full render, in text "
                     "and ids)")
    per_turn_fix = comment("build one sample per assistant turn: render messages[:k+1] and mask in only the span "
                           "after render(messages[:k], add_generation_prompt=True)")
    if plain is not None and plain["ok"]:
        turn = _first_broken(reasoning)
        return Check("loss-masks", "warn", dict(out, method="prefix-without-reasoning"),
                     per_turn_fix + " for conversations with reasoning_content",
                     f"{note}; prefix property holds without reasoning, but the template rewrites earlier "
                     f"turns' reasoning_content (turn at message {turn.get('index')}: {turn.get('why')}): "
                     "with reasoning, one sample per assistant turn is needed")
    turn = _first_broken(plain)
    return Check("loss-masks", "warn", dict(out, method="per-turn-samples"), per_turn_fix,
                 f"{note}; the prefix property fails (message {turn.get('index')}: {turn.get('why')}): "
                 "one sample per assistant turn is needed")


def _direct_note(masks: MasksFacts, direct: AssistantMask) -> str:
    if not masks.get("generation_markers"):
        return "no {% generation %} markers in the template, so return_assistant_tokens_mask cannot work"
    error = as_dict(direct.get("error"))
    if error:
        return f"return_assistant_tokens_mask fails ({error.get('type')}: {error.get('message')})"
    return (f"return_assistant_tokens_mask masks {direct.get('masked_tokens')} tokens but does not cover every "
            "assistant turn")


class _PrefixKeys(TypedDict):
    ok: bool
    turns: list[Any]  # the remote side's per-turn records, as reported (remote/facts/tokenizer/loss_masks.py)


class PrefixSummary(_PrefixKeys, total=False):
    """The prefix property of one conversation in the check's evidence."""

    error: object  # the render's error, when rendering raised


class BrokenTurn(TypedDict):
    index: object  # the message index of the first turn that breaks the property (as reported), or None
    why: str


def _prefix_summary(value: object) -> PrefixSummary:
    facts = as_dict(value)
    if "error" in facts and "turns" not in facts:
        return {"ok": False, "error": facts["error"], "turns": []}
    return {"ok": bool(facts.get("ok")), "turns": as_list(facts.get("turns"))}


def _first_broken(summary: PrefixSummary | None) -> BrokenTurn:
    summary = summary or PrefixSummary(ok=False, turns=[])
    if summary.get("error"):
        return {"index": None, "why": f"rendering raises {summary.get('error')}"}
    for turn in summary["turns"]:
        if not turn.get("ok"):
            diff = shaped(turn.get("diff"), TextDiff)
            why = (f"{diff.get('what')} differ at char {diff.get('offset')}: {around(diff, 'expected')!r} vs "
                   f"{around(diff, 'got')!r}") if diff else "the rendering is a text prefix but not an id prefix"
            return {"index": turn.get("index"), "why": why}
    return {"index": None, "why": "no assistant turn located"}
