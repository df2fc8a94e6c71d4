"""What every preflight check shares: the result type, the status order, evidence helpers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

from introspect.analysis.tokenizer.shapes import shaped
from introspect.remote.contract import ErrorRecord, PreflightReply, PreflightTokenizer, TextDiff, as_list

S = TypeVar("S", bound=Mapping[str, object])  # one section of the reply (remote/wire_preflight.py)

# "skipped": the check could not run because another one failed first (that one names the cause).
Status = Literal["pass", "warn", "fail", "skipped"]
Problem = tuple[Status, str, str | None]  # (status, message, fix) of one finding inside a check
Part = tuple[Status, str, str | None, dict[str, Any]]  # the same, with its evidence
GB = 1e9

CHECK_NAMES = ("tokenizer", "chat-template", "loss-masks", "mask-token", "ids", "endpoint",
               "disk-and-packages")
TITLES = {
    "tokenizer": "Tokenizer loads and agrees with its files",
    "chat-template": "Chat template renders and round-trips",
    "loss-masks": "Assistant-only loss masks",
    "mask-token": "Mask token for drafter training",
    "ids": "Ids consistent with the model",
    "endpoint": "Serving endpoint",
    "disk-and-packages": "Disk space and pipeline packages",
}
RANK = {"skipped": 0, "pass": 0, "warn": 1, "fail": 2}
SHOWN = 8  # items of a list quoted in a message


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    evidence: dict[str, Any]
    fix: str | None
    message: str

    @property
    def title(self) -> str:
        return TITLES.get(self.name, self.name)


def comment(text: str) -> str:
    """Advice that no command carries out, as a ``# comment`` line: pasted, it runs nothing."""
    return "# " + " ".join(text.split())


def fix_lines(*lines: str | None) -> str | None:
    """A fix of several lines, each a command (``  # why`` after it) or a ``# comment``, each once.
    The report prints one per line; the JSON ``fix`` field keeps them in one string, newline-separated."""
    return "\n".join(dict.fromkeys(line for line in lines if line)) or None


def ready(checks: Iterable[Check]) -> bool:
    """Ready when nothing failed (warnings name what to do, they do not block)."""
    return all(c.status != "fail" for c in checks)


def worst(statuses: Iterable[Status]) -> Status:
    return max(statuses, key=lambda s: RANK[s], default="pass")


def section(value: S | None) -> tuple[S | None, ErrorRecord | None]:
    """(section, error) of one section of the reply, ``section(evidence.get("disk"))``: a section
    the probe could not build carries only its error record.

    The sections are the remote preflight task's (remote/tasks/preflight.py, each documented at the
    function that builds it), typed in remote/wire_preflight.py; raw evidence may be damaged, so a
    section that is not a JSON object reads as missing."""
    raw: object = value  # narrowed apart from ``value``, which keeps the section's type
    if not isinstance(raw, dict):
        return None, None
    error = raw.get("error")
    if set(raw) == {"error"} and isinstance(error, dict):
        return None, shaped(error, ErrorRecord)
    return value, None


def no_evidence(name: str, evidence: PreflightReply, what: str, error: ErrorRecord | None) -> Check:
    """A check whose evidence never came back: say why (the probe's own error records)."""
    errors = [error] if error else [shaped(e, ErrorRecord) for e in as_list(evidence.get("errors")) if isinstance(e, dict)]
    reason = "; ".join(f"{e.get('type')}: {e.get('message')}" for e in errors[:3]) or "no reply"
    timed_out = any(e.get("type") in ("timeout", "ProbeTimeout") for e in errors)
    fix = comment("raise --timeout: the tokenizer part was killed at its deadline" if timed_out
                  else "rerun with --debug to see the remote side's stderr")
    return Check(name, "fail", {"errors": errors[:3], "missing_evidence": reason}, fix,
                 f"no evidence for {what}: {reason}")


def quote(ids: Iterable[Any]) -> str:
    items = list(ids)
    shown = ", ".join(str(i) for i in items[:SHOWN])
    return shown + (f" (+{len(items) - SHOWN} more)" if len(items) > SHOWN else "")


def stand_in(evidence: PreflightReply) -> str | None:
    """Why the tokenizer AutoTokenizer loaded is a stand-in (the tokenizer check fails it), or None."""
    from introspect.analysis.tokenizer.autotokenizer_verdict import stand_in_reason

    tok, _err = section(evidence.get("tokenizer"))
    if not tok or not tok.get("loaded"):
        return None
    config, _err = section(evidence.get("config"))
    return stand_in_reason(tok, config_vocab=(config or {}).get("vocab_size"))


def loaded_tokenizer(evidence: PreflightReply) -> PreflightTokenizer | None:
    """The tokenizer section when the model's tokenizer loaded (a stand-in's facts judge nothing)."""
    tok, _err = section(evidence.get("tokenizer"))
    return tok if tok and tok.get("loaded") and stand_in(evidence) is None else None


def needs_tokenizer(name: str, evidence: PreflightReply) -> Check:
    tok, err = section(evidence.get("tokenizer"))
    if tok is None:
        return no_evidence(name, evidence, "the tokenizer", err)
    if tok.get("loaded"):  # a stand-in: the tokenizer check fails it and names the fix
        return Check(name, "skipped", {"tokenizer_loaded": True, "stand_in": True}, None,
                     "not checked: AutoTokenizer built a stand-in, not the model's tokenizer")
    return Check(name, "skipped", {"tokenizer_loaded": False}, None, "not checked: the tokenizer did not load")


def skip_repeats(checks: list[Check]) -> list[Check]:
    """A part of the probe that never replied leaves several checks without evidence: the
    first one fails and names the cause and fix; the others are ``skipped``, not failed again."""
    seen: set[str] = set()
    out: list[Check] = []
    for check in checks:
        cause = check.evidence.get("missing_evidence") if check.status == "fail" else None
        if isinstance(cause, str) and cause in seen:
            check = replace(check, status="skipped", fix=None)
        elif isinstance(cause, str):
            seen.add(cause)
        out.append(check)
    return out


def around(diff: TextDiff, key: Literal["expected", "got"], width: int = 24) -> str:
    """The few characters from the first difference on (the probe sends more, kept as evidence)."""
    text = str(diff.get(key) or "")
    offset = diff.get("offset")
    offset = offset if isinstance(offset, int) else 0
    # The probe's snippets start up to 60 characters before the difference; keep a few of them.
    start = max(0, min(offset, 60) - 8)
    return text[start:start + width]
