"""Mistral's ``tekken.json`` summarised (standard library only, Python 3.8+).

The rules are mistral_common's ``Tekkenizer`` (mistral_common/tokens/tokenizers/tekken.py,
https://github.com/mistralai/mistral-common):

* ``config``: ``pattern``, ``num_vocab_tokens``, ``default_vocab_size`` (the tokenizer's
  n_words, specials included), ``default_num_special_tokens``, ``version`` ("v3", "v7"...).
* Special tokens take ids ``0 .. num_special_tokens - 1``: the file's ``special_tokens``
  list (``{rank, token_str, is_control}``), or, when the file has none and its version
  is v7 or older, ``Tekkenizer.DEPRECATED_SPECIAL_TOKENS``; the ids past the named ones
  are fillers ``<SPECIAL_{id}>``. The BPE ranks follow, shifted by num_special_tokens,
  and only ``default_vocab_size - num_special_tokens`` of them are kept.
* bos/eos/pad/unk are the specials named ``<s>``, ``</s>``, ``<pad>``, ``<unk>``.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Tuple, cast

from ...contract import ErrorRecord, TekkenSummary, error_record
from ...readers import read_text_capped, sha256_text

TEKKEN_CAP = 64 * 1024 * 1024  # the files mistral_common ships are 15-20 MB
FILLER = "<SPECIAL_{id}>"
NAMED = {"bos": "<s>", "eos": "</s>", "pad": "<pad>", "unk": "<unk>"}

# Tekkenizer.DEPRECATED_SPECIAL_TOKENS (ranks 0..19), the specials of files without a
# "special_tokens" list (versions up to v7).
DEPRECATED_SPECIAL_TOKENS = (
    "<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]",
    "[PREFIX]", "[MIDDLE]", "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]",
)
_OLD_VERSIONS = ("v1", "v2", "v3", "v7")


def read_tekken(file: str, cap: int = TEKKEN_CAP) -> Tuple[Optional[TekkenSummary], Optional[ErrorRecord]]:
    """(summary, None) or (None, error record); never raises."""
    text, err = read_text_capped(file, cap)
    if err is not None or text is None:
        return None, err or error_record("unreadable", "%s could not be read" % file, file)
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return None, error_record("malformed-json", "%s: %s" % (file, exc), file)
    summary, problem = summarize_tekken(doc)
    if summary is None:
        return None, error_record("malformed-tekken", "%s: %s" % (file, problem), file)
    summary.update({"file": os.path.basename(file), "size": len(text.encode("utf-8")), "sha256": sha256_text(text)})
    return cast(TekkenSummary, summary), None


def summarize_tekken(doc: Any) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """(summary, None) or (None, why) for a parsed tekken.json (pure)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
        return None, "no \"config\" object: not a tekken file"
    config = doc["config"]
    vocab_size = _int(config.get("default_vocab_size"))
    num_special = _int(config.get("default_num_special_tokens"))
    version = config.get("version") if isinstance(config.get("version"), str) else None
    if vocab_size is None or num_special is None or num_special < 0 or num_special > vocab_size:
        return None, "config lacks default_vocab_size / default_num_special_tokens"
    named, source = _named_specials(doc.get("special_tokens"), version)
    if len(named) > num_special:
        return None, "%d special tokens declared, %d allowed" % (len(named), num_special)
    specials = named + [FILLER.replace("{id}", str(i)) for i in range(len(named), num_special)]
    by_token = {token: i for i, token in enumerate(specials)}
    vocab = doc.get("vocab")
    return {
        "version": version,
        "pattern": config.get("pattern") if isinstance(config.get("pattern"), str) else None,
        "num_vocab_tokens": _int(config.get("num_vocab_tokens")),
        "vocab_entries": len(vocab) if isinstance(vocab, list) else None,
        "default_vocab_size": vocab_size,
        "default_num_special_tokens": num_special,
        "vocab_size": vocab_size,
        "inner_vocab_size": vocab_size - num_special,
        "special_tokens_source": source,
        "named_special_tokens": len(named),
        "special_tokens": [{"token": t, "id": i} for i, t in enumerate(specials)],
        **{attr: ({"token": token, "id": by_token[token]} if token in by_token else None)
           for attr, token in NAMED.items()},
        "multimodal": sorted(k for k in ("image", "audio", "multimodal") if k in doc),
    }, None


def _named_specials(value: Any, version: Optional[str]) -> Tuple[List[str], str]:
    if isinstance(value, list):
        ranked = sorted((t for t in value if isinstance(t, dict) and isinstance(t.get("token_str"), str)),
                        key=lambda t: _int(t.get("rank")) or 0)
        return [t["token_str"] for t in ranked], "tekken.json special_tokens"
    if version is None or version in _OLD_VERSIONS:
        return list(DEPRECATED_SPECIAL_TOKENS), "Tekkenizer.DEPRECATED_SPECIAL_TOKENS"
    # mistral_common refuses such a file (newer versions must list their specials).
    return [], "none (version %s lists no special_tokens)" % version


def _int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
