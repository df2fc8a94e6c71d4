"""The vocabulary files of a model dir, by layout, and which one a loader would use.

Runs on the host: standard library only, Python 3.8+. Called by tokenizer_files.

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
from typing import Any, Dict, List, Optional, Tuple

from . import sentencepiece_model, tekken

SENTENCEPIECE_NAMES = ("tokenizer.model", "spiece.model", "sentencepiece.bpe.model")
_MISTRAL_SP_RE = re.compile(r"^tokenizer(\.mm)?\.model\.v(\d+)(m\d+)?$")
PREFERRED = ("tiktoken.model", "tokenizer.model", "spiece.model", "sentencepiece.bpe.model")


def is_mistral_sentencepiece(name: str) -> bool:
    return bool(_MISTRAL_SP_RE.match(name))


def is_sentencepiece_name(name: str) -> bool:
    return name in SENTENCEPIECE_NAMES or is_mistral_sentencepiece(name) or name.endswith(".model")


def collect(path: str, names: List[str], wanted: List[str], read_tiktoken: Any, looks_like_tiktoken: Any
            ) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    """{"tiktoken": [...], "sentencepiece": [...], "tekken": summary | null}, errors."""
    out = {"tiktoken": [], "sentencepiece": [], "tekken": None}  # type: Dict[str, Any]
    errors = []  # type: List[Dict[str, Any]]
    for name in names:
        file = os.path.join(path, name)
        if not os.path.isfile(file):
            continue
        if name == "tiktoken.model" or name.endswith(".tiktoken"):
            _add(out["tiktoken"], read_tiktoken(file), errors)
        elif name == "tekken.json":
            _add_one(out, "tekken", tekken.read_tekken(file), errors)
        elif is_sentencepiece_name(name):
            if looks_like_tiktoken(file):  # Meta's tokenizer.model is tiktoken text
                _add(out["tiktoken"], read_tiktoken(file), errors)
            elif name in SENTENCEPIECE_NAMES or is_mistral_sentencepiece(name) or \
                    sentencepiece_model.looks_like_model_proto(file):
                _add(out["sentencepiece"], _sentencepiece(file, wanted), errors)
    return out, errors


def _sentencepiece(file: str, wanted: List[str]) -> Tuple[Optional[Dict[str, Any]], Optional[Dict[str, Any]]]:
    from .common import sha256_file

    summary, err = sentencepiece_model.read_sentencepiece(file, wanted)
    if summary is None:
        return None, err
    summary["file"] = os.path.basename(file)
    summary["sha256"], _ = sha256_file(file)
    return summary, None


def _add(into: List[Dict[str, Any]], result: Tuple[Any, Any], errors: List[Dict[str, Any]]) -> None:
    value, err = result
    if err is not None:
        errors.append(err)
    if value is not None:
        into.append(value)


def _add_one(out: Dict[str, Any], key: str, result: Tuple[Any, Any], errors: List[Dict[str, Any]]) -> None:
    value, err = result
    if err is not None:
        errors.append(err)
    out[key] = value


def choose(facts: Dict[str, Any], class_vocab_files: List[str]) -> Optional[Dict[str, Any]]:
    """{"kind", "file", "reason", "candidates"}: the vocab file the fallback reads."""
    candidates = []  # type: List[Tuple[str, str]]
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
    return {"kind": kinds[file], "file": file, "reason": reason, "candidates": names}


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
