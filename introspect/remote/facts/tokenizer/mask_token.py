"""Preflight: the tokenizer's mask token, else unused ids a drafter could use as one.

Runs on the host inside the isolated preflight tokenizer process (standard library,
Python 3.8+).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Set

from ..guards import safe_get
from .loaded_tokenizer import named_token
from .turn_markers import added_vocab

RESERVED_SCAN = 4096  # ids at the top of the vocabulary searched for placeholders
_RESERVED = re.compile(r"reserved|unused", re.IGNORECASE)


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
    mask = named_token(tok, "mask")
    present: Optional[Dict[str, Any]] = dict(mask) if mask is not None else None
    if mask is not None and isinstance(mask["id"], int):
        present = _candidate(mask["token"], mask["id"], "mask_token", used, text)
    return {"present": present, "vocab_size": vocab_size, "used_ids": len(used),
            "candidates": _candidates(tok, used, text, vocab_size)}


def _used_ids(template: Dict[str, Any]) -> Set[int]:
    used: Set[int] = set()
    for entry in (template.get("renders") or {}).values():
        used.update(((entry or {}).get("roundtrip") or {}).get("ids") or [])
    return used


def _candidates(tok: Any, used: Set[int], text: str, vocab_size: Optional[int]) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
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


def _candidate(token: str, token_id: int, kind: str, used: Set[int], text: str) -> Dict[str, Any]:
    return {"token": token, "id": token_id, "kind": kind,
            "used_by_template": token_id in used or (bool(token) and token in text)}


def _reserved(tok: Any, used: Set[int], text: str, taken: Set[int]) -> List[Dict[str, Any]]:
    """Placeholder tokens (<|reserved_token_N|>, [unused0]...) among added tokens and the top ids."""
    found: Dict[int, str] = {}
    for token, token_id in added_vocab(tok).items():
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

