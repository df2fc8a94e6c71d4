"""Preflight, chat-template part: renders, round trips, turn markers, loss masks, mask token.

Runs on the host inside the isolated preflight tokenizer process (standard library at
import time, Python 3.8+); every function takes the loaded tokenizer.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Optional, Tuple

from introspect.remote import common

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
_RESERVED = re.compile(r"reserved|unused", re.IGNORECASE)
# Marker-looking strings a template may emit as plain text (so a tokenizer that lacks
# them as added tokens splits them into pieces): <|x|>, <｜x｜>, [INST], <s>, <start_of_turn>.
_MARKER_LIKE = (
    r"<\|[^|<>\s]{1,48}\|>",
    "<\uff5c[^\uff5c<>]{1,48}\uff5c>",
    r"\[/?(?:INST|SYS|SYSTEM_PROMPT|AVAILABLE_TOOLS|TOOL_CALLS|TOOL_RESULTS)\]",
    r"</?s>",
    r"<(?:start|end)_of_turn>",
)


def safe_get(get: Callable[[], Any]) -> Any:
    try:
        return get()
    except Exception as exc:  # noqa: BLE001 - one fact lost, the others stand
        return {"error": exception_record(exc)}


def named_token(tok: Any, name: str) -> Optional[Dict[str, Any]]:
    token = getattr(tok, name + "_token", None)
    if token is None:
        return None
    token_id = getattr(tok, name + "_token_id", None)
    return {"token": str(token), "id": token_id if isinstance(token_id, int) else None}


def exception_record(exc: BaseException) -> Dict[str, Any]:
    message = str(exc)
    return {"type": type(exc).__name__, "message": message if len(message) <= 500 else message[:497] + "..."}


def value_or_error(get: Callable[[], Any]) -> Any:
    try:
        value = get()
    except Exception as exc:  # noqa: BLE001
        return {"error": "%s: %s" % (type(exc).__name__, str(exc)[:200])}
    if isinstance(value, (str, int, list)) or value is None:
        return value
    return str(value)


# ---------------------------------------------------------------- chat template


def describe_template(tok: Any) -> Dict[str, Any]:
    """What the template is and which switches it takes.

    ``{"present", "sha256", "variables": [...], "uses_tools", "thinking_switch": name | null,
       "generation_markers", "mentions_reasoning", "renders": {...}}`` (renders filled by render_all)
    """
    text = getattr(tok, "chat_template", None)
    if isinstance(text, dict):  # named templates: "default" is what a plain call renders
        text = text.get("default") or next(iter(text.values()), None)
    if not isinstance(text, str) or not text:
        return {"present": False}
    variables = template_variables(text)
    switch = next((name for name in THINKING_SWITCHES if name in variables), None)
    return {"present": True, "sha256": common.sha256_text(text), "chars": len(text), "variables": variables,
            "uses_tools": "tools" in variables, "thinking_switch": switch,
            "generation_markers": bool(_GENERATION_TAG.search(text)),
            "mentions_reasoning": "reasoning_content" in text, "text": text, "renders": {}}


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
    out = tok.apply_chat_template(messages, tokenize=False, **kwargs)
    if isinstance(out, list) and len(out) == 1:
        out = out[0]
    if not isinstance(out, str):
        raise TypeError("apply_chat_template(tokenize=False) returned %s, not text" % type(out).__name__)
    return out


def template_ids(tok: Any, messages: List[Dict[str, Any]], **kwargs: Any) -> List[int]:
    """apply_chat_template(tokenize=True) as ids: transformers 5 returns a BatchEncoding."""
    out = tok.apply_chat_template(messages, tokenize=True, **kwargs)
    if hasattr(out, "keys") and "input_ids" in out:
        out = out["input_ids"]
    if isinstance(out, list) and out and isinstance(out[0], list):
        out = out[0]
    return [int(i) for i in out]


def _variants(template: Dict[str, Any]) -> List[Tuple[str, Dict[str, Any]]]:
    variants = [("conversation", {"add_generation_prompt": False}),
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
    conv, gen = renders.get("conversation") or {}, renders.get("generation_prompt") or {}
    if conv.get("ok") and gen.get("ok") and gen["text"].startswith(conv["text"]):
        template["generation_prompt_text"] = gen["text"][len(conv["text"]):]
    if "tools" in renders and renders["tools"].get("ok"):
        renders["tools"]["tool_rendered"] = "get_weather" in renders["tools"]["text"]
    on, off = renders.get("thinking_on"), renders.get("thinking_off")
    if on and off and on.get("ok") and off.get("ok"):
        template["switch_changes_render"] = on["text"] != off["text"]


def _render_one(tok: Any, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    entry = {"ok": False, "error": None}  # type: Dict[str, Any]
    try:
        text = render(tok, CONVERSATION, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - a template may raise anything
        if isinstance(exc, KeyboardInterrupt):
            raise
        entry["error"] = exception_record(exc)
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
    return entry


def roundtrip(tok: Any, text: str) -> Dict[str, Any]:
    """encode(text) then decode: plain calls first, then without clean-up, to name the fix."""
    ids = [int(i) for i in tok.encode(text, add_special_tokens=False)]
    plain = tok.decode(ids)
    out = {"ok": plain == text, "tokens": len(ids), "ids": ids}  # type: Dict[str, Any]
    if plain != text:
        out["diff"] = _first_diff(text, plain)
        out["ok_without_cleanup"] = False
        # Only a difference in spaces (" ." -> ".") can be decode's clean-up; anything else
        # is a real mismatch, whatever another decode path (keyword arguments) returns.
        if "".join(plain.split()) == "".join(text.split()):
            out["ok_without_cleanup"] = tok.decode(ids, clean_up_tokenization_spaces=False) == text
    return out


def _first_diff(expected: str, got: str) -> Dict[str, Any]:
    index = next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b),  # noqa: B905 - 3.8
                 min(len(expected), len(got)))
    lo = max(0, index - SNIPPET)
    return {"offset": index, "expected": expected[lo:index + SNIPPET], "got": got[lo:index + SNIPPET]}


def _first_diff_ids(a: List[int], b: List[int]) -> Dict[str, Any]:
    index = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))  # noqa: B905
    return {"offset": index, "template": a[max(0, index - 4):index + 4], "encode": b[max(0, index - 4):index + 4],
            "template_len": len(a), "encode_len": len(b)}


# ---------------------------------------------------------------- turn markers


def find_markers(tok: Any, template: Dict[str, Any]) -> Dict[str, Any]:
    """The marker strings the template emits around the message contents, and their ids.

    ``{"items": [{"text", "ids", "single", "special", "added"}], "end_of_turn": null | {"text", "id"},
       "source_render"}``. The end of turn is the first marker after the assistant's content.
    """
    renders = template.get("renders") or {}
    name = next((n for n in ("conversation", "generation_prompt") if (renders.get(n) or {}).get("ok")), None)
    if name is None:
        return {"items": [], "end_of_turn": None, "source_render": None}
    segments, after_assistant = _envelope(renders[name]["text"])
    pattern = _marker_pattern(tok)
    added = _added_vocab(tok)
    special_ids = safe_get(lambda: list(tok.all_special_ids))
    specials = set(special_ids) if isinstance(special_ids, list) else set()
    seen = {}  # type: Dict[str, Dict[str, Any]]
    for segment in segments:
        for match in pattern.finditer(segment):
            text = match.group(0)
            if text not in seen:
                seen[text] = _marker(tok, text, added, specials)
    end = None
    if after_assistant is not None:
        first = pattern.search(after_assistant)
        if first:
            marker = seen.get(first.group(0)) or _marker(tok, first.group(0), added, specials)
            end = {"text": marker["text"], "id": marker["ids"][0] if marker["single"] else None,
                   "single": marker["single"]}
    return {"items": list(seen.values()), "end_of_turn": end, "source_render": name}


def _envelope(text: str) -> Tuple[List[str], Optional[str]]:
    """The render cut at the message contents: the template's own text, and what follows the assistant."""
    segments, rest, after_assistant = [], text, None
    for message in CONVERSATION:
        content = message["content"]
        index = rest.find(content)
        if index < 0:
            continue  # the template transformed the content; its envelope stays in the next cut
        segments.append(rest[:index])
        rest = rest[index + len(content):]
        if message["role"] == "assistant":
            after_assistant = rest
    segments.append(rest)
    return segments, after_assistant


def _added_vocab(tok: Any) -> Dict[str, int]:
    try:
        vocab = tok.get_added_vocab()
    except Exception:  # noqa: BLE001
        return {}
    return dict(vocab) if isinstance(vocab, dict) else {}


def _marker_pattern(tok: Any) -> Any:
    # Longest first, so <|im_end|> is never read as a shorter added token inside it.
    added = sorted((t for t in _added_vocab(tok) if t.strip()), key=len, reverse=True)
    alternatives = [re.escape(t) for t in added] + list(_MARKER_LIKE)
    return re.compile("|".join(alternatives))


def _marker(tok: Any, text: str, added: Dict[str, int], specials: set) -> Dict[str, Any]:
    ids = value_or_error(lambda: [int(i) for i in tok.encode(text, add_special_tokens=False)])
    ids = ids if isinstance(ids, list) else []
    single = len(ids) == 1
    special = single and (ids[0] in specials or _added_special(tok, ids[0]))
    return {"text": text, "ids": ids, "single": single, "special": bool(special), "added": text in added}


def _added_special(tok: Any, token_id: int) -> bool:
    decoder = getattr(tok, "added_tokens_decoder", None) or {}
    entry = decoder.get(token_id)
    return bool(getattr(entry, "special", False))


# ---------------------------------------------------------------- assistant masks


def check_masks(tok: Any, template: Dict[str, Any]) -> Dict[str, Any]:
    """Which way assistant-only loss masks can be built.

    ``{"generation_markers", "assistant_tokens_mask": {"tried", "ok", "masked_tokens", "covers_turns",
       "error"}, "prefix": {conversation name: {"ok", "turns": [{"index", "prompt_prefix",
       "turn_prefix", "prompt_token_prefix", "turn_token_prefix", "ok", "diff"?}]}}}``
    """
    out = {"generation_markers": bool(template.get("generation_markers"))}  # type: Dict[str, Any]
    out["assistant_tokens_mask"] = _assistant_mask(tok) if out["generation_markers"] else {"tried": False}
    conversations = {"plain": MASK_CONVERSATION}
    if template.get("mentions_reasoning"):
        # Thinking models' data carries reasoning; templates that drop older turns'
        # reasoning (Kimi, Qwen3) are not prefix-stable on exactly that data.
        conversations["reasoning"] = _with_reasoning(MASK_CONVERSATION)
    out["prefix"] = {}
    for name, messages in conversations.items():
        out["prefix"][name] = safe_get(lambda messages=messages: prefix_property(tok, messages))
    return out


def _assistant_mask(tok: Any) -> Dict[str, Any]:
    entry = {"tried": True, "ok": False, "masked_tokens": 0, "covers_turns": False, "error": None}  # type: Dict[str, Any]
    try:
        out = tok.apply_chat_template(MASK_CONVERSATION, tokenize=True, return_dict=True,
                                      return_assistant_tokens_mask=True, add_generation_prompt=False)
        ids, mask = list(out["input_ids"]), list(out["assistant_masks"])
        if ids and isinstance(ids[0], list):
            ids, mask = ids[0], mask[0]
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, KeyboardInterrupt):
            raise
        entry["error"] = exception_record(exc)
        return entry
    masked = [i for i, m in zip(ids, mask) if m]  # noqa: B905 - zip(strict=) is 3.10+
    decoded = tok.decode(masked) if masked else ""
    contents = [m["content"] for m in MASK_CONVERSATION if m["role"] == "assistant"]
    entry.update({"masked_tokens": len(masked), "tokens": len(ids), "masked_text": decoded[:300],
                  "covers_turns": all(c in decoded for c in contents)})
    entry["ok"] = bool(masked) and entry["covers_turns"]
    return entry


def _with_reasoning(messages: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    out, turn = [], 0
    for message in messages:
        message = dict(message)
        if message["role"] == "assistant":
            message["reasoning_content"] = REASONING[turn % len(REASONING)]
            turn += 1
        out.append(message)
    return out


def prefix_property(tok: Any, messages: List[Dict[str, Any]]) -> Dict[str, Any]:
    """For each assistant turn k: prompt(:k)+gen ⊑ render(:k+1) ⊑ render(all), as text and as ids.

    When it holds, one render of the whole conversation locates every assistant turn
    (the span between the two prefixes), so one sample carries all turns' losses.
    """
    full = render(tok, messages, add_generation_prompt=False)
    full_ids = tok.encode(full, add_special_tokens=False)
    turns = []
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        prompt = render(tok, messages[:index], add_generation_prompt=True)
        upto = render(tok, messages[:index + 1], add_generation_prompt=False)
        prompt_ids = tok.encode(prompt, add_special_tokens=False)
        upto_ids = tok.encode(upto, add_special_tokens=False)
        turn = {"index": index, "prompt_prefix": upto.startswith(prompt), "turn_prefix": full.startswith(upto),
                "prompt_token_prefix": list(upto_ids[:len(prompt_ids)]) == list(prompt_ids),
                "turn_token_prefix": list(full_ids[:len(upto_ids)]) == list(upto_ids)}
        turn["ok"] = all(turn[k] for k in ("prompt_prefix", "turn_prefix", "prompt_token_prefix",
                                           "turn_token_prefix"))
        if not turn["prompt_prefix"]:
            turn["diff"] = dict(_first_diff(prompt, upto), what="generation prompt vs rendered turn")
        elif not turn["turn_prefix"]:
            turn["diff"] = dict(_first_diff(upto, full), what="conversation cut after this turn vs full render")
        turns.append(turn)
    return {"ok": bool(turns) and all(t["ok"] for t in turns), "turns": turns}


# ---------------------------------------------------------------- mask token


def mask_token(tok: Any, template: Dict[str, Any], config: Dict[str, Any]) -> Dict[str, Any]:
    """The tokenizer's mask token, else unused candidates inside the embedding.

    ``{"present": null | {"token", "id"}, "vocab_size", "used_ids": int,
       "candidates": [{"token", "id", "kind": "unk" | "reserved" | "unassigned-row", "used_by_template"}]}``
    Candidates are listed in order of preference: [UNK] first (what the published Kimi
    K2.5 DFlash drafter uses), then reserved placeholders, then embedding rows no token has.
    """
    used = _used_ids(template)
    text = template.get("text") or ""
    vocab_size = config.get("vocab_size")
    present = named_token(tok, "mask")
    if present is not None and isinstance(present["id"], int):
        present = _candidate(present["token"], present["id"], "mask_token", used, text)
    out = {"present": present, "vocab_size": vocab_size, "used_ids": len(used),
           "candidates": _candidates(tok, used, text, vocab_size)}  # type: Dict[str, Any]
    return out


def _used_ids(template: Dict[str, Any]) -> set:
    used = set()  # type: set
    for entry in (template.get("renders") or {}).values():
        used.update(((entry or {}).get("roundtrip") or {}).get("ids") or [])
    return used


def _candidates(tok: Any, used: set, text: str, vocab_size: Optional[int]) -> List[Dict[str, Any]]:
    out = []  # type: List[Dict[str, Any]]
    taken = set(i for i in (getattr(tok, "pad_token_id", None), getattr(tok, "eos_token_id", None),
                            getattr(tok, "bos_token_id", None)) if isinstance(i, int))
    unk = named_token(tok, "unk")
    if unk and isinstance(unk["id"], int) and unk["id"] not in taken:
        out.append(_candidate(unk["token"], unk["id"], "unk", used, text))
    out.extend(_reserved(tok, used, text, taken))
    size = safe_get(lambda: len(tok))
    if isinstance(size, int) and isinstance(vocab_size, int) and vocab_size > size:
        out.append({"token": None, "id": size, "kind": "unassigned-row", "used_by_template": False})
    return out


def _candidate(token: str, token_id: int, kind: str, used: set, text: str) -> Dict[str, Any]:
    return {"token": token, "id": token_id, "kind": kind,
            "used_by_template": token_id in used or (bool(token) and token in text)}


def _reserved(tok: Any, used: set, text: str, taken: set) -> List[Dict[str, Any]]:
    """Placeholder tokens (<|reserved_token_N|>, [unused0]...) among added tokens and the top ids."""
    found = {}  # type: Dict[int, str]
    for token, token_id in _added_vocab(tok).items():
        if _RESERVED.search(token):
            found[int(token_id)] = token
    size = safe_get(lambda: len(tok))
    if isinstance(size, int):
        ids = list(range(max(0, size - RESERVED_SCAN), size))
        tokens = safe_get(lambda: tok.convert_ids_to_tokens(ids))
        if isinstance(tokens, list):
            for token_id, token in zip(ids, tokens):  # noqa: B905
                if isinstance(token, str) and _RESERVED.search(token):
                    found.setdefault(token_id, token)
    out = []
    for token_id in sorted(found):
        if token_id in taken:
            continue
        item = _candidate(found[token_id], token_id, "reserved", used, text)
        if not item["used_by_template"]:
            out.append(item)
        if len(out) >= 3:
            break
    return out
