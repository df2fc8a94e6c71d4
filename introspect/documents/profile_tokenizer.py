"""The profile's ``tokenizer`` section (introspect/analysis/tokenizer/section.py and its helpers)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from introspect.documents.base import Record, TokenId

# ``class`` is a keyword: the field is ``class_`` in Python (the name a typed constructor call
# uses: a type checker reads ``alias`` as the constructor's keyword), ``class`` in the JSON.


class AutoTokenizer(Record):
    """Whether ``AutoTokenizer.from_pretrained`` loads it, and if not, why (tokenizer_autotokenizer.py)."""

    ok: bool | None
    reason: str | None
    trust_remote_code: bool
    class_: str | None = Field(validation_alias="class", serialization_alias="class")
    transformers_version: str | None
    type: str | None
    cause: str | None
    missing_packages: list[str]
    message: str | None
    message_chars: int | None
    message_truncated: bool
    fix: str | None
    stand_in: bool | None = None  # AutoTokenizer built a stand-in from model_type (no tokenizer files)
    stand_in_reason: str | None = None


class ChatTemplate(Record):
    present: bool
    source: str | None
    sha256: str | None
    text: str | None
    sample: str | None
    sample_error: dict[str, Any] | None
    # Only where the host cut the text (a huge template, a sample that rendered megabytes): its true size.
    text_size: int | None = None
    text_truncated: bool | None = None
    sample_size: int | None = None
    sample_truncated: bool | None = None


class TokenizerError(Record):
    type: str | None
    message: str | None
    missing_packages: list[str] | None = None
    cause: str | None = None


class Sources(Record):
    """Which witness each fact came from (loaded tokenizer, files, ...)."""

    class_: str | None = Field(validation_alias="class", serialization_alias="class")
    vocab_size: str | None
    len: str | None
    bos: str | None
    eos: str | None
    pad: str | None
    unk: str | None
    mask: str | None
    special_tokens: str | None
    chat_template: str | None


class TokenizerFiles(Record):
    """What the tokenizer files alone say (the fallback reader)."""

    kind: str | None
    vocab_file: str | None
    base: int | None
    reserved: int | None
    reserved_start: int | None
    placeholder: str | None
    max_added_id: int | None
    vocab_size: int | None
    len: int | None
    added_token_conflicts: list[dict[str, Any]]
    choice: dict[str, Any] | None = None  # the vocab file chosen among several, and why
    class_source: str | None = None
    version: str | None = None  # tekken.json's version (tekken only)
    model_type: str | None = None  # the ModelProto's model type (sentencepiece only)


class AddedTokensCheck(Record):
    checked: int
    checked_total: int
    checked_truncated: bool
    mismatches: int
    items: list[dict[str, Any]]  # the mismatching ids, as the remote side checked them
    items_total: int
    items_truncated: bool


class FromFiles(Record):
    """The files' own answer when a loaded tokenizer answered first (shown when they disagree)."""

    class_: str | None = Field(validation_alias="class", serialization_alias="class")
    vocab_size: int | None
    len: int | None
    bos: TokenId | None
    eos: TokenId | None
    pad: TokenId | None
    unk: TokenId | None
    mask: TokenId | None
    special_tokens: list[TokenId]
    special_tokens_total: int
    special_tokens_truncated: bool
    chat_template_sha256: str | None
    chat_template_source: str | None
    vocab_file: str | None
    vocab_kind: str | None


class Tokenizer(Record):
    autotokenizer: AutoTokenizer
    native: dict[str, Any] | None  # a native (non-transformers) load: sentencepiece, tiktoken, tekken
    loaded: bool
    source: str
    class_: str | None = Field(validation_alias="class", serialization_alias="class")
    declared_class: str | None
    vocab_size: int | None
    len: int | None
    bos: TokenId | None
    eos: TokenId | None
    pad: TokenId | None
    unk: TokenId | None
    mask: TokenId | None
    special_tokens: list[TokenId]
    special_tokens_total: int
    special_tokens_truncated: bool
    chat_template: ChatTemplate
    error: TokenizerError | None
    sources: Sources
    files: TokenizerFiles
    added_tokens_check: AddedTokensCheck | None
    transformers_version: str | None
    from_files: FromFiles | None = None
