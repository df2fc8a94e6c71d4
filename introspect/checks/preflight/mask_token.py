"""The ``mask-token`` check: a mask token id for drafter training, inside the embedding."""

from __future__ import annotations

from typing import Any, TypedDict

from introspect.analysis.tokenizer.shapes import shaped
from introspect.checks.preflight.common import (
    Check,
    comment,
    loaded_tokenizer,
    needs_tokenizer,
    no_evidence,
    section,
)
from introspect.remote.contract import PreflightReply, as_list


class Candidate(TypedDict, total=False):
    """A mask token or an id that could serve as one (remote/facts/tokenizer/mask_token.py ``mask_token``)."""

    token: str | None  # None: an embedding row no token uses
    id: int
    kind: str  # "mask_token" | "unk" | "reserved" | "unassigned-row"
    used_by_template: bool


class MaskEvidence(TypedDict):
    present: Candidate | None
    vocab_size: object  # config.json's, as the remote side read it
    candidates: list[Candidate]
    proposed: Candidate | None


def check_mask_token(evidence: PreflightReply) -> Check:
    if loaded_tokenizer(evidence) is None:
        return needs_tokenizer("mask-token", evidence)
    info, err = section(evidence.get("mask_token"))
    if info is None:
        return no_evidence("mask-token", evidence, "the mask token", err)
    vocab = info.get("vocab_size")
    present = shaped(info.get("present"), Candidate) or None
    candidates = [shaped(c, Candidate) for c in as_list(info.get("candidates"))]
    usable = [c for c in candidates if _inside(c.get("id"), vocab) and not c.get("used_by_template")]
    out: MaskEvidence = {"present": present, "vocab_size": vocab, "candidates": candidates,
           "proposed": usable[0] if usable else None}
    if present and isinstance(present.get("id"), int):
        return _present_mask(present, vocab, usable, out)
    if usable:
        pick = usable[0]
        unchecked = "" if isinstance(vocab, int) else " (config vocab_size unknown: not checked against the embedding)"
        return Check("mask-token", "warn", dict(out), _mask_setting(pick),
                     f"no mask_token; propose id {pick['id']} ({_token_label(pick)}, {pick['kind']}, unused by "
                     f"the chat template, < vocab_size {vocab}){unchecked}")
    outside = ", ".join(f"{_token_label(c)}={c.get('id')}" for c in candidates if not _inside(c.get("id"), vocab))
    return Check("mask-token", "fail", dict(out),
                 comment(f"no unused id below vocab_size {vocab}: pick an id < {vocab} that the data never "
                         "contains (the drafter reads it from the target's embedding), or correct config.json's "
                         "vocab_size"),
                 "no mask_token and no usable candidate"
                 + (f": {outside} at or above vocab_size {vocab}" if outside else ""))


def _inside(token_id: Any, vocab: Any) -> bool:
    return isinstance(token_id, int) and token_id >= 0 and (not isinstance(vocab, int) or token_id < vocab)


def _token_label(candidate: Candidate) -> str:
    token = candidate.get("token")
    return str(token) if token is not None else "an embedding row no token uses"


def _mask_setting(pick: Candidate) -> str:
    token = pick.get("token")
    cfg = f'"mask_token_id": {pick["id"]}' + (f', "mask_token": "{token}"' if token is not None else "")
    return comment(f"set the drafter's config.json \"dflash_config\": {{{cfg}}}")


def _present_mask(present: Candidate, vocab: Any, usable: list[Candidate], out: MaskEvidence) -> Check:
    label = f"{present.get('token')} = {present.get('id')}"
    if not _inside(present.get("id"), vocab):
        fix = (_mask_setting(usable[0]) + " instead" if usable
               else comment(f"pick an id < {vocab} that the data never contains"))
        return Check("mask-token", "fail", dict(out), fix,
                     f"mask_token {label} is at or above config vocab_size {vocab}: outside the embedding")
    if present.get("used_by_template"):
        return Check("mask-token", "warn", dict(out), _mask_setting(usable[0]) if usable else None,
                     f"mask_token {label} appears in rendered conversations: training data would contain it")
    return Check("mask-token", "pass", dict(out), None, f"mask_token {label} (< vocab_size {vocab})")
