"""Tokenizer files too large to load: found by size before transformers reads them whole.

Runs on the host inside the isolated tokenizer process (standard library, Python 3.8+).
``AutoTokenizer.from_pretrained`` reads each of these files whole (the tokenizers library
parses tokenizer.json in one serde_json pass, about twice the file in memory), so a 1 GiB
``tokenizer.json`` costs gigabytes before any check of ours could run. Each file gets the
cap its own reader in the files probe has, so the two probes agree on what is too large,
and ``--max-json-bytes`` raises both.
"""

from __future__ import annotations

import os
import stat
from typing import List, Optional, Tuple

from ...contract import TIKTOKEN_CAP, TOKENIZER_JSON_CAP, TokenizerError
from ...limits import size_text
from .sentencepiece_model import SENTENCEPIECE_CAP
from .tokenizer_vocab_files import is_sentencepiece_name

# Summarised on the host, never shipped: the larger cap (tokenizer_files reads tokenizer.json with it).
_VOCAB_FILES = ("tokenizer.json", "tekken.json", "vocab.json", "merges.txt", "vocab.txt")
# Read as small JSON or text by the loader and by the files probe (json_cap).
_CONFIG_FILES = ("tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "chat_template.json",
                 "chat_template.jinja", "config.json")


def _cap(name: str, json_cap: int) -> Optional[int]:
    if name in _VOCAB_FILES:
        return max(json_cap, TOKENIZER_JSON_CAP)
    if name in _CONFIG_FILES:
        return json_cap
    if name == "tiktoken.model" or name.endswith(".tiktoken"):
        return TIKTOKEN_CAP
    if is_sentencepiece_name(name):
        return max(SENTENCEPIECE_CAP, TIKTOKEN_CAP)  # tokenizer.model may be tiktoken text (Llama 3)
    return None


def oversized_files(path: str, json_cap: int) -> List[Tuple[str, int, int]]:
    """``(name, size, cap)`` of each tokenizer file in ``path`` above its cap (links followed:
    an HF snapshot links to its blobs), by name."""
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return []  # the load itself reports an unreadable dir
    out = []
    for name in names:
        cap = _cap(name, json_cap)
        if cap is None:
            continue
        try:
            st = os.stat(os.path.join(path, name))
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_size > cap:
            out.append((name, st.st_size, cap))
    return out


def too_large_error(path: str, json_cap: int) -> Optional[TokenizerError]:
    """The load's error when a file is too large to read whole, else None (load as usual)."""
    found = oversized_files(path, json_cap)
    if not found:
        return None
    listed = "; ".join("%s is %s, above its %s cap" % (name, size_text(size), size_text(cap))
                       for name, size, cap in found)
    message = "%s: not loaded (transformers would read the whole file into memory)" % listed
    return {"type": "too-large", "message": message, "cause": "too-large", "missing_packages": [], "traceback": []}
