"""The vocabulary files of a model dir, by layout, and which one a loader would use.

Runs on the host: standard library only, Python 3.8+. Called by tokenizer_files; nothing
here raises.

Layouts (file names as the loaders look for them):

* tiktoken: ``tiktoken.model``, ``*.tiktoken``, and ``tokenizer.model`` when it is
  tiktoken text (Meta's original Llama-3/4 ``tokenizer.model``);
* sentencepiece: ``tokenizer.model``, ``spiece.model``, ``sentencepiece.bpe.model``,
  Mistral's ``tokenizer.model.v1`` .. ``tokenizer.model.v*`` / ``tokenizer.mm.model.v*``,
  and any other ``*.model`` that parses as a ModelProto;
* Mistral tekken: ``tekken.json``.

The choice when several exist: a vocab file the auto_map class names in its
``vocab_files_names`` wins; then vLLM's ``--tokenizer-mode mistral`` files
(``tekken.json`` over ``tokenizer.model.v*``, the highest version first); then
``tiktoken.model``, ``tokenizer.model``, ``spiece.model``; then the first by name.
"""

from __future__ import annotations

import os
import re
from typing import Any, List, Optional, Tuple, cast

from ...contract import ErrorRecord, SentencepieceFile, TekkenSummary, TiktokenSummary, VocabChoice, tag
from ...readers import os_error, sha256_file
from . import sentencepiece_model, tekken
from .tiktoken import looks_like_tiktoken, summarize_tiktoken_file

PROBE = "tokenizer_files"
SENTENCEPIECE_NAMES = ("tokenizer.model", "spiece.model", "sentencepiece.bpe.model")
_MISTRAL_SP_RE = re.compile(r"^tokenizer(\.mm)?\.model\.v(\d+)(m\d+)?$")
PREFERRED = ("tiktoken.model", "tokenizer.model", "spiece.model", "sentencepiece.bpe.model")
VocabFiles = Tuple[List[TiktokenSummary], List[SentencepieceFile], Optional[TekkenSummary]]


def is_mistral_sentencepiece(name: str) -> bool:
    return bool(_MISTRAL_SP_RE.match(name))


def is_sentencepiece_name(name: str) -> bool:
    return name in SENTENCEPIECE_NAMES or is_mistral_sentencepiece(name) or name.endswith(".model")


def collect_vocab_files(path: str, wanted: List[str]) -> Tuple[VocabFiles, List[ErrorRecord]]:
    """((tiktoken, sentencepiece, tekken), errors) for the vocab files directly in the model dir.

    ``wanted``: token strings to look up in a sentencepiece model while it is parsed.
    """
    tiktoken: List[TiktokenSummary] = []
    sentencepiece: List[SentencepieceFile] = []
    found_tekken: Optional[TekkenSummary] = None
    errors: List[ErrorRecord] = []
    if not os.path.isdir(path):
        return (tiktoken, sentencepiece, None), errors  # the files section reports a missing model path
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        return (tiktoken, sentencepiece, None), [tag(os_error(exc, path), PROBE)]
    for name in names:
        file = os.path.join(path, name)
        if not os.path.isfile(file):
            continue
        if name == "tiktoken.model" or name.endswith(".tiktoken"):
            _add(tiktoken, summarize_tiktoken_file(file), errors)
        elif name == "tekken.json":
            found_tekken, err = tekken.read_tekken(file)
            errors.extend([tag(err, PROBE)] if err is not None else [])
        elif is_sentencepiece_name(name):
            if looks_like_tiktoken(file):  # Meta's tokenizer.model is tiktoken text
                _add(tiktoken, summarize_tiktoken_file(file), errors)
            elif name in SENTENCEPIECE_NAMES or is_mistral_sentencepiece(name) or \
                    sentencepiece_model.looks_like_model_proto(file):
                _add(sentencepiece, _sentencepiece(file, wanted), errors)
    return (tiktoken, sentencepiece, found_tekken), errors


def _sentencepiece(file: str, wanted: List[str]) -> Tuple[Optional[SentencepieceFile], Optional[ErrorRecord]]:
    summary, err = sentencepiece_model.read_sentencepiece(file, wanted)
    if summary is None:
        return None, err
    summary["file"] = os.path.basename(file)
    summary["sha256"], _ = sha256_file(file)
    return cast(SentencepieceFile, summary), None


def _add(into: List[Any], result: Tuple[Any, Optional[ErrorRecord]], errors: List[ErrorRecord]) -> None:
    value, err = result
    if err is not None:
        errors.append(tag(err, PROBE))
    if value is not None:
        into.append(value)


def choose(facts: Any, class_vocab_files: List[str]) -> Optional[VocabChoice]:
    """{"kind", "file", "reason", "candidates"}: the vocab file the fallback reads."""
    candidates: List[Tuple[str, str]] = []
    for kind in ("tiktoken", "sentencepiece"):
        for entry in facts.get(kind) or []:
            if isinstance(entry, dict) and isinstance(entry.get("file"), str):
                candidates.append((entry["file"], kind))
    if isinstance(facts.get("tekken"), dict):
        candidates.append(("tekken.json", "tekken"))
    if not candidates:
        return None
    names = [c[0] for c in candidates]
    kinds = dict(candidates)
    file, reason = _pick(names, class_vocab_files)
    return VocabChoice(kind=kinds[file], file=file, reason=reason, candidates=names)


def _pick(names: List[str], class_vocab_files: List[str]) -> Tuple[str, str]:
    if len(names) == 1:
        return names[0], "the only vocabulary file"
    named = [n for n in class_vocab_files if n in names]
    if named:
        return named[0], "the tokenizer class names it in vocab_files_names"
    mistral = sorted((n for n in names if is_mistral_sentencepiece(n)), key=_version, reverse=True)
    if "tekken.json" in names:
        return "tekken.json", "tekken.json is Mistral's newer format; vLLM's mistral mode prefers it"
    if mistral:
        return mistral[0], "the highest tokenizer.model.v* version (mistral_common's file for the model)"
    for name in PREFERRED:
        if name in names:
            return name, "%s is the name transformers' classes look for first" % name
    return sorted(names)[0], "first by name: no class or convention picks one of %d files" % len(names)


def _version(name: str) -> Tuple[int, str]:
    found = _MISTRAL_SP_RE.match(name)
    return (int(found.group(2)), found.group(3) or "") if found else (-1, "")
