"""Preflight: the chat template of the loaded tokenizer, rendered every way a pipeline calls it.

Runs on the host inside the isolated preflight tokenizer process (standard library at
import time, Python 3.8+); every function takes the loaded tokenizer. Each render is
round-tripped (encode, decode) and compared with ``apply_chat_template(tokenize=True)``.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional, Tuple

from ...limits import LimitExceeded, budget
from ...readers import sha256_text
from ..guards import exception_record, safe_get

SNIPPET = 60  # characters either side of a difference shown as evidence
RESERVED_SCAN = 4096  # ids at the top of the vocabulary searched for placeholders
# The conversation the issue names: system, user, assistant, user. Non-ASCII on
# purpose: a byte-level tokenizer that cannot round-trip UTF-8 must show it here.
CONVERSATION = [
    {"role": "system", "content": "You are a careful assistant."},
    {"role": "user", "content": "What is 2 + 2? Answer briefly (café, 中文)."},
    {"role": "assistant", "content": "2 + 2 = 4."},
    {"role": "user", "content": "And 3 + 3?"},
]
# Two assistant turns, ending on one: what an assistant-only loss mask must locate.
MASK_CONVERSATION = CONVERSATION + [{"role": "assistant", "content": "3 + 3 = 6."}]
REASONING = ["Two plus two.", "Three plus three."]
TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}]
THINKING_SWITCHES = ("enable_thinking", "thinking")
_GENERATION_TAG = re.compile(r"\{%-?\s*generation\s*-?%\}")
_GENERATION_TAGS = re.compile(r"\{%-?\s*(?:end)?generation\s*-?%\}")


def describe_template(tok: Any) -> Dict[str, Any]:
    """What the template is and which switches it takes.

    ``{"present", "sha256", "variables": [...], "uses_tools", "thinking_switch": name | null,
       "generation_markers", "mentions_reasoning", "source", "name", "renders": {...}}`` (renders
    filled by render_all; ``source``: the file it came from, ``name``: the named template rendered)
    """
    text = getattr(tok, "chat_template", None)
    name: Optional[str] = None
    if isinstance(text, dict):  # named templates: "default" is what a plain call renders
        keys = [str(key) for key in text]
        name = "default" if text.get("default") else (keys[0] if keys else None)
        text = text.get("default") or next(iter(text.values()), None)
    if not isinstance(text, str) or not text:
        return {"present": False}
    variables = template_variables(text)
    switch = next((name for name in THINKING_SWITCHES if name in variables), None)
    return {"present": True, "sha256": sha256_text(text), "chars": len(text), "variables": variables,
            "uses_tools": "tools" in variables, "thinking_switch": switch,
            "generation_markers": bool(_GENERATION_TAG.search(text)),
            "mentions_reasoning": "reasoning_content" in text, "text": text, "renders": {},
            "source": template_source(str(getattr(tok, "name_or_path", "") or "")), "name": name}


def template_source(model_dir: str) -> Optional[str]:
    """The file a tokenizer's template comes from: transformers reads chat_template.jinja when the
    dir has one, over tokenizer_config.json's "chat_template"
    (https://github.com/huggingface/transformers/blob/main/src/transformers/tokenization_utils_base.py,
    CHAT_TEMPLATE_FILE). Only names are looked at; no file is read."""
    for name in ("chat_template.jinja", "tokenizer_config.json"):
        if model_dir and os.path.isfile(os.path.join(model_dir, name)):
            return name
    return None


def template_variables(text: str) -> List[str]:
    """The template's free variables (jinja2's AST), e.g. messages, tools, thinking."""
    try:
        import jinja2
        from jinja2 import meta
    except ImportError:  # no jinja2: transformers cannot render either; words are a fair guess
        return sorted(set(re.findall(r"\b(tools|thinking|enable_thinking|add_generation_prompt)\b", text)))
    # {% generation %} is transformers' own tag; plain jinja2 does not know it.
    source = _GENERATION_TAGS.sub("", text)
    env = jinja2.Environment(extensions=["jinja2.ext.loopcontrols", "jinja2.ext.do"])
    return sorted(meta.find_undeclared_variables(env.parse(source)))


def render(tok: Any, messages: List[Dict[str, Any]], **kwargs: Any) -> str:
    # Bounded in memory and time: a template can grow a string or a list without end.
    with budget("the chat template's render"):
        out = tok.apply_chat_template(messages, tokenize=False, **kwargs)
    if isinstance(out, list) and len(out) == 1:
        out = out[0]
    if not isinstance(out, str):
        raise TypeError("apply_chat_template(tokenize=False) returned %s, not text" % type(out).__name__)
    return out


def template_ids(tok: Any, messages: List[Dict[str, Any]], **kwargs: Any) -> List[int]:
    """apply_chat_template(tokenize=True) as ids: transformers 5 returns a BatchEncoding."""
    with budget("the chat template's render"):
        out = tok.apply_chat_template(messages, tokenize=True, **kwargs)
    if hasattr(out, "keys") and "input_ids" in out:
        out = out["input_ids"]
    if isinstance(out, list) and out and isinstance(out[0], list):
        out = out[0]
    return [int(i) for i in out]


def _variants(template: Dict[str, Any]) -> List[Tuple[str, Dict[str, Any]]]:
    variants: List[Tuple[str, Dict[str, Any]]] = [("conversation", {"add_generation_prompt": False}),
                ("generation_prompt", {"add_generation_prompt": True})]
    if template.get("uses_tools"):
        variants.append(("tools", {"add_generation_prompt": True, "tools": TOOLS}))
    switch = template.get("thinking_switch")
    if switch:
        variants.append(("thinking_on", {"add_generation_prompt": True, switch: True}))
        variants.append(("thinking_off", {"add_generation_prompt": True, switch: False}))
    return variants


def render_all(tok: Any, template: Dict[str, Any]) -> None:
    """Render every variant; each also round-trips and is compared with tokenize=True.

    renders[name] = {"ok", "chars", "tail", "error", "roundtrip": {...}, "template_ids_match",
                     "ids": [...]}; plus "generation_prompt_text" and "switch_changes_render".
    """
    renders = template["renders"]
    for name, kwargs in _variants(template):
        renders[name] = _render_one(tok, kwargs)
        limit = renders[name].pop("limit", None)
        if limit is not None:
            # One render past a limit is the template's verdict: every other render, and the masks'
            # own, would run into the same one (up to 512 MiB and 20 s each), so none is tried.
            template["runaway"] = dict(limit, variant=name)
            break
    conv, gen = renders.get("conversation") or {}, renders.get("generation_prompt") or {}
    if conv.get("ok") and gen.get("ok") and gen["text"].startswith(conv["text"]):
        template["generation_prompt_text"] = gen["text"][len(conv["text"]):]
    if "tools" in renders and renders["tools"].get("ok"):
        renders["tools"]["tool_rendered"] = "get_weather" in renders["tools"]["text"]
    on, off = renders.get("thinking_on"), renders.get("thinking_off")
    if on and off and on.get("ok") and off.get("ok"):
        template["switch_changes_render"] = on["text"] != off["text"]


def _render_one(tok: Any, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    entry: Dict[str, Any] = {"ok": False, "error": None}
    try:
        text = render(tok, CONVERSATION, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - a template may raise anything
        if isinstance(exc, KeyboardInterrupt):
            raise
        entry["error"] = exception_record(exc)
        if isinstance(exc, LimitExceeded):
            entry["limit"] = {"cause": exc.cause, "message": str(exc)}
        return entry
    entry.update({"ok": True, "text": text, "chars": len(text), "tail": text[-200:]})
    entry["roundtrip"] = safe_get(lambda: roundtrip(tok, text))
    ids = (entry["roundtrip"] or {}).get("ids") or []
    try:
        direct = template_ids(tok, CONVERSATION, **kwargs)
        entry["template_ids_match"] = direct == ids
        if direct != ids:
            entry["template_ids_diff"] = _first_diff_ids(direct, ids)
    except Exception as exc:  # noqa: BLE001
        entry["template_ids_match"] = None
        entry["template_ids_error"] = exception_record(exc)
        if isinstance(exc, LimitExceeded):
            entry["limit"] = {"cause": exc.cause, "message": str(exc)}
    return entry


def roundtrip(tok: Any, text: str) -> Dict[str, Any]:
    """encode(text) then decode: plain calls first, then without clean-up, to name the fix."""
    ids = [int(i) for i in tok.encode(text, add_special_tokens=False)]
    plain = tok.decode(ids)
    out: Dict[str, Any] = {"ok": plain == text, "tokens": len(ids), "ids": ids}
    if plain != text:
        out["diff"] = first_diff(text, plain)
        out["ok_without_cleanup"] = False
        # Only a difference in spaces (" ." -> ".") can be decode's clean-up; anything else
        # is a real mismatch, whatever another decode path (keyword arguments) returns.
        if "".join(plain.split()) == "".join(text.split()):
            out["ok_without_cleanup"] = tok.decode(ids, clean_up_tokenization_spaces=False) == text
    return out


def first_diff(expected: str, got: str) -> Dict[str, Any]:
    index = next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b),  # noqa: B905 - 3.8
                 min(len(expected), len(got)))
    lo = max(0, index - SNIPPET)
    return {"offset": index, "expected": expected[lo:index + SNIPPET], "got": got[lo:index + SNIPPET]}


def _first_diff_ids(a: List[int], b: List[int]) -> Dict[str, Any]:
    index = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))  # noqa: B905
    return {"offset": index, "template": a[max(0, index - 4):index + 4], "encode": b[max(0, index - 4):index + 4],
            "template_len": len(a), "encode_len": len(b)}

