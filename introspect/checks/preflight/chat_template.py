"""The ``chat-template`` check: the template renders, round-trips and marks turns with single tokens."""

from __future__ import annotations

import posixpath
import shlex
from typing import Any, TypedDict

from introspect.analysis.tokenizer.shapes import shaped
from introspect.checks.preflight.common import (
    Check,
    Problem,
    TextDiff,
    around,
    comment,
    fix_lines,
    loaded_tokenizer,
    needs_tokenizer,
    no_evidence,
    section,
    worst,
)
from introspect.remote.contract import (
    MarkersFacts,
    PreflightReply,
    Render,
    Runaway,
    TemplateFacts,
    as_dict,
    as_list,
)


def check_chat_template(evidence: PreflightReply) -> Check:
    if loaded_tokenizer(evidence) is None:
        return needs_tokenizer("chat-template", evidence)
    template, err = section(evidence.get("template"))
    if template is None:
        return no_evidence("chat-template", evidence, "the chat template", err)
    if not template.get("present"):
        return Check("chat-template", "fail", {"present": False},
                     comment("add the model's chat_template.jinja (from its repository) to the model dir"),
                     "the tokenizer has no chat template: conversations cannot be rendered")
    runaway = shaped(template.get("runaway"), Runaway)
    if runaway:
        return _runaway(template, runaway, as_dict(evidence.get("model")).get("path"))
    renders = as_dict(template.get("renders"))
    markers, _merr = section(evidence.get("markers"))
    summary = {name: _render_summary(r) for name, r in renders.items()}
    out = {"sha256": template.get("sha256"), "variables": template.get("variables"),
           "uses_tools": template.get("uses_tools"), "thinking_switch": template.get("thinking_switch"),
           "switch_changes_render": template.get("switch_changes_render"),
           "generation_prompt": template.get("generation_prompt_text"), "renders": summary,
           "markers": as_list(as_dict(markers).get("items")), "end_of_turn": as_dict(markers).get("end_of_turn") or None}
    problems = (_render_problems(renders) + _roundtrip_problems(renders) + _marker_problems(markers)
                + _variant_problems(template, renders))
    if not problems:
        variants = ", ".join(renders)
        return Check("chat-template", "pass", out, None,
                     f"renders ({variants}); every render round-trips; {_markers_note(markers)}")
    status = worst(p[0] for p in problems)
    gravest = [p for p in problems if p[0] == status]
    # Every problem's fix is advice for the pipeline or the model files, which no command carries out.
    fixes = [comment(p[2]) for p in gravest if p[2]]
    return Check("chat-template", status, out, fix_lines(*fixes),
                 "; ".join(p[1] for p in gravest))


def _runaway(template: TemplateFacts, runaway: Runaway, model: Any) -> Check:
    """A render stopped by the probe's own memory or time limit: the template's verdict (the
    probe renders nothing more of it), named by the file it comes from."""
    source = template.get("source")
    named = f" {template['name']!r}" if template.get("name") else ""
    where = f" in {source}" if source else ""
    message = (f"the chat template{named}{where} does not finish rendering {runaway.get('variant')!r}: "
               f"{runaway.get('message')} (it grows a string or a list, or loops, without end; a server "
               "renders it on every request)")
    path = posixpath.join(str(model), str(source)) if model and source else str(model or ".")
    key = ' (its "chat_template" key)' if source == "tokenizer_config.json" else ""
    fix = (f"sha256sum {shlex.quote(path)}  # compare with the model repository's file and replace it{key}: "
           "this template does not finish rendering")
    return Check("chat-template", "fail", {"runaway": runaway, "source": source, "name": template.get("name"),
                                           "sha256": template.get("sha256")}, fix, message)


class RenderSummary(TypedDict):
    """One render in the check's evidence: rendered, raised, its round trip, its ids."""

    ok: object  # the remote render's values, as reported (remote/facts/tokenizer/chat_template.py)
    error: object
    tokens: object
    roundtrip: object
    template_ids_match: object


def _render_summary(render: object) -> RenderSummary:
    facts = as_dict(render)
    trip = as_dict(facts.get("roundtrip"))
    return {"ok": facts.get("ok"), "error": facts.get("error"), "tokens": trip.get("tokens"),
            "roundtrip": trip.get("ok"), "template_ids_match": facts.get("template_ids_match")}


def _render_problems(renders: dict[str, Render]) -> list[Problem]:
    out: list[Problem] = []
    for name, render in renders.items():
        error = as_dict(as_dict(render).get("error"))
        if error:
            out.append(("fail", f"rendering {name!r} raises {error.get('type')}: {error.get('message')}",
                        "use the model's own chat template (chat_template.jinja from its repository) with a "
                        "transformers/jinja2 that renders it"))
    return out


def _roundtrip_problems(renders: dict[str, Render]) -> list[Problem]:
    """One problem per kind, naming every render it hit (they usually share one cause)."""
    broken: dict[bool, list[str]] = {True: [], False: []}
    first: dict[bool, TextDiff] = {}
    mismatched: list[str] = []
    for name, render in renders.items():
        render = shaped(render, Render)
        trip = as_dict(render.get("roundtrip"))
        if render.get("ok") and trip and not trip.get("ok"):
            cleanup = bool(trip.get("ok_without_cleanup"))
            broken[cleanup].append(name)
            first.setdefault(cleanup, shaped(trip.get("diff"), TextDiff))
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
        example = as_dict(renders[mismatched[0]]).get("template_ids_diff")
        out.append(("warn", f"{_names(mismatched)}: apply_chat_template(tokenize=True) gives other ids than "
                    f"encode(render, add_special_tokens=False) {example}",
                    "tokenize one way only in the pipeline: apply_chat_template(tokenize=True), or "
                    "encode(render, add_special_tokens=False) (a template that writes BOS itself "
                    "gets a second BOS from add_special_tokens=True)"))
    return out


def _names(names: list[str]) -> str:
    return ", ".join(repr(n) for n in names)


def _diff_text(diff: TextDiff) -> str:
    return (f"at char {diff.get('offset')}: expected {around(diff, 'expected', 40)!r}, "
            f"got {around(diff, 'got', 40)!r}")


def _marker_problems(markers: MarkersFacts | None) -> list[Problem]:
    out: list[Problem] = []
    broken = [m for m in as_list(as_dict(markers).get("items")) if not as_dict(m).get("single")]
    if broken:
        shown = ", ".join(f"{m.get('text')} -> {len(as_list(m.get('ids')))} tokens {as_list(m.get('ids'))}" for m in broken)
        out.append(("fail", f"turn markers are not single tokens: {shown}",
                    "this template does not belong to this tokenizer: use the model's own chat template, "
                    "or add the markers as special tokens (tokenizer.add_special_tokens) only if the model "
                    "was trained with them"))
    return out


def _variant_problems(template: TemplateFacts, renders: dict[str, Render]) -> list[Problem]:
    out: list[Problem] = []
    tools = as_dict(renders.get("tools"))
    if tools.get("ok") and tools.get("tool_rendered") is False:
        out.append(("warn", "the template takes tools but the rendered prompt does not name the tool",
                    "check how the template expects tools (tools=[{'type': 'function', 'function': ...}])"))
    if template.get("thinking_switch") and template.get("switch_changes_render") is False:
        out.append(("warn", f"the template reads {template['thinking_switch']!r} but on and off render the same",
                    None))
    return out


def _markers_note(markers: MarkersFacts | None) -> str:
    items = as_list(as_dict(markers).get("items"))
    if not items:
        return "no turn markers found"
    plain = [m.get("text") for m in items if not m.get("special")]
    note = f"{len(items)} markers, each a single token"
    return note + (f" (not flagged special: {', '.join(plain)})" if plain else ", all special")
