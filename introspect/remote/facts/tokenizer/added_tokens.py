"""The one added-tokens check: every token the files name must round-trip through the loaded tokenizer.

Runs on the host inside an isolated tokenizer process (standard library, Python
3.8+). The files are the ground truth: an automatic fast conversion that shifts
special ids (Kimi's ``</think>`` decoding to the wrong token) shows up here. Both
the tokenizer task (the probe's profile) and the preflight task use this module;
they differ only in what they ask for (which files, whether ``encode`` is checked,
whether every item or only mismatches come back).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ...contract import TOKENIZER_JSON_CAP, AddedTokenItem, AddedTokensCheck
from ...readers import read_json_capped
from ..guards import value_or_error

TOKENIZER_CONFIG = "tokenizer_config.json"  # added_tokens_decoder: {"<id>": {"content", ...}}
TOKENIZER_JSON = "tokenizer.json"  # added_tokens: [{"id", "content", ...}]

Expected = Dict[int, Tuple[str, str]]  # id -> (content, the file that names it)


def expected_tokens(model_path: str, sources: Sequence[str], cap: int) -> Optional[Expected]:
    """id -> (content, file) from the raw files, later sources winning; None when none lists tokens.

    tokenizer.json is read with its own, larger cap (real ones reach 33 MB).
    """
    found: Optional[Expected] = None
    for source in sources:
        path = os.path.join(model_path, source)
        if source == TOKENIZER_JSON:
            doc, err = read_json_capped(path, max(cap, TOKENIZER_JSON_CAP))
            entries = doc.get("added_tokens") if err is None else None
            if isinstance(entries, list):
                found = {} if found is None else found
                found.update(_from_list(entries))
        else:
            config, err = read_json_capped(path, cap)
            decoder = config.get("added_tokens_decoder") if err is None else None
            if isinstance(decoder, dict):
                found = {} if found is None else found
                found.update(_from_decoder(decoder, source))
    return found


def _from_list(entries: List[Any]) -> Expected:
    out: Expected = {}
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("id"), int) and isinstance(entry.get("content"), str):
            out[entry["id"]] = (entry["content"], TOKENIZER_JSON)
    return out


def _from_decoder(decoder: Dict[Any, Any], source: str) -> Expected:
    out: Expected = {}
    for key, entry in decoder.items():
        content = entry.get("content") if isinstance(entry, dict) else entry
        token_id = _int_key(key)
        if token_id >= 0 and isinstance(content, str):
            out[token_id] = (content, source)
    return out


def _int_key(key: Any) -> int:
    try:
        return int(key)
    except (TypeError, ValueError):
        return -1


def check_token(tok: Any, token_id: int, expected: str, encode: bool) -> AddedTokenItem:
    """One id both ways and decoded (and, with ``encode``, ``encode(token)`` must be ``[id]``)."""
    item = AddedTokenItem(
        id=token_id,
        expected=expected,
        id_to_token=value_or_error(lambda: tok.convert_ids_to_tokens(token_id)),
        token_to_id=value_or_error(lambda: tok.convert_tokens_to_ids(expected)),
        decoded=value_or_error(lambda: tok.decode([token_id])),
    )
    ok = item["id_to_token"] == expected and item["token_to_id"] == token_id and item["decoded"] == expected
    if encode:
        # What a data pipeline calls: plain encode, no special tokens added around it.
        item["encoded"] = value_or_error(lambda: list(tok.encode(expected, add_special_tokens=False)))
        ok = ok and item["encoded"] == [token_id]
    item["ok"] = ok
    return item


def check_added_tokens(tok: Any, expected: Expected, *, encode: bool, max_checked: Optional[int] = None,
                       mismatches_only: bool = False, max_items: Optional[int] = None) -> AddedTokensCheck:
    """The check over ``expected`` (ids in order, the first ``max_checked``).

    ``mismatches_only``: items are the failing ones (the first ``max_items``), each with
    its ``source`` file, and ``sources`` lists the files read; else every item comes back.
    Neither cap is silent: ``checked_total`` is how many ids the files name (``checked``
    the first of them), ``items_total`` how many items the uncut list holds over the
    checked ids; each with its ``_truncated`` flag.
    """
    named = sorted(expected)
    ids = named[:max_checked] if max_checked is not None else named
    items: List[AddedTokenItem] = []
    bad = 0
    for token_id in ids:
        content, source = expected[token_id]
        item = check_token(tok, token_id, content, encode)
        bad += not item["ok"]
        if mismatches_only and item["ok"]:
            continue
        if mismatches_only:
            item["source"] = source
        items.append(item)
    out = AddedTokensCheck()
    if mismatches_only:
        out["sources"] = sorted(set(source for _content, source in expected.values()))
    out["checked"], out["mismatches"] = len(ids), bad
    out["checked_total"], out["checked_truncated"] = len(named), len(ids) < len(named)
    out["items"] = items[:max_items] if max_items is not None else items
    out["items_total"], out["items_truncated"] = len(items), len(out["items"]) < len(items)
    return out
