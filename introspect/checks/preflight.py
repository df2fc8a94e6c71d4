"""Verdicts of `introspect preflight` (issue 5): is a data-generation job ready to run?

Pure: evidence in (the reply of ``introspect/remote/preflight_probe.py``, both parts
merged), checks out. No I/O, no transformers. Seven checks, in the issue's order:

``tokenizer``, ``chat-template``, ``loss-masks``, ``mask-token``, ``ids``,
``endpoint``, ``disk-and-packages``.

Each is pass, warn or fail with the evidence it judged and, when action is needed,
the exact fix (a command, a setting, a file edit). ``ready()`` is false when any
check fails; warnings never block, they name what the pipeline must do differently.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Status = Literal["pass", "warn", "fail"]
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
_RANK = {"pass": 0, "warn": 1, "fail": 2}
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


def ready(checks: Iterable[Check]) -> bool:
    """Ready when nothing failed (warnings name what to do, they do not block)."""
    return all(c.status != "fail" for c in checks)


def evaluate(evidence: Mapping[str, Any], *, min_free_gb: float, pip: str = "python3 -m pip",
             model_path: str | None = None) -> list[Check]:
    """The seven checks, in order. ``pip`` is the install command of the pipeline's venv
    (``<venv>/bin/pip``), used verbatim in fixes."""
    model = model_path or _d(evidence.get("model")).get("path") or "<model>"
    return [
        check_tokenizer(evidence, pip),
        check_chat_template(evidence),
        check_loss_masks(evidence),
        check_mask_token(evidence),
        check_ids(evidence),
        check_endpoint(evidence, model),
        check_disk_and_packages(evidence, min_free_gb, pip),
    ]


# ------------------------------------------------------------------ helpers


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _worst(statuses: Iterable[Status]) -> Status:
    return max(statuses, key=lambda s: _RANK[s], default="pass")


def _section(evidence: Mapping[str, Any], name: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(section, error): a section the probe could not build carries only its error record."""
    value = evidence.get(name)
    if not isinstance(value, dict):
        return None, None
    if set(value) == {"error"} and isinstance(value["error"], dict):
        return None, value["error"]
    return value, None


def _no_evidence(name: str, evidence: Mapping[str, Any], what: str, error: dict[str, Any] | None) -> Check:
    """A check whose evidence never came back: say why (the probe's own error records)."""
    errors = [error] if error else [e for e in _l(evidence.get("errors")) if isinstance(e, dict)]
    reason = "; ".join(f"{e.get('type')}: {e.get('message')}" for e in errors[:3]) or "no reply"
    timed_out = any(e.get("type") in ("timeout", "ProbeTimeout") for e in errors)
    fix = ("raise --timeout (the tokenizer part was killed at its deadline)" if timed_out
           else "rerun with --debug to see the remote side's stderr")
    return Check(name, "fail", {"errors": errors[:3]}, fix, f"no evidence for {what}: {reason}")


def _quote(ids: Iterable[Any]) -> str:
    items = list(ids)
    shown = ", ".join(str(i) for i in items[:SHOWN])
    return shown + (f" (+{len(items) - SHOWN} more)" if len(items) > SHOWN else "")


def _tokenizer(evidence: Mapping[str, Any]) -> dict[str, Any] | None:
    tok, _err = _section(evidence, "tokenizer")
    return tok if tok and tok.get("loaded") else None


# ------------------------------------------------------------------ 1. tokenizer


def check_tokenizer(evidence: Mapping[str, Any], pip: str) -> Check:
    tok, err = _section(evidence, "tokenizer")
    if tok is None:
        return _no_evidence("tokenizer", evidence, "the tokenizer load", err)
    if not tok.get("loaded"):
        return _load_failure(tok, pip)
    base = {k: tok.get(k) for k in ("class", "is_fast", "len", "vocab_size", "transformers_version",
                                    "load_seconds", "trust_remote_code")}
    added = _d(tok.get("added_tokens_check"))
    sweep = _d(tok.get("decode_sweep"))
    evidence_out = dict(base, added_tokens=_added_summary(added), decode_sweep=_sweep_summary(sweep))
    if added.get("mismatches"):
        return _added_mismatch(tok, added, evidence_out)
    if sweep.get("failures"):
        ids = [i.get("id") for i in _l(sweep.get("items"))]
        return Check("tokenizer", "fail", evidence_out,
                     "do not generate data with this tokenizer: decode() raises for ids the model can "
                     f"emit ({_quote(ids)}); fix the tokenizer code or its vocabulary files",
                     f"decode([id]) raises for {sweep['failures']} of {sweep.get('total')} ids")
    where = f"{tok.get('class')} (transformers {tok.get('transformers_version')})"
    foreign = _foreign_class(tok)
    if foreign is not None:
        return Check("tokenizer", "warn", dict(evidence_out, declared_classes=tok.get("declared_classes")),
                     foreign[1], foreign[0])
    agree = (f"{added['checked']} added tokens agree both ways with {', '.join(_l(added.get('sources')))}"
             if added else "no added tokens listed in the files")
    if sweep and not sweep.get("complete"):
        return Check("tokenizer", "warn", evidence_out, "raise --timeout to sweep every id",
                     f"{where} loaded; {agree}; decode([id]) checked for only {sweep.get('checked')} "
                     f"of {sweep.get('total')} ids within the time budget")
    return Check("tokenizer", "pass", evidence_out, None,
                 f"{where} loaded; {agree}; decode([id]) works for all {sweep.get('total', '?')} ids")


def _foreign_class(tok: dict[str, Any]) -> tuple[str, str] | None:
    """(message, fix) when the loaded class is not the model's own (auto_map) class."""
    declared = [c for c in _l(tok.get("declared_classes")) if isinstance(c, str)]
    if not declared or tok.get("class") in declared:
        return None
    message = (f"loaded {tok.get('class')}, not the model's own {' / '.join(declared)} (auto_map): transformers "
               "built a substitute (an automatic conversion) that a server running the model's code may not match")
    if tok.get("trust_remote_code") is False:
        return message, "drop --no-remote-code, so the data is tokenized by the model's own tokenizer class"
    return message, "load with trust_remote_code=True from the model dir, so the auto_map class is used"


def _added_summary(added: dict[str, Any]) -> dict[str, Any] | None:
    if not added:
        return None
    return {"sources": added.get("sources"), "checked": added.get("checked"),
            "mismatches": added.get("mismatches"), "items": _l(added.get("items"))[:SHOWN]}


def _sweep_summary(sweep: dict[str, Any]) -> dict[str, Any] | None:
    if not sweep:
        return None
    return {k: sweep.get(k) for k in ("total", "checked", "complete", "failures", "seconds")} | {
        "items": _l(sweep.get("items"))[:SHOWN]}


def _load_failure(tok: dict[str, Any], pip: str) -> Check:
    error = _d(tok.get("error"))
    cause = error.get("cause")
    missing = [str(p) for p in _l(error.get("missing_packages"))]
    evidence = {"error": {k: error.get(k) for k in ("type", "message", "cause", "missing_packages")},
                "trust_remote_code": tok.get("trust_remote_code"),
                "transformers_version": tok.get("transformers_version")}
    if missing:
        fix = f"{pip} install " + " ".join(shlex.quote(p) for p in missing)
    elif cause == "remote-code-refused":
        fix = "drop --no-remote-code: this tokenizer is the model's own code, and the data must be built with it"
    elif cause == "incompatible-code":
        major = str(tok.get("transformers_version") or "").split(".")[0]
        pin = f"'transformers<{major}'" if major.isdigit() else "the transformers release it was written for"
        fix = (f"the model's tokenizer code does not fit this transformers: update the code from the model's "
               f"repository, or {pip} install {pin}")
    elif cause == "missing-files":
        fix = "the model dir lacks tokenizer files: copy tokenizer_config.json and the vocabulary files next to config.json"
    else:
        fix = "fix the load error shown (run `introspect probe` on the same venv for the full traceback)"
    return Check("tokenizer", "fail", evidence, fix,
                 f"AutoTokenizer.from_pretrained fails: {error.get('type')}: {error.get('message')}")


def _added_mismatch(tok: dict[str, Any], added: dict[str, Any], evidence: dict[str, Any]) -> Check:
    items = _l(added.get("items"))
    first = _d(items[0]) if items else {}
    detail = (f"id {first.get('id')} is {first.get('expected')!r} in {first.get('source')} but the loaded "
              f"tokenizer gives decode([{first.get('id')}])={first.get('decoded')!r}, "
              f"convert_ids_to_tokens={first.get('id_to_token')!r}, "
              f"convert_tokens_to_ids={first.get('token_to_id')!r}, encode={first.get('encoded')!r}")
    ids = _quote(i.get("id") for i in items)
    if tok.get("is_fast"):
        fix = ("load the slow tokenizer class (AutoTokenizer.from_pretrained(path, trust_remote_code=True, "
               "use_fast=False)): the automatic fast conversion shifted special-token ids; regenerate "
               "tokenizer.json only from a tokenizer that passes this check")
    else:
        fix = (f"the tokenizer code and tokenizer_config.json's added_tokens_decoder disagree on ids {ids}: "
               "restore the files of the model's repository (or correct those entries) until "
               "decode([id]) and encode(token) agree with them; do not generate data before")
    return Check("tokenizer", "fail", evidence, fix,
                 f"{added.get('mismatches')} of {added.get('checked')} added tokens disagree with the files: {detail}")


# ------------------------------------------------------------------ 2. chat template


def check_chat_template(evidence: Mapping[str, Any]) -> Check:
    if _tokenizer(evidence) is None:
        return _needs_tokenizer("chat-template", evidence)
    template, err = _section(evidence, "template")
    if template is None:
        return _no_evidence("chat-template", evidence, "the chat template", err)
    if not template.get("present"):
        return Check("chat-template", "fail", {"present": False},
                     "add the model's chat_template.jinja (from its repository) to the model dir",
                     "the tokenizer has no chat template: conversations cannot be rendered")
    renders = _d(template.get("renders"))
    markers, _merr = _section(evidence, "markers")
    summary = {name: _render_summary(r) for name, r in renders.items()}
    out = {"sha256": template.get("sha256"), "variables": template.get("variables"),
           "uses_tools": template.get("uses_tools"), "thinking_switch": template.get("thinking_switch"),
           "switch_changes_render": template.get("switch_changes_render"),
           "generation_prompt": template.get("generation_prompt_text"), "renders": summary,
           "markers": _l(_d(markers).get("items")), "end_of_turn": _d(markers).get("end_of_turn") or None}
    problems = (_render_problems(renders) + _roundtrip_problems(renders) + _marker_problems(markers)
                + _variant_problems(template, renders))
    if not problems:
        variants = ", ".join(renders)
        return Check("chat-template", "pass", out, None,
                     f"renders ({variants}); every render round-trips; {_markers_note(markers)}")
    status = _worst(p[0] for p in problems)
    worst = [p for p in problems if p[0] == status]
    fixes = [p[2] for p in worst if p[2]]
    return Check("chat-template", status, out, "; ".join(dict.fromkeys(fixes)) or None,
                 "; ".join(p[1] for p in worst))


def _needs_tokenizer(name: str, evidence: Mapping[str, Any]) -> Check:
    tok, err = _section(evidence, "tokenizer")
    if tok is None:
        return _no_evidence(name, evidence, "the tokenizer", err)
    return Check(name, "fail", {"tokenizer_loaded": False}, "make the tokenizer load first (see the tokenizer check)",
                 "not checked: the tokenizer did not load")


def _render_summary(render: Any) -> dict[str, Any]:
    render = _d(render)
    trip = _d(render.get("roundtrip"))
    return {"ok": render.get("ok"), "error": render.get("error"), "tokens": trip.get("tokens"),
            "roundtrip": trip.get("ok"), "template_ids_match": render.get("template_ids_match")}


def _render_problems(renders: dict[str, Any]) -> list[Problem]:
    out: list[Problem] = []
    for name, render in renders.items():
        error = _d(_d(render).get("error"))
        if error:
            out.append(("fail", f"rendering {name!r} raises {error.get('type')}: {error.get('message')}",
                        "use the model's own chat template (chat_template.jinja from its repository) with a "
                        "transformers/jinja2 that renders it"))
    return out


def _roundtrip_problems(renders: dict[str, Any]) -> list[Problem]:
    """One problem per kind, naming every render it hit (they usually share one cause)."""
    broken: dict[bool, list[str]] = {True: [], False: []}
    first: dict[bool, dict[str, Any]] = {}
    mismatched: list[str] = []
    for name, render in renders.items():
        render = _d(render)
        trip = _d(render.get("roundtrip"))
        if render.get("ok") and trip and not trip.get("ok"):
            cleanup = bool(trip.get("ok_without_cleanup"))
            broken[cleanup].append(name)
            first.setdefault(cleanup, _d(trip.get("diff")))
        if render.get("ok") and render.get("template_ids_match") is False:
            mismatched.append(name)
    out: list[Problem] = []
    if broken[False]:
        out.append(("fail", f"decode(encode(text)) does not round-trip for {_names(broken[False])}: it differs "
                    f"{_diff_text(first[False])}",
                    "the tokenizer does not reproduce the rendered text (see the tokenizer check for id "
                    "disagreements): fix it before generating data"))
    if broken[True]:
        out.append(("warn", f"{_names(broken[True])}: decode(encode(text)) differs only in spaces "
                    f"{_diff_text(first[True])}", "decode with clean_up_tokenization_spaces=False in the pipeline"))
    if mismatched:
        example = _d(renders[mismatched[0]]).get("template_ids_diff")
        out.append(("warn", f"{_names(mismatched)}: apply_chat_template(tokenize=True) gives other ids than "
                    f"encode(render, add_special_tokens=False) {example}",
                    "tokenize one way only in the pipeline: apply_chat_template(tokenize=True), or "
                    "encode(render, add_special_tokens=False) (a template that writes BOS itself "
                    "gets a second BOS from add_special_tokens=True)"))
    return out


def _names(names: list[str]) -> str:
    return ", ".join(repr(n) for n in names)


def _diff_text(diff: dict[str, Any]) -> str:
    return (f"at char {diff.get('offset')}: expected {_around(diff, 'expected', 40)!r}, "
            f"got {_around(diff, 'got', 40)!r}")


def _marker_problems(markers: dict[str, Any] | None) -> list[Problem]:
    out: list[Problem] = []
    broken = [m for m in _l(_d(markers).get("items")) if not _d(m).get("single")]
    if broken:
        shown = ", ".join(f"{m.get('text')} -> {len(_l(m.get('ids')))} tokens {_l(m.get('ids'))}" for m in broken)
        out.append(("fail", f"turn markers are not single tokens: {shown}",
                    "this template does not belong to this tokenizer: use the model's own chat template, "
                    "or add the markers as special tokens (tokenizer.add_special_tokens) only if the model "
                    "was trained with them"))
    return out


def _variant_problems(template: dict[str, Any], renders: dict[str, Any]) -> list[Problem]:
    out: list[Problem] = []
    tools = _d(renders.get("tools"))
    if tools.get("ok") and tools.get("tool_rendered") is False:
        out.append(("warn", "the template takes tools but the rendered prompt does not name the tool",
                    "check how the template expects tools (tools=[{'type': 'function', 'function': ...}])"))
    if template.get("thinking_switch") and template.get("switch_changes_render") is False:
        out.append(("warn", f"the template reads {template['thinking_switch']!r} but on and off render the same",
                    None))
    return out


def _markers_note(markers: dict[str, Any] | None) -> str:
    items = _l(_d(markers).get("items"))
    if not items:
        return "no turn markers found"
    plain = [m.get("text") for m in items if not m.get("special")]
    note = f"{len(items)} markers, each a single token"
    return note + (f" (not flagged special: {', '.join(plain)})" if plain else ", all special")


# ------------------------------------------------------------------ 3. loss masks


def check_loss_masks(evidence: Mapping[str, Any]) -> Check:
    if _tokenizer(evidence) is None:
        return _needs_tokenizer("loss-masks", evidence)
    masks, err = _section(evidence, "masks")
    if masks is None:
        template = _d(evidence.get("template"))
        if template and not template.get("present"):
            return Check("loss-masks", "fail", {}, "add the model's chat template first",
                         "no chat template: assistant turns cannot be located")
        return _no_evidence("loss-masks", evidence, "the loss masks", err)
    direct = _d(masks.get("assistant_tokens_mask"))
    prefix = {name: _prefix_summary(value) for name, value in _d(masks.get("prefix")).items()}
    out = {"generation_markers": masks.get("generation_markers"), "assistant_tokens_mask": direct,
           "prefix": prefix}
    if direct.get("ok"):
        return Check("loss-masks", "pass", dict(out, method="assistant_tokens_mask"), None,
                     "method: apply_chat_template(return_assistant_tokens_mask=True) ({% generation %} markers): "
                     f"{direct.get('masked_tokens')} of {direct.get('tokens')} tokens masked in, every assistant "
                     "turn covered")
    note = _direct_note(masks, direct)
    plain, reasoning = prefix.get("plain") or {}, prefix.get("reasoning")
    if plain.get("ok") and (reasoning is None or reasoning.get("ok")):
        return Check("loss-masks", "pass", dict(out, method="prefix"), None,
                     f"{note}; method: prefix property (each assistant turn = render(messages[:k+1]) minus "
                     "render(messages[:k], add_generation_prompt=True), a prefix of the full render, in text "
                     "and ids)")
    per_turn_fix = ("build one sample per assistant turn: render messages[:k+1] and mask in only the span after "
                    "render(messages[:k], add_generation_prompt=True)")
    if plain.get("ok"):
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


def _direct_note(masks: dict[str, Any], direct: dict[str, Any]) -> str:
    if not masks.get("generation_markers"):
        return "no {% generation %} markers in the template, so return_assistant_tokens_mask cannot work"
    error = _d(direct.get("error"))
    if error:
        return f"return_assistant_tokens_mask fails ({error.get('type')}: {error.get('message')})"
    return (f"return_assistant_tokens_mask masks {direct.get('masked_tokens')} tokens but does not cover every "
            "assistant turn")


def _prefix_summary(value: Any) -> dict[str, Any]:
    value = _d(value)
    if "error" in value and "turns" not in value:
        return {"ok": False, "error": value["error"], "turns": []}
    return {"ok": bool(value.get("ok")), "turns": _l(value.get("turns"))}


def _first_broken(summary: dict[str, Any] | None) -> dict[str, Any]:
    summary = summary or {}
    if summary.get("error"):
        return {"index": None, "why": f"rendering raises {summary['error']}"}
    for turn in _l(summary.get("turns")):
        if not turn.get("ok"):
            diff = _d(turn.get("diff"))
            why = (f"{diff.get('what')} differ at char {diff.get('offset')}: {_around(diff, 'expected')!r} vs "
                   f"{_around(diff, 'got')!r}") if diff else "the rendering is a text prefix but not an id prefix"
            return {"index": turn.get("index"), "why": why}
    return {"index": None, "why": "no assistant turn located"}


def _around(diff: dict[str, Any], key: str, width: int = 24) -> str:
    """The few characters from the first difference on (the probe sends more, kept as evidence)."""
    text = str(diff.get(key) or "")
    offset = diff.get("offset")
    offset = offset if isinstance(offset, int) else 0
    # The probe's snippets start up to 60 characters before the difference; keep a few of them.
    start = max(0, min(offset, 60) - 8)
    return text[start:start + width]


# ------------------------------------------------------------------ 4. mask token


def check_mask_token(evidence: Mapping[str, Any]) -> Check:
    if _tokenizer(evidence) is None:
        return _needs_tokenizer("mask-token", evidence)
    info, err = _section(evidence, "mask_token")
    if info is None:
        return _no_evidence("mask-token", evidence, "the mask token", err)
    vocab = info.get("vocab_size")
    present = _d(info.get("present")) or None
    candidates = [_d(c) for c in _l(info.get("candidates"))]
    usable = [c for c in candidates if _inside(c.get("id"), vocab) and not c.get("used_by_template")]
    out = {"present": present, "vocab_size": vocab, "candidates": candidates,
           "proposed": usable[0] if usable else None}
    if present and isinstance(present.get("id"), int):
        return _present_mask(present, vocab, usable, out)
    if usable:
        pick = usable[0]
        unchecked = "" if isinstance(vocab, int) else " (config vocab_size unknown: not checked against the embedding)"
        return Check("mask-token", "warn", out, _mask_setting(pick),
                     f"no mask_token; propose id {pick['id']} ({_token_label(pick)}, {pick['kind']}, unused by "
                     f"the chat template, < vocab_size {vocab}){unchecked}")
    outside = ", ".join(f"{_token_label(c)}={c.get('id')}" for c in candidates if not _inside(c.get("id"), vocab))
    return Check("mask-token", "fail", out,
                 f"no unused id below vocab_size {vocab}: pick an id < {vocab} that the data never contains "
                 "(the drafter reads it from the target's embedding), or correct config.json's vocab_size",
                 "no mask_token and no usable candidate"
                 + (f": {outside} at or above vocab_size {vocab}" if outside else ""))


def _inside(token_id: Any, vocab: Any) -> bool:
    return isinstance(token_id, int) and token_id >= 0 and (not isinstance(vocab, int) or token_id < vocab)


def _token_label(candidate: dict[str, Any]) -> str:
    token = candidate.get("token")
    return str(token) if token is not None else "an embedding row no token uses"


def _mask_setting(pick: dict[str, Any]) -> str:
    token = pick.get("token")
    cfg = f'"mask_token_id": {pick["id"]}' + (f', "mask_token": "{token}"' if token is not None else "")
    return f"set the drafter's config.json \"dflash_config\": {{{cfg}}}"


def _present_mask(present: dict[str, Any], vocab: Any, usable: list[dict[str, Any]],
                  out: dict[str, Any]) -> Check:
    label = f"{present.get('token')} = {present.get('id')}"
    if not _inside(present.get("id"), vocab):
        fix = (_mask_setting(usable[0]) + " instead" if usable
               else f"pick an id < {vocab} that the data never contains")
        return Check("mask-token", "fail", out, fix,
                     f"mask_token {label} is at or above config vocab_size {vocab}: outside the embedding")
    if present.get("used_by_template"):
        return Check("mask-token", "warn", out, _mask_setting(usable[0]) if usable else None,
                     f"mask_token {label} appears in rendered conversations: training data would contain it")
    return Check("mask-token", "pass", out, None, f"mask_token {label} (< vocab_size {vocab})")


# ------------------------------------------------------------------ 5. ids


def check_ids(evidence: Mapping[str, Any]) -> Check:
    tok = _tokenizer(evidence)
    if tok is None:
        return _needs_tokenizer("ids", evidence)
    config, err = _section(evidence, "config")
    if config is None:
        return _no_evidence("ids", evidence, "config.json", err)
    markers = _d(evidence.get("markers"))
    eot = _d(markers.get("end_of_turn")) or None
    eos = _d(tok.get("eos")) or None
    gen, cfg_eos = _l(config.get("generation_eos")), _l(config.get("config_eos"))
    stop = sorted(set(([eos["id"]] if eos and isinstance(eos.get("id"), int) else []) + (gen or cfg_eos)))
    out = {"len_tokenizer": tok.get("len"), "vocab_size": config.get("vocab_size"),
           "vocab_size_source": config.get("vocab_size_source"), "tokenizer_eos": eos,
           "generation_config_eos": gen or None, "config_eos": cfg_eos or None,
           "config_eos_source": config.get("config_eos_source"),
           "generation_config_present": config.get("generation_config_present"),
           "stop_ids": stop, "end_of_turn": eot}
    problems = _size_problems(out) + _stop_problems(out, eot, stop) + _eos_problems(out)
    if not problems:
        return Check("ids", "pass", out, None,
                     f"len(tokenizer) {out['len_tokenizer']} <= vocab_size {out['vocab_size']}; EOS ids agree; "
                     f"end of turn {eot.get('text') if eot else '?'} is a stop id")
    status = _worst(p[0] for p in problems)
    fixes = [p[2] for p in problems if p[0] == status and p[2]]
    return Check("ids", status, out, "; ".join(fixes) or None, "; ".join(p[1] for p in problems))


def _size_problems(out: dict[str, Any]) -> list[Problem]:
    size, vocab, source = out["len_tokenizer"], out["vocab_size"], out["vocab_size_source"]
    if not isinstance(vocab, int):
        return [("warn", "config.json has no vocab_size: the embedding size is unknown",
                 "add vocab_size (the embedding's row count) to config.json")]
    if isinstance(size, int) and size > vocab:
        return [("fail", f"len(tokenizer) {size} > {source} vocab_size {vocab}: ids {vocab}..{size - 1} index "
                 "past the embedding", f"set {source}'s vocab_size to the embedding's row count (>= {size}), "
                 "or use the tokenizer that belongs to these weights")]
    return []


def _stop_problems(out: dict[str, Any], eot: dict[str, Any] | None, stop: list[int]) -> list[Problem]:
    if eot is None or not isinstance(eot.get("id"), int):
        return [("warn", "the template's end-of-turn token could not be identified as one id",
                 "check by hand that generation stops at the end of an assistant turn")]
    if eot["id"] in stop:
        return []
    listed = sorted(set(stop) | {eot["id"]})
    return [("fail", f"the template ends turns with {eot.get('text')} ({eot['id']}) but the stop ids are "
             f"{stop or 'none'}: completions would run past the turn",
             f"set \"eos_token_id\": {listed} in generation_config.json (or pass stop_token_ids=[{eot['id']}] "
             "in every request)")]


def _eos_problems(out: dict[str, Any]) -> list[Problem]:
    eos = out["tokenizer_eos"]
    tok_id = eos.get("id") if eos else None
    sources = {"tokenizer": [tok_id] if isinstance(tok_id, int) else [],
               "generation_config.json": out["generation_config_eos"] or [],
               str(out["config_eos_source"] or "config.json"): out["config_eos"] or []}
    named = {k: set(v) for k, v in sources.items() if v}
    # Agreement: every source shares an id with every other (generation_config may list several).
    if all(a & b for a in named.values() for b in named.values()):
        return []
    shown = ", ".join(f"{k} {sorted(v)}" for k, v in named.items())
    stop = out["stop_ids"]
    return [("warn", f"EOS ids differ between sources ({shown}); generation stops on {stop}",
             f"treat every id of {stop} as the end of a completion in the pipeline (the server stops on any "
             "of them) and strip it before storing the completion")]


# ------------------------------------------------------------------ 6. endpoint


def check_endpoint(evidence: Mapping[str, Any], model_path: str) -> Check:
    info, err = _section(evidence, "endpoint")
    if info is None:
        return _no_evidence("endpoint", evidence, "the endpoint", err)
    if info.get("skipped"):
        return Check("endpoint", "warn", {"url": None}, "pass --endpoint http://127.0.0.1:PORT (the server's "
                     "address as seen from the host)", "not checked: no --endpoint given")
    models, completion = _d(info.get("models")), _d(info.get("completion"))
    matched = _d(info.get("matched")) or None
    out = {"url": info.get("url"), "api_key_env": info.get("api_key_env"),
           "api_key_present": info.get("api_key_present"), "models": models, "matched": matched,
           "completion": completion or None}
    if not models.get("ok"):
        return Check("endpoint", "fail", out, _endpoint_fix(info, models),
                     f"GET {info.get('url')}/v1/models from the host failed: {_d(models.get('error')).get('message')}")
    if matched is None:
        return Check("endpoint", "fail", out,
                     f"serve {model_path} at this endpoint (e.g. --model-path {shlex.quote(model_path)}), or point "
                     "--endpoint at the server that does",
                     f"the server lists {models.get('ids') or 'no models'} (roots {models.get('roots')}); none is "
                     f"{model_path}")
    if not completion.get("ok"):
        return Check("endpoint", "fail", out, _endpoint_fix(info, completion),
                     f"a one-token chat completion for {matched.get('id')} failed: "
                     f"{_d(completion.get('error')).get('message')}")
    return Check("endpoint", "pass", out, None,
                 f"serves {matched.get('id')} (matched by {matched.get('by')}); /v1/models in "
                 f"{models.get('seconds')} s, one-token completion in {completion.get('seconds')} s")


def _endpoint_fix(info: dict[str, Any], call: dict[str, Any]) -> str:
    error = _d(call.get("error"))
    status = call.get("status")
    if status in (401, 403):
        name = info.get("api_key_env")
        if name and not info.get("api_key_present"):
            return f"export {name}=<key> in the host's environment (it is not set there)"
        if name:
            return f"the key in {name} is refused: put the server's --api-key value in it"
        return "the server wants an API key: pass --api-key-env NAME naming a variable set on the host"
    if error.get("type") == "timeout":
        return "the server did not answer in time: check that it finished loading, or raise --endpoint-timeout"
    if error.get("type") == "unreachable":
        return (f"start the server, or fix --endpoint: nothing answers at {info.get('url')} from the host "
                "(it is usually bound to the host's loopback)")
    if status == 404:
        return "the URL does not serve the OpenAI API: pass the server's base URL (http://HOST:PORT)"
    return "check the server's log for this request"


# ------------------------------------------------------------------ 7. disk and packages


def check_disk_and_packages(evidence: Mapping[str, Any], min_free_gb: float, pip: str) -> Check:
    disk, derr = _section(evidence, "disk")
    packages, perr = _section(evidence, "packages")
    if disk is None and packages is None:
        return _no_evidence("disk-and-packages", evidence, "disk and packages", derr or perr)
    parts = [_disk_part(disk, derr, min_free_gb), _packages_part(packages, perr, pip)]
    out = {"disk": parts[0][3], "packages": parts[1][3], "min_free_gb": min_free_gb}
    status = _worst(p[0] for p in parts)
    fixes = [p[2] for p in parts if p[2] and p[0] != "pass"]
    return Check("disk-and-packages", status, out, "; ".join(fixes) or None, "; ".join(p[1] for p in parts))


def _disk_part(disk: dict[str, Any] | None, err: dict[str, Any] | None, min_free_gb: float) -> Part:
    if disk is None:
        message = f"disk not checked: {_d(err).get('message') or 'no evidence'}"
        return "fail", message, "check --output-dir (it must be a path on the host)", {"error": err}
    free = disk.get("free_bytes")
    free_gb = round(free / GB, 1) if isinstance(free, int) else None
    where = disk.get("checked_path")
    note = " (no --output-dir: checked the home directory)" if disk.get("defaulted") else ""
    out = dict(disk, free_gb=free_gb)
    if not disk.get("writable"):
        return ("fail", f"{where} is not writable{note}",
                f"make {where} writable for the pipeline's user, or pass an --output-dir it can write to", out)
    if free_gb is None or free_gb < min_free_gb:
        return ("fail", f"{free_gb} GB free at {where}, below --min-free-gb {min_free_gb:g}{note}",
                f"free {min_free_gb - (free_gb or 0):.1f} GB under {where}, or pass --output-dir on a larger "
                "filesystem", out)
    return "pass", f"{free_gb} GB free at {where} (>= {min_free_gb:g}){note}", None, out


def _packages_part(packages: dict[str, Any] | None, err: dict[str, Any] | None, pip: str) -> Part:
    if packages is None:
        return "fail", f"packages not checked: {_d(err).get('message') or 'no evidence'}", None, {"error": err}
    items = [_d(i) for i in _l(packages.get("items"))]
    missing = [str(m) for m in _l(packages.get("missing"))]
    out = {"python": packages.get("python"), "items": items, "missing": missing,
           "tokenizer_code": packages.get("tokenizer_code")}
    if missing:
        who = ", ".join(f"{i.get('name')} ({i.get('required_by')})" for i in items if not i.get("available"))
        return ("fail", f"missing in the venv: {who}", f"{pip} install " + " ".join(shlex.quote(m) for m in missing),
                out)
    shown = ", ".join(f"{i.get('name')} {i.get('version') or ''}".strip() for i in items)
    return "pass", f"packages present: {shown}", None, out
