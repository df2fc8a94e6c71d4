"""The special tokens a tiktoken bundle's Python code defines, as an id table, read statically.

Runs on the host: standard library only, Python 3.8+. A tiktoken ranks file holds the
base vocabulary only; the specials live in the tokenizer's code. Which code: the
``auto_map`` AutoTokenizer class (tokenizer_config.json, else config.json), else every
tokenizer module of the dir (``*.py`` with "token" in the name: ``tokenization_qwen.py``,
``qwen_tokenizer.py``, Meta's ``tokenizer.py``). Each is read by
:mod:`introspect.remote.facts.tokenizer.static_specials`, never imported. The table, by form:

* explicit ids (a dict literal, Qwen's enumerate pairs) as written;
* Meta's named list then ``f"<|reserved_special_token_{2 + i}|>"`` up to
  ``num_reserved_special_tokens``, from the base up (llama_models/llama3/tokenizer.py);
* Kimi's reserved range ``base .. base + num_reserved_special_tokens (+ extra) - 1``,
  named by tokenizer_config.json's added_tokens_decoder, else the ``{id}`` placeholder.

Nothing here raises.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

from ...contract import DEFAULT_JSON_CAP, as_dict
from ...readers import read_json_capped
from ..model.custom_code import class_reference, module_file
from ..model.static_code import Scanner
from . import static_specials

MAX_MODULES = 8
FORM_RESERVED_RANGE = "reserved-range"


def code_specials(path: str, config: Dict[str, Any], base: int) -> Optional[Dict[str, Any]]:
    """None when the dir has no tokenizer code; else {"table": {id: token}, "named": {attr: pair},
    "form", "files": [read], "unresolved": [file:line], "auto_map": bool}."""
    candidates, auto_map = _candidates(path, config)
    if not candidates:
        return None
    files: List[str] = []
    unresolved: List[str] = []
    for rel, cls in candidates:
        facts, _errors = static_specials.scan_specials(path, rel, cls, DEFAULT_JSON_CAP, with_unresolved=True)
        files.extend(f for f in facts.get("files_read") or [] if f not in files)
        unresolved.extend(facts.get("unresolved") or [])
        table, form = _table(facts, base, config)
        if table:
            named = _named(facts.get("named_ids") or {}, table)
            return {"table": table, "named": named, "form": form, "files": files, "unresolved": [],
                    "auto_map": auto_map}
    return {"table": {}, "named": {}, "form": None, "files": files, "unresolved": unresolved, "auto_map": auto_map}


def _candidates(path: str, config: Dict[str, Any]) -> Tuple[List[Tuple[str, Optional[str]]], bool]:
    """[(module file, class name or None)], and whether an auto_map names the class."""
    ref = _auto_map_ref(path, config)
    if ref is not None:
        parsed = class_reference(ref)
        if parsed is None or parsed.repo is not None:
            return [], True  # code from another repo, or no usable reference: not in this dir
        return [(module_file(parsed.module), parsed.name)], True
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return [], False
    modules = [n for n in names if n.endswith(".py") and "token" in n.lower()
               and os.path.isfile(os.path.join(path, n))][:MAX_MODULES]
    out: List[Tuple[str, Optional[str]]] = []
    for rel in modules:
        # Each class of the module first (Meta's count is a class attribute), then the module itself.
        module = Scanner(path, DEFAULT_JSON_CAP).load(rel)
        out.extend((rel, name) for name in (module.classes if module is not None else {}))
        out.append((rel, None))
    return out, False


def _auto_map_ref(path: str, config: Dict[str, Any]) -> Optional[str]:
    """The AutoTokenizer reference, the fast one first as transformers 5 prefers it
    (https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/models/auto/tokenization_auto.py#L951)."""
    value = as_dict(config.get("auto_map")).get("AutoTokenizer")
    if not value:
        model_config, _err = read_json_capped(os.path.join(path, "config.json"), DEFAULT_JSON_CAP)
        value = as_dict(as_dict(model_config).get("auto_map")).get("AutoTokenizer")
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        refs = [v for v in reversed(list(value)[:2]) if isinstance(v, str) and v]
        return refs[0] if refs else None
    return None


def _table(facts: Dict[str, Any], base: int, config: Dict[str, Any]) -> Tuple[Dict[int, str], Optional[str]]:
    """{id: token} and its form; empty when the code declares no table this can read."""
    table: Dict[int, str] = {}
    reserved = as_dict(facts.get("reserved"))
    count = reserved.get("count") if isinstance(reserved.get("count"), int) else None
    named = facts.get("named_specials")
    placeholder = as_dict(facts.get("placeholder"))
    template = placeholder.get("template")
    form: Optional[str] = None
    if isinstance(named, list):
        form = "named-list"
        for index in range(count if count is not None else len(named)):
            if index < len(named):
                table[base + index] = named[index]
            elif isinstance(template, str) and placeholder.get("mode") == "index":
                table[base + index] = template.replace("{id}", str((placeholder.get("offset") or 0) + index - len(named)))
    elif count is not None and isinstance(template, str) and placeholder.get("mode") == "id":
        form = FORM_RESERVED_RANGE
        names = _added_tokens_decoder(config)
        for token_id in range(base, base + count + (reserved.get("extra") or 0)):
            table[token_id] = names.get(token_id, template.replace("{id}", str(token_id)))
    for token, token_id in as_dict(facts.get("special_token_ids")).items():
        if isinstance(token_id, int) and token_id not in table:
            table[token_id] = token
            form = form or "explicit-ids"
    return table, form


def _added_tokens_decoder(config: Dict[str, Any]) -> Dict[int, str]:
    out: Dict[int, str] = {}
    for key, entry in as_dict(config.get("added_tokens_decoder")).items():
        content = entry.get("content") if isinstance(entry, dict) else entry
        if isinstance(content, str) and str(key).isdigit():
            out[int(key)] = content
    return out


def _named(named_ids: Dict[str, str], table: Dict[int, str]) -> Dict[str, Any]:
    by_token = {token: token_id for token_id, token in table.items()}
    out: Dict[str, Any] = dict.fromkeys(("bos", "eos", "pad", "unk"))
    for attr, token in named_ids.items():
        if attr in out and token in by_token:
            out[attr] = {"token": token, "id": by_token[token]}
    return out
