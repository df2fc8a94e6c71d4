"""AutoTokenizer's verdict on a tokenizer task result, and the stand-in test: pure, and light.

``health`` (its tokenizer checks, the history's ``tokenizer_ok``), ``preflight`` and the profile
judge a load with these same functions; they live apart from
:mod:`introspect.analysis.tokenizer.tokenizer_autotokenizer` (which re-exports them) because that
module builds the profile's pydantic blocks, and importing :mod:`introspect.documents` costs more
CPU than the rest of a ``health`` run's controller start-up. This module imports no pydantic model.
"""

from __future__ import annotations

import fnmatch
import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from introspect.remote.contract import as_dict

if TYPE_CHECKING:  # the raw shapes, for the checker only: contract imports their modules on first use
    from introspect.remote.contract import FilesFacts, ListingRow, TokenizerProbe
    from introspect.remote.contract import TokenizerError as RawTokenizerError

NAMED = ("bos", "eos", "pad", "unk", "mask")

# The stand-in. In a directory without tokenizer files transformers v5 still "loads" a tokenizer:
# AutoTokenizer picks the class from config.json's model_type
# (https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/models/auto/tokenization_auto.py#L1006-L1015),
# each missing file resolves to None without an error
# (https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/tokenization_utils_base.py#L1739-L1776),
# and the class fills in a default vocabulary of its special tokens: Qwen2's {"<|endoftext|>": 0}
# (https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/models/qwen2/tokenization_qwen2.py#L53-L59),
# GPT-NeoX's 2
# (https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/models/gpt_neox/tokenization_gpt_neox.py#L113),
# Gemma's 5
# (https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/models/gemma/tokenization_gemma.py#L70-L77),
# plus tokenizer_config.json's added tokens at new ids. Classes without such a default raise instead
# (https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/tokenization_utils_tokenizers.py#L420-L426).
# Two tests, each far from any real tokenizer (measured with transformers 5.24.0 on a config-only
# directory of every model type whose AutoTokenizer loads there: 165):
# * OWN_MIN: its own vocabulary (tokens neither added nor named specials). The stand-ins have 0 to
#   2 (T5's 104 tokens are 103 added extra ids plus one piece); the classes that read no file by
#   design have 27 (ESM-C's protein alphabet), 253-256 (Dia's and Perceiver's bytes), 1114108
#   (CANINE's code points); a DNA character tokenizer has 4 (A, C, G, T).
# * SHARE: its length below 1/SHARE of config.json's vocab_size. The stand-ins have 1 to 207 tokens
#   for vocabularies of 32000 and more; a real tokenizer fills nearly all of its embedding (Qwen3:
#   151669 tokens for 151936 rows; the smallest in tests/data, tortoise-tts, 255 tokens for 256).
# "No tokenizer file in the directory" alone does not decide: CANINE, Perceiver, Dia and ESM-C
# load from none by design. It is named in the reason when the listing shows it.
OWN_MIN = 4
SHARE = 100
# What a tokenizer reads its vocabulary from, by name (the layouts of
# introspect/remote/facts/tokenizer/tokenizer_vocab_files.py plus the BPE/WordPiece text files).
VOCAB_FILES = ("tokenizer.json", "tekken.json", "vocab.json", "vocab.txt", "merges.txt", "bpe.codes",
               "*.model", "*.model.v*", "*.tiktoken", "*.vocab", "*.spm")


def autotokenizer_loaded(result: Mapping[str, Any] | None) -> bool | None:
    """True / False for a tokenizer task result; None when the task did not report."""
    if not isinstance(result, Mapping) or "loaded" not in result:
        return None
    native = isinstance(result.get("source"), str) or result.get("transformers_error") is not None
    return bool(result.get("loaded")) and not native


def _object(value: object) -> dict[str, Any]:
    """A raw section read as the JSON object it should be; a damaged or missing one reads as empty
    (as shapes.shaped does, without importing the shapes)."""
    return value if isinstance(value, dict) else {}


def autotokenizer_error(result: Mapping[str, Any] | None) -> RawTokenizerError:
    """transformers' classified error: ``transformers_error`` after a native load, else ``error``
    (empty when there is none)."""
    probe = cast("TokenizerProbe", _object(result))
    native = cast("RawTokenizerError", _object(probe.get("transformers_error")))
    return native or cast("RawTokenizerError", _object(probe.get("error")))


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def stand_in_reason(facts: Mapping[str, Any] | None, *, config_vocab: Any = None,
                    backing: list[str] | None = None) -> str | None:
    """Why a tokenizer AutoTokenizer loaded is a stand-in (see OWN_MIN, SHARE), or None.

    ``facts``: the loaded tokenizer's facts (the tokenizer task's result, or preflight's tokenizer
    section): ``len``, ``added_tokens`` (a count), ``special_tokens``, bos/eos/pad/unk/mask.
    ``config_vocab``: config.json's vocab_size when known; ``backing``: the vocabulary files in
    the model directory (:func:`backing_files`), None when not listed.
    """
    facts = facts if isinstance(facts, Mapping) else {}
    length = _int(facts.get("len"))
    if length is None:
        return None
    special = {_int(as_dict(facts.get(k)).get("id")) for k in NAMED}
    special |= {_int(as_dict(t).get("id")) for t in facts.get("special_tokens") or []}
    special.discard(None)
    added = max(_int(facts.get("added_tokens")) or 0, len(special))
    vocab = _int(config_vocab)
    reasons = []
    if length - added < OWN_MIN:
        reasons.append(f"len(tokenizer) {length}, {added} of them added or special: no vocabulary of its own")
    if vocab is not None and length * SHARE < vocab:
        reasons.append(f"len(tokenizer) {length} is below 1/{SHARE} of config.json's vocab_size {vocab}")
    if not reasons:
        return None
    if backing == []:
        reasons.append("the model directory has no tokenizer file (tokenizer.json, tokenizer.model, "
                       "vocab.json, *.tiktoken, tekken.json, ...)")
    return "; ".join(reasons)


def backing_files(model_files: FilesFacts | None) -> list[str] | None:
    """Names in the model directory's listing a tokenizer reads its vocabulary from; None when the
    listing is missing or cut (then nothing can be said about an absent file)."""
    files = cast("FilesFacts", _object(model_files))
    listing = files.get("listing")
    if files.get("status") != "ok" or files.get("listing_truncated") or not isinstance(listing, list):
        return None
    rows = [cast("ListingRow", _object(row)) for row in listing]
    names = [str(row.get("name")) for row in rows if row.get("kind") == "file"]
    return [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in VOCAB_FILES)]


def stand_in_fix(model: Any, then: str = "probe again") -> str:
    """The fix of a stand-in: the directory to fill, with what to copy into it as a comment."""
    what = ("the tokenizer files of the model this checkpoint was trained from (tokenizer.json, "
            "tokenizer_config.json, chat_template.jinja, and tokenizer.model / vocab.json + merges.txt / "
            "*.tiktoken where it has them)")
    if not model:
        return f"# copy {what} into the model directory, then {then}"
    return f"ls -la {shlex.quote(str(model))}  # copy {what} into it, then {then}"
