"""Facts of a loaded tokenizer: named special tokens, added tokens, the chat template and its file.

Runs on the host inside an isolated tokenizer process (standard library, Python
3.8+); every function takes the loaded tokenizer and reads only its attributes
(and, to name a template's source, the template files).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

from ...limits import budget
from ...readers import read_json_capped, read_text_capped, sha256_text
from ...sections import LoadedChatTemplate, TokenPair
from .tokenizer_load import classify_error

SPECIAL_ATTRIBUTES = ("bos", "eos", "pad", "unk", "mask")
# Characters of template text and of the rendered sample shipped back: real templates are tens
# of KB and the sample conversation renders to a few hundred characters; a 40 MB template or a
# template that renders 500 MB is cut here, on the host, with its true size reported.
TEMPLATE_TEXT_CAP = 1 << 20
SAMPLE_CAP = 1 << 16
# The sample conversation of the profile: system, user, assistant, user, then a prompt.
SAMPLE_MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is 2 + 2?"},
    {"role": "assistant", "content": "2 + 2 = 4."},
    {"role": "user", "content": "And 3 + 3?"},
]



def named_token(tok: Any, name: str) -> Optional[TokenPair]:
    """``tok.<name>_token`` and its id, e.g. name "eos"; None when the tokenizer has none."""
    token = getattr(tok, name + "_token", None)
    if token is None:
        return None
    token_id = getattr(tok, name + "_token_id", None)
    return TokenPair(token=str(token), id=token_id if isinstance(token_id, int) else None)


def with_total(facts: Dict[str, Any], key: str, items: List[Any], cap: Optional[int] = None) -> List[Any]:
    """The first ``cap`` items (all of them without a cap), with ``facts[key + "_total"]`` their
    true count and ``facts[key + "_truncated"]`` whether they were cut: the one shape every
    capped list of the raw facts and the profile has (docs/raw-facts.md, "Capped lists")."""
    kept = items if cap is None else items[:cap]
    facts[key + "_total"], facts[key + "_truncated"] = len(items), len(kept) < len(items)
    return kept


def added_tokens(tokenizer: Any, special_only: bool) -> List[Dict[str, Any]]:
    """``[('token', 'id')]`` of the added tokens (only the special ones with ``special_only``), by id."""
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    out = []
    for token_id, token in decoder.items():
        if special_only and not getattr(token, "special", False):
            continue
        out.append({"token": str(getattr(token, "content", token)), "id": int(token_id)})
    return sorted(out, key=lambda t: t["id"])


def chat_template(tokenizer: Any, path: str, cap: int) -> Optional[LoadedChatTemplate]:
    """The template a plain ``apply_chat_template`` renders, with the file it came from."""
    template = getattr(tokenizer, "chat_template", None)
    names: Optional[List[str]] = None
    if isinstance(template, dict):  # named templates: "default" is what a plain call renders
        names = sorted(str(k) for k in template)
        template = template.get("default") or next(iter(template.values()), None)
    if not isinstance(template, str):
        return None
    out = LoadedChatTemplate(text=template[:TEMPLATE_TEXT_CAP], sha256=sha256_text(template),
                             source=_template_source(template, path, cap), names=names)
    if len(template) > TEMPLATE_TEXT_CAP:
        out["size"], out["truncated"] = len(template), True
    return out


def _template_source(text: str, path: str, cap: int) -> str:
    """Which file the loaded template came from, by content; else the attribute itself."""
    jinja = os.path.join(path, "chat_template.jinja")
    if os.path.isfile(jinja) and read_text_capped(jinja, cap)[0] == text:
        return "chat_template.jinja"
    extra = os.path.join(path, "additional_chat_templates")
    if os.path.isdir(extra):
        for name in sorted(os.listdir(extra)):
            if read_text_capped(os.path.join(extra, name), cap)[0] == text:
                return "additional_chat_templates/" + name
    for file in ("tokenizer_config.json", "chat_template.json"):
        value, _ = read_json_capped(os.path.join(path, file), cap)
        if _template_in(value, text):
            return file
    return "tokenizer.chat_template"


def _template_in(config: Any, text: str) -> bool:
    value = config.get("chat_template") if isinstance(config, dict) else None
    if isinstance(value, list):
        return any(isinstance(v, dict) and v.get("template") == text for v in value)
    return value == text



def sample(tokenizer: Any) -> Dict[str, Any]:
    """The sample conversation rendered with a generation prompt (the profile shows it)."""
    if getattr(tokenizer, "chat_template", None) is None:
        return {"text": None, "error": None, "skipped": "no chat template"}
    try:
        # Bounded: a template can grow a string or a list without end (see limits.budget).
        with budget("the render"):
            rendered = tokenizer.apply_chat_template(SAMPLE_MESSAGES, tokenize=False, add_generation_prompt=True)
    except BaseException as exc:  # noqa: BLE001 - a template may raise anything, even SystemExit
        if isinstance(exc, KeyboardInterrupt):
            raise
        return {"text": None, "error": classify_error(exc)}
    if isinstance(rendered, list) and len(rendered) == 1:
        rendered = rendered[0]
    text = rendered if isinstance(rendered, str) else str(rendered)
    out: Dict[str, Any] = {"text": text[:SAMPLE_CAP], "error": None}
    if len(text) > SAMPLE_CAP:
        out.update(size=len(text), truncated=True)
    return out

