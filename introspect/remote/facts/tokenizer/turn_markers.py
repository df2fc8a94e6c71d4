"""Preflight: the marker strings a chat template emits around the messages, and their ids.

Runs on the host inside the isolated preflight tokenizer process (standard library,
Python 3.8+). A marker that the tokenizer splits into several ids is a turn boundary
a data pipeline cannot find by id.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Set, Tuple

from ..guards import safe_get, value_or_error
from .chat_template import CONVERSATION

# Marker-looking strings a template may emit as plain text (so a tokenizer that lacks
# them as added tokens splits them into pieces): <|x|>, <｜x｜>, [INST], <s>, <start_of_turn>.
_MARKER_LIKE = (
    r"<\|[^|<>\s]{1,48}\|>",
    "<\uff5c[^\uff5c<>]{1,48}\uff5c>",
    r"\[/?(?:INST|SYS|SYSTEM_PROMPT|AVAILABLE_TOOLS|TOOL_CALLS|TOOL_RESULTS)\]",
    r"</?s>",
    r"<(?:start|end)_of_turn>",
)



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
    added = added_vocab(tok)
    special_ids = safe_get(lambda: list(tok.all_special_ids))
    specials = set(special_ids) if isinstance(special_ids, list) else set()
    seen: Dict[str, Dict[str, Any]] = {}
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


def added_vocab(tok: Any) -> Dict[str, int]:
    try:
        vocab = tok.get_added_vocab()
    except Exception:  # noqa: BLE001
        return {}
    return dict(vocab) if isinstance(vocab, dict) else {}


def _marker_pattern(tok: Any) -> Any:
    # Longest first, so <|im_end|> is never read as a shorter added token inside it.
    added = sorted((t for t in added_vocab(tok) if t.strip()), key=len, reverse=True)
    alternatives = [re.escape(t) for t in added] + list(_MARKER_LIKE)
    return re.compile("|".join(alternatives))


def _marker(tok: Any, text: str, added: Dict[str, int], specials: Set[int]) -> Dict[str, Any]:
    ids = value_or_error(lambda: [int(i) for i in tok.encode(text, add_special_tokens=False)])
    ids = ids if isinstance(ids, list) else []
    single = len(ids) == 1
    special = single and (ids[0] in specials or _added_special(tok, ids[0]))
    return {"text": text, "ids": ids, "single": single, "special": bool(special), "added": text in added}


def _added_special(tok: Any, token_id: int) -> bool:
    decoder = getattr(tok, "added_tokens_decoder", None) or {}
    entry = decoder.get(token_id)
    return bool(getattr(entry, "special", False))

