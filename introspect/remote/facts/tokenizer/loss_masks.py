"""Preflight: which way assistant-only loss masks can be built from the chat template.

Runs on the host inside the isolated preflight tokenizer process (standard library,
Python 3.8+): transformers' ``return_assistant_tokens_mask`` (needs ``{% generation %}``
markers), or the prefix property of the renders.
"""

from __future__ import annotations

import functools
from typing import Any, Dict, List

from ...limits import budget
from ..guards import exception_record, safe_get
from .chat_template import MASK_CONVERSATION, REASONING, first_diff, render


def check_masks(tok: Any, template: Dict[str, Any]) -> Dict[str, Any]:
    """Which way assistant-only loss masks can be built.

    ``{"generation_markers", "assistant_tokens_mask": {"tried", "ok", "masked_tokens", "covers_turns",
       "error"}, "prefix": {conversation name: {"ok", "turns": [{"index", "prompt_prefix",
       "turn_prefix", "prompt_token_prefix", "turn_token_prefix", "ok", "diff"?}]}}}``
    """
    out: Dict[str, Any] = {"generation_markers": bool(template.get("generation_markers"))}
    out["assistant_tokens_mask"] = _assistant_mask(tok) if out["generation_markers"] else {"tried": False}
    conversations: Dict[str, List[Dict[str, Any]]] = {"plain": MASK_CONVERSATION}
    if template.get("mentions_reasoning"):
        # Thinking models' data carries reasoning; templates that drop older turns'
        # reasoning (Kimi, Qwen3) are not prefix-stable on exactly that data.
        conversations["reasoning"] = _with_reasoning(MASK_CONVERSATION)
    out["prefix"] = {}
    for name, messages in conversations.items():
        out["prefix"][name] = safe_get(functools.partial(prefix_property, tok, messages))
    return out


def _assistant_mask(tok: Any) -> Dict[str, Any]:
    entry: Dict[str, Any] = {"tried": True, "ok": False, "masked_tokens": 0, "covers_turns": False, "error": None}
    try:
        with budget("the chat template's render"):  # as every render: bounded in memory and time
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
        turn: Dict[str, Any] = {"index": index, "prompt_prefix": upto.startswith(prompt), "turn_prefix": full.startswith(upto),
                "prompt_token_prefix": list(upto_ids[:len(prompt_ids)]) == list(prompt_ids),
                "turn_token_prefix": list(full_ids[:len(upto_ids)]) == list(upto_ids)}
        turn["ok"] = all(turn[k] for k in ("prompt_prefix", "turn_prefix", "prompt_token_prefix",
                                           "turn_token_prefix"))
        if not turn["prompt_prefix"]:
            turn["diff"] = dict(first_diff(prompt, upto), what="generation prompt vs rendered turn")
        elif not turn["turn_prefix"]:
            turn["diff"] = dict(first_diff(upto, full), what="conversation cut after this turn vs full render")
        turns.append(turn)
    return {"ok": bool(turns) and all(t["ok"] for t in turns), "turns": turns}

