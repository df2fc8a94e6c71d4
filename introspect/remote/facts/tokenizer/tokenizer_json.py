"""tokenizer.json, summarised: model type, vocab size, merges, added tokens, pipeline components.

Runs on the host: standard library only, Python 3.8+. Pure (a parsed document in,
a summary out) and never raises on an odd shape; the file itself is read by
:mod:`introspect.remote.facts.tokenizer.tokenizer_files`, which never ships it whole.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional

from ...contract import TokenizerJsonSummary, as_dict


def summarize_tokenizer_json(doc: Dict[str, Any], wanted: Iterable[str] = ()) -> TokenizerJsonSummary:
    """The facts of a parsed tokenizer.json that the profile needs (pure, never raises on shape).

    ``wanted``: token strings to resolve against the model vocab (``vocab_lookup``), so
    a bos/eos that is a plain vocab entry, not an added token, still gets its id.
    """
    model = as_dict(doc.get("model"))
    vocab = model.get("vocab")
    vocab_size: Optional[int] = None
    max_id: Optional[int] = None
    if isinstance(vocab, dict):  # BPE, WordPiece, WordLevel: token -> id
        ids = [v for v in vocab.values() if isinstance(v, int)]
        vocab_size, max_id = len(vocab), (max(ids) if ids else None)
    elif isinstance(vocab, list):  # Unigram: [[piece, score], ...], id = index
        vocab_size, max_id = len(vocab), (len(vocab) - 1 if vocab else None)
    merges = model.get("merges")
    lookup: Dict[str, int] = {}
    for token in wanted:
        if isinstance(vocab, dict) and isinstance(vocab.get(token), int):
            lookup[token] = vocab[token]
        elif isinstance(vocab, list):
            index = next((i for i, p in enumerate(vocab) if isinstance(p, list) and p and p[0] == token), None)
            if index is not None:
                lookup[token] = index
    return {
        "model_type": model.get("type"),
        "vocab_size": vocab_size,
        "max_vocab_id": max_id,
        "merges": len(merges) if isinstance(merges, list) else None,
        "added_tokens": _added_tokens(doc.get("added_tokens")),
        "normalizer": _component_type(doc.get("normalizer"), "normalizers"),
        "pre_tokenizer": _component_type(doc.get("pre_tokenizer"), "pretokenizers"),
        "decoder": _component_type(doc.get("decoder"), "decoders"),
        "post_processor": _post_processor(doc.get("post_processor"), doc.get("added_tokens")),
        "vocab_lookup": lookup,
    }


def _added_tokens(value: Any) -> List[Dict[str, Any]]:
    out = []
    for item in value if isinstance(value, list) else []:
        if isinstance(item, dict) and isinstance(item.get("id"), int):
            out.append({"id": item["id"], "content": item.get("content"), "special": bool(item.get("special"))})
    return out


def _component_type(value: Any, children_key: str) -> Optional[str]:
    if not isinstance(value, dict):
        return None
    kind = str(value.get("type"))
    children = value.get(children_key) or value.get("processors")
    if kind == "Sequence" and isinstance(children, list):
        return "Sequence[%s]" % ",".join(str(c.get("type")) for c in children if isinstance(c, dict))
    return kind


def _post_processor(value: Any, added: Any) -> Optional[Dict[str, Any]]:
    """bos/eos the post-processor adds around a single sequence (TemplateProcessing, Roberta, Bert)."""
    if not isinstance(value, dict):
        return None
    if value.get("type") == "Sequence":
        for child in value.get("processors") or []:
            found = _post_processor(child, added)
            if found is not None and found["type"] != "ByteLevel":
                return found
        return {"type": "Sequence", "single": None, "bos": None, "eos": None}
    kind = value.get("type")
    ids = {t.get("content"): t.get("id") for t in (added if isinstance(added, list) else []) if isinstance(t, dict)}
    if kind == "TemplateProcessing":
        return _template_processing(value, ids)
    if kind in ("RobertaProcessing", "BertProcessing"):
        cls, sep = value.get("cls"), value.get("sep")
        return {
            "type": kind,
            "single": "%s $A %s" % (_pair_token(cls), _pair_token(sep)),
            "bos": _pair(cls),
            "eos": _pair(sep),
        }
    return {"type": kind, "single": None, "bos": None, "eos": None}


def _pair_token(value: Any) -> Optional[str]:
    return value[0] if isinstance(value, list) and value else None


def _pair(value: Any) -> Optional[Dict[str, Any]]:
    if isinstance(value, list) and len(value) == 2:
        return {"token": value[0], "id": value[1]}
    return None


def _template_processing(value: Dict[str, Any], ids: Dict[Any, Any]) -> Dict[str, Any]:
    specials = as_dict(value.get("special_tokens"))
    parts: List[str] = []
    before: List[Any] = []
    after: List[Any] = []
    seen_sequence = False
    for piece in value.get("single") or []:
        if not isinstance(piece, dict):
            continue
        if "Sequence" in piece:
            parts.append("$" + str((piece["Sequence"] or {}).get("id", "A")))
            seen_sequence = True
        elif "SpecialToken" in piece:
            token = (piece["SpecialToken"] or {}).get("id")
            parts.append(str(token))
            (after if seen_sequence else before).append(token)
    return {
        "type": "TemplateProcessing",
        "single": " ".join(parts),
        "bos": _special_ref(before[0], specials, ids) if before else None,
        "eos": _special_ref(after[-1], specials, ids) if after else None,
    }


def _special_ref(token: Any, specials: Dict[str, Any], ids: Dict[Any, Any]) -> Dict[str, Any]:
    entry = as_dict(specials.get(token))
    entry_ids = entry.get("ids")
    token_id = entry_ids[0] if isinstance(entry_ids, list) and entry_ids else ids.get(token)
    return {"token": token, "id": token_id}

