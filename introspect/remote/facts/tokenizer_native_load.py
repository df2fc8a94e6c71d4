"""Load the tokenizer with the library that owns its layout, when transformers cannot.

Runs inside the tokenizer task's own interpreter; standard library at import time
(Python 3.8+), the libraries imported only inside :func:`load_native`. Used only for
layouts whose library alone defines the tokenizer, so the answer is that library's:

* ``tekken.json`` -> mistral_common ``Tekkenizer.from_file``;
* ``tokenizer.model.v*`` -> mistral_common ``SentencePieceTokenizer`` (else sentencepiece);
* a sentencepiece ``tokenizer.model`` / ``spiece.model`` with no tokenizer class named
  in tokenizer_config.json -> ``sentencepiece.SentencePieceProcessor``;
* tiktoken text with no auto_map code -> ``tiktoken.Encoding`` over its ranks, no specials.

A class that adds tokens of its own (an HF class named in tokenizer_config.json, a
remote-code class) is never replaced by its library: its numbers would differ.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, cast

from ..contract import DEFAULT_JSON_CAP, TokenizerProbe, VocabChoice, as_dict
from ..readers import read_json_capped
from . import sentencepiece_model, tokenizer_vocab_files

MAX_SPECIALS = 5000


def load_native(path: str) -> Optional[Dict[str, Any]]:
    """The probe's fact fields from the layout's own library; None when none applies or loads."""
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return None
    config = _tokenizer_config(path)
    choice = _choose(path, names)
    if choice is None:
        return None
    kind, file = choice["kind"], os.path.join(path, choice["file"])
    declared = isinstance(config.get("tokenizer_class"), str) or bool(config.get("auto_map"))
    try:
        if kind == "tekken":
            return _tekken(file)
        if kind == "sentencepiece" and tokenizer_vocab_files.is_mistral_sentencepiece(choice["file"]):
            return _mistral_sentencepiece(file)
        if kind == "sentencepiece" and not declared:
            return _sentencepiece(file, "sentencepiece")
        if kind == "tiktoken" and not declared:
            return _tiktoken(file)
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
            named: Dict[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {"loaded": True, "source": source, "class": cls, "vocab_size": size, "len": length,
                           "special_tokens": specials[:MAX_SPECIALS], "is_fast": None, "mask": None}
    out.update(named)
    return out


def _tekken(file: str) -> Dict[str, Any]:
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    tok = Tekkenizer.from_file(file)
    names = [tok.id_to_piece(i) for i in range(tok.num_special_tokens)]
    named = {attr: _pair(names[i], i) for attr, i in
             (("bos", tok.bos_id), ("eos", tok.eos_id), ("pad", tok.pad_id), ("unk", tok.unk_id))}
    specials = [{"token": t, "id": i} for i, t in enumerate(names)]
    return _result("mistral_common", type(tok).__name__, tok.n_words, tok.n_words, specials, named)


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
    return _result(source, type(sp).__name__, sp.vocab_size(), size, specials, named)


def _tiktoken(file: str) -> Dict[str, Any]:
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    ranks = load_tiktoken_bpe(file)
    # The split pattern does not change ranks or ids; tiktoken requires one.
    enc = tiktoken.Encoding(name=os.path.basename(file), pat_str=r"\S+|\s+", mergeable_ranks=ranks,
                            special_tokens={})
    named: Dict[str, Any] = dict.fromkeys(("bos", "eos", "pad", "unk"))
    return _result("tiktoken", type(enc).__name__, enc.n_vocab, enc.n_vocab, [], named)
