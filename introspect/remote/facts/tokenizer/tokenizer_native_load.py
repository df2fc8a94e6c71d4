"""Load the tokenizer with the library that owns its layout, when transformers cannot.

Runs inside the tokenizer task's own interpreter; standard library at import time
(Python 3.8+), the libraries imported only inside :func:`load_native`. It reads the
files transformers would read, so the answer is what the pipeline's tokenizer holds:

* ``tokenizer.json`` first, as transformers' fast class does (its ``tokenizer_file`` is
  tokenizer.json, https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/tokenization_utils_base.py#L1671,
  and it is loaded before any ``tokenizer.model`` / ``*.tiktoken`` is converted,
  https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/tokenization_utils_tokenizers.py#L114)
  -> ``tokenizers.Tokenizer.from_file``; without the tokenizers library, nothing here:
  the files fallback reads tokenizer.json the same way. Mistral's own files
  (``tekken.json``, ``tokenizer.model.v*``) keep their precedence (mistral_common's);
* ``tekken.json`` -> mistral_common ``Tekkenizer.from_file``;
* ``tokenizer.model.v*`` -> mistral_common ``SentencePieceTokenizer`` (else sentencepiece);
* a sentencepiece ``tokenizer.model`` / ``spiece.model`` with no tokenizer class named
  in tokenizer_config.json -> ``sentencepiece.SentencePieceProcessor``;
* tiktoken text -> ``tiktoken.Encoding`` over its ranks plus the specials the tokenizer's
  code defines, read statically (:mod:`tiktoken_code_specials`). When the code has
  specials that cannot be read, the counts are stated for the ranks only and named in
  ``partial``; an auto_map class is replaced only when its whole table is read.

A class that adds tokens of its own (an HF class named in tokenizer_config.json, a
remote-code class naming ids through added_tokens_decoder) is never replaced by its
library: its numbers would differ. Every result names the files it read (``read``).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, cast

from ...contract import DEFAULT_JSON_CAP, TokenizerProbe, VocabChoice, as_dict
from ...readers import read_json_capped
from . import sentencepiece_model, tokenizer_vocab_files
from .loaded_tokenizer import with_total
from .tiktoken_code_specials import FORM_RESERVED_RANGE, code_specials

MAX_SPECIALS = 5000
TOKENIZER_JSON = "tokenizer.json"
# transformers 5's generic fast class, under both names, reads tokenizer.json as it is
# (https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/tokenization_utils_tokenizers.py#L1588).
GENERIC_FAST = ("PreTrainedTokenizerFast", "TokenizersBackend")
NAMED = ("bos", "eos", "pad", "unk", "mask")
# What a tiktoken load cannot state when the specials are unknown: the specials, and the
# counts they add to (a tiktoken class's vocab_size is its Encoding's n_vocab).
PARTIAL_COUNTS = ["vocab_size", "len", "special_tokens"]


def load_native(path: str) -> Optional[Dict[str, Any]]:
    """The probe's fact fields from the layout's own library; None when none applies or loads."""
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return None
    config = _tokenizer_config(path)
    named_class = config.get("tokenizer_class") if isinstance(config.get("tokenizer_class"), str) else None
    choice = _choose(path, names)
    kind = choice["kind"] if choice is not None else None
    mistral = kind == "tekken" or (choice is not None and tokenizer_vocab_files.is_mistral_sentencepiece(choice["file"]))
    try:
        if TOKENIZER_JSON in names and not mistral:
            generic = not config.get("auto_map") and (named_class is None or named_class in GENERIC_FAST)
            return _tokenizers(path, config) if generic else None
        if choice is None:
            return None
        file = os.path.join(path, choice["file"])
        declared = named_class is not None or bool(config.get("auto_map"))
        if kind == "tekken":
            return _tekken(file)
        if kind == "sentencepiece" and mistral:
            return _mistral_sentencepiece(file)
        if kind == "sentencepiece" and not declared:
            return _sentencepiece(file, "sentencepiece")
        if kind == "tiktoken" and (named_class is None or config.get("auto_map")):
            return _tiktoken(path, file, config)
    except Exception:  # noqa: BLE001 - the library could not load it either: the files fallback stands
        return None
    return None


def fall_back_to_native(path: str, result: TokenizerProbe) -> None:
    """After transformers failed: load with the layout's library, keeping transformers' error."""
    native = load_native(path)
    if native is None:
        return
    result["transformers_error"] = result.get("error")
    result["error"] = None
    cast(Dict[str, Any], result).update(native)


def _tokenizer_config(path: str) -> Dict[str, Any]:
    # Its read errors are the tokenizer_files section's to report; here only "is a class named?".
    value, _err = read_json_capped(os.path.join(path, "tokenizer_config.json"), DEFAULT_JSON_CAP)
    return as_dict(value)


def _choose(path: str, names: List[str]) -> Optional[VocabChoice]:
    facts: Dict[str, Any] = {"tiktoken": [], "sentencepiece": [], "tekken": None}
    for name in names:
        file = os.path.join(path, name)
        if name == "tiktoken.model" or name.endswith(".tiktoken"):
            facts["tiktoken"].append({"file": name})
        elif name == "tekken.json":
            facts["tekken"] = {"file": name}
        elif tokenizer_vocab_files.is_sentencepiece_name(name) and os.path.isfile(file):
            kind = "sentencepiece" if sentencepiece_model.looks_like_model_proto(file) else "tiktoken"
            facts[kind].append({"file": name})
    return tokenizer_vocab_files.choose(facts, [])


def _pair(token: Any, token_id: Any) -> Optional[Dict[str, Any]]:
    if not isinstance(token_id, int) or token_id < 0:
        return None
    return {"token": str(token), "id": token_id}


def _result(source: str, cls: str, size: int, length: int, specials: List[Dict[str, Any]],
            named: Dict[str, Any], read: List[str], partial: Optional[List[str]] = None) -> Dict[str, Any]:
    """The fact fields; ``special_tokens`` capped at MAX_SPECIALS with its true total and a flag."""
    out: Dict[str, Any] = {"loaded": True, "source": source, "class": cls, "vocab_size": size, "len": length,
                           "is_fast": None, "mask": None}
    out["special_tokens"] = with_total(out, "special_tokens", specials, MAX_SPECIALS)
    out.update(named)
    out["read"] = read
    out["partial"] = list(partial or [])
    return out


def _tokenizers(path: str, config: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """tokenizer.json through the tokenizers library, named tokens from the configs, as transformers."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return None  # the files fallback reads tokenizer.json: its answers stand
    tok = Tokenizer.from_file(os.path.join(path, TOKENIZER_JSON))
    decoder = tok.get_added_tokens_decoder()
    specials = [{"token": t.content, "id": i} for i, t in sorted(decoder.items()) if t.special]
    read = [TOKENIZER_JSON]
    named: Dict[str, Any] = {}
    unknown = False
    special_map, _err = read_json_capped(os.path.join(path, "special_tokens_map.json"), DEFAULT_JSON_CAP)
    for attr in NAMED:
        token, source = _named_token(attr, config, as_dict(special_map))
        token_id = tok.token_to_id(token) if token is not None else None
        named[attr] = {"token": token, "id": token_id} if token is not None else None
        unknown = unknown or (token is not None and token_id is None)
        if source is not None and source not in read:
            read.append(source)
    for content in _config_added(config):
        unknown = unknown or tok.token_to_id(content) is None
    # transformers adds a configured token tokenizer.json does not hold, at an id of its own
    # choosing: the counts and the specials then differ from the file's.
    partial = ["len", "special_tokens"] if unknown else []
    if unknown and "tokenizer_config.json" not in read and config:
        read.append("tokenizer_config.json")
    return _result("tokenizers", type(tok).__name__, tok.get_vocab_size(with_added_tokens=False),
                   tok.get_vocab_size(with_added_tokens=True), specials, named, read, partial)


def _named_token(attr: str, config: Dict[str, Any], special_map: Dict[str, Any]) -> Any:
    """(token, file it came from): tokenizer_config.json, else the legacy special_tokens_map.json."""
    for value, source in ((config.get(attr + "_token"), "tokenizer_config.json"),
                          (special_map.get(attr + "_token"), "special_tokens_map.json")):
        value = value.get("content") if isinstance(value, dict) else value
        if isinstance(value, str):
            return value, source
    return None, None


def _config_added(config: Dict[str, Any]) -> List[str]:
    out = []
    for entry in as_dict(config.get("added_tokens_decoder")).values():
        content = entry.get("content") if isinstance(entry, dict) else entry
        if isinstance(content, str):
            out.append(content)
    return out


def _tekken(file: str) -> Dict[str, Any]:
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    tok = Tekkenizer.from_file(file)
    names = [tok.id_to_piece(i) for i in range(tok.num_special_tokens)]
    named = {attr: _pair(names[i], i) for attr, i in
             (("bos", tok.bos_id), ("eos", tok.eos_id), ("pad", tok.pad_id), ("unk", tok.unk_id))}
    specials = [{"token": t, "id": i} for i, t in enumerate(names)]
    return _result("mistral_common", type(tok).__name__, tok.n_words, tok.n_words, specials, named,
                   [os.path.basename(file)])


def _mistral_sentencepiece(file: str) -> Dict[str, Any]:
    try:
        from mistral_common.tokens.tokenizers.sentencepiece import SentencePieceTokenizer
    except ImportError:
        return _sentencepiece(file, "sentencepiece")
    out = _sentencepiece(file, "mistral_common")
    out["class"] = type(SentencePieceTokenizer(file)).__name__
    return out


def _sentencepiece(file: str, source: str) -> Dict[str, Any]:
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_file=file)
    size = sp.get_piece_size()
    named = {attr: _pair(sp.id_to_piece(i) if i >= 0 else None, i) for attr, i in
             (("bos", sp.bos_id()), ("eos", sp.eos_id()), ("pad", sp.pad_id()), ("unk", sp.unk_id()))}
    specials = [{"token": sp.id_to_piece(i), "id": i} for i in range(size) if sp.is_control(i) or sp.is_unknown(i)]
    return _result(source, type(sp).__name__, sp.vocab_size(), size, specials, named, [os.path.basename(file)])


def _tiktoken(path: str, file: str, config: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The ranks plus the specials the code defines; None where an auto_map class is not replaceable."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    ranks = load_tiktoken_bpe(file)
    code = code_specials(path, config, len(ranks))
    if code is not None and code["auto_map"] and (not code["table"] or code["form"] == FORM_RESERVED_RANGE):
        return None  # the class names or adds ids this cannot read: the files fallback stands
    table: Dict[int, str] = code["table"] if code is not None else {}
    # The split pattern does not change ranks or ids; tiktoken requires one.
    enc = tiktoken.Encoding(name=os.path.basename(file), pat_str=r"\S+|\s+", mergeable_ranks=ranks,
                            special_tokens={token: token_id for token_id, token in table.items()})
    named: Dict[str, Any] = code["named"] if code is not None and table else dict.fromkeys(("bos", "eos", "pad", "unk"))
    specials = [{"token": token, "id": token_id} for token_id, token in sorted(table.items())]
    read = [os.path.basename(file)] + (code["files"] if code is not None else [])
    if code is not None and code["form"] == FORM_RESERVED_RANGE and config.get("added_tokens_decoder"):
        read.append("tokenizer_config.json")
    partial = PARTIAL_COUNTS if not table and _specials_unknown(code, config) else []
    return _result("tiktoken", type(enc).__name__, enc.n_vocab, enc.n_vocab, specials, named, read, partial)


def _specials_unknown(code: Optional[Dict[str, Any]], config: Dict[str, Any]) -> bool:
    """Specials exist that no reader here resolved: in the code, or tokens the config adds
    (transformers' tiktoken conversion appends them after the ranks,
    https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/tokenization_utils_tokenizers.py#L277)."""
    if code is not None and code["unresolved"]:
        return True
    return bool(config.get("added_tokens_decoder") or config.get("extra_special_tokens"))
