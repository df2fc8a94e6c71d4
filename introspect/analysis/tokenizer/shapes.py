"""The intermediate shapes of the tokenizer section's builders (pure, no I/O).

What the files fallback computes (:class:`FileFacts`, with its ``vocab`` block
:class:`VocabFacts`), the native-load block, and :func:`shaped`, which reads a raw section as
the TypedDict the remote side declares for it (introspect/remote/sections.py) while keeping
the tolerance of ``as_dict``: a damaged or missing section reads as empty. The section
itself is the typed model :class:`introspect.documents.profile_tokenizer.Tokenizer`.
"""

from __future__ import annotations

from typing import Literal, TypedDict, TypeVar, cast

from introspect.remote.contract import VocabChoice

T = TypeVar("T")

NamedKey = Literal["bos", "eos", "pad", "unk", "mask"]
NAMED: tuple[NamedKey, ...] = ("bos", "eos", "pad", "unk", "mask")


def shaped(value: object, shape: type[T]) -> T:
    """``value`` read as the raw section ``shape`` when it is a JSON object, else an empty one.

    Raw facts may be damaged or missing (``repair_raw`` checks only the top-level types), so
    every key is still read with ``.get`` and checked where it is used.
    """
    del shape  # only names the type for the checker
    return cast(T, value if isinstance(value, dict) else {})


class Token(TypedDict):
    """A named or special token: ``{"token", "id"}`` (the id is null where the files do not place it)."""

    token: str | None
    id: int | None


class AddedToken(TypedDict):
    content: str
    special: bool


class Conflict(TypedDict):
    """An id ``added_tokens_decoder`` names for a token tokenizer.json places elsewhere."""

    id: int
    content: str
    tokenizer_json_id: int | None


class Template(TypedDict):
    """The chat template a plain ``apply_chat_template`` renders."""

    text: str
    sha256: str | None
    source: str | None


class VocabFacts(TypedDict, total=False):
    """The numbers vocab_size and len come from (the section's ``files``); keys in the profile's order."""

    kind: str | None  # tiktoken-class | tiktoken-conversion | tiktoken-declared | tokenizer.json | tekken | sentencepiece
    vocab_file: str | None
    base: int | None
    reserved: int | None
    reserved_start: int | None
    placeholder: str | None
    max_added_id: int | None
    vocab_size: int | None
    len: int | None
    added_token_conflicts: list[Conflict]
    choice: VocabChoice  # the vocab file chosen among several, and why
    class_source: str | None
    version: str | None  # tekken only
    model_type: str | None  # sentencepiece only


_FileFactsKeys = TypedDict("_FileFactsKeys", {
    "class": str | None, "vocab_size": int | None, "len": int | None,
    "bos": Token | None, "eos": Token | None, "pad": Token | None, "unk": Token | None, "mask": Token | None,
    "special_tokens": list[Token], "chat_template": Template | None, "vocab": VocabFacts, "added_tokens": int,
})


class FileFacts(_FileFactsKeys, total=False):
    """Every tokenizer fact the raw files give (tokenizer_fallback.facts_from_files)."""

    special_tokens_total: int  # a sentencepiece file whose pieces the remote reader cut
    special_tokens_truncated: bool


# ``tokenizer.native``: what the layout's own library loaded where AutoTokenizer did not
# (tokenizer_autotokenizer.native_block); "class" is a keyword, hence the functional form.
NativeBlock = TypedDict("NativeBlock", {
    "loaded_by": str, "class": str | None, "read": list[str] | None, "partial": list[str] | None,
    "unknown": list[str], "note": str | None,
})
