"""Shapes of the raw-facts sections, as the remote facts modules emit them.

Re-exported by :mod:`introspect.remote.contract`; import them from there. Standard
library only, Python 3.8 (``typing`` spellings; the functional ``TypedDict`` form
where a key is a Python keyword, such as ``class``). A key typed ``Optional`` is
always present and may be null; ``total=False`` marks keys that may be absent.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, TypedDict

from .sections_added import AddedTokenItem, AddedTokensCheck
from .sections_engines import ClassSite, CodeSite, EngineReadiness, MethodReadiness, ReadinessCheck

__all__ = [
    "ShortError",
    "TokenPair",
    "ListingRow",
    "IndexSummary",
    "CustomCodeEntry",
    "FilesFacts",
    "ChatTemplateEntry",
    "TokenizerJsonSummary",
    "TiktokenSummary",
    "SentencepieceFile",
    "TekkenSummary",
    "VocabChoice",
    "ModuleInfo",
    "RemoteCodeInfo",
    "TokenizerFilesFacts",
    "TensorGroup",
    "ShardSummary",
    "SafetensorsFacts",
    "Drafter",
    "HashedFile",
    "WeightsHashes",
    "HashesFacts",
    "Fingerprint",
    "ModuleEntry",
    "EnvironmentFacts",
    "AddedTokenItem",
    "AddedTokensCheck",
    "TokenizerError",
    "LoadedChatTemplate",
    "TokenizerProbe",
    "CodeSite",
    "ClassSite",
    "ReadinessCheck",
    "MethodReadiness",
    "EngineReadiness",
]


class ShortError(TypedDict):
    """The ``{type, message}`` form of an error kept inside facts."""

    type: str
    message: str


class TokenPair(TypedDict):
    token: str
    id: Optional[int]


# ---------------------------------------------------------------- files


class ListingRow(TypedDict):
    """One entry of the model dir; symlinks report their target's kind and size."""

    name: str
    kind: str  # "file" | "dir" | "other" | "broken"
    size: Optional[int]
    link: Optional[str]
    resolved: Optional[str]
    link_error: Optional[str]  # "dangling" | "symlink-loop" | "permission-denied" | ...


class IndexSummary(TypedDict):
    """model.safetensors.index.json, summarised (never shipped whole)."""

    file: str
    total_size: Optional[int]
    weight_map_entries: int
    shards: List[str]
    missing_shards: List[str]


class CustomCodeEntry(TypedDict):
    """One Python file of the model's own code (an auto_map module or one it imports)."""

    file: str
    module: str
    sha256: Optional[str]
    size: Optional[int]
    imports: List[str]  # top-level, third-party
    optional_imports: List[str]  # only inside try: blocks
    local_imports: List[str]  # absolute imports of sibling files
    relative_imports: List[str]
    referenced_by: List[str]
    repo: Optional[str]  # "org/name--module.Class": code from another hub repo
    error: Optional[ShortError]


class _NativeConfig(TypedDict, total=False):
    """Only for a Mistral/Meta native dir: its params.json stands in for config.json."""

    config_source: str  # "params.json"
    native_params: Any  # the raw params.json


class FilesFacts(_NativeConfig):
    """Section ``files``: the model dir's listing, configs and custom code."""

    model_path: str
    real_path: Optional[str]
    status: str  # "ok" or the error type of the model path
    listing: List[ListingRow]
    listing_total: int
    listing_truncated: bool
    total_size: int
    config: Optional[Dict[str, Any]]
    generation_config: Optional[Dict[str, Any]]
    preprocessor_config_present: bool
    index: Optional[IndexSummary]
    auto_map_sources: Dict[str, Optional[str]]  # file -> null or the error type of reading it
    custom_code: List[CustomCodeEntry]
    custom_code_truncated: bool


# ---------------------------------------------------------------- tokenizer files


class ChatTemplateEntry(TypedDict):
    source: str  # "chat_template.jinja" | "additional_chat_templates/x.jinja" | "tokenizer_config.json" ...
    name: str
    text: str
    sha256: str
    chars: int


class TokenizerJsonSummary(TypedDict, total=False):
    """tokenizer.json summarised on the host (real ones reach 33 MB)."""

    file: str
    size: int
    sha256: str
    model_type: Any
    vocab_size: Optional[int]
    max_vocab_id: Optional[int]
    merges: Optional[int]
    added_tokens: List[Dict[str, Any]]  # {"id", "content", "special"}
    normalizer: Optional[str]
    pre_tokenizer: Optional[str]
    decoder: Optional[str]
    post_processor: Optional[Dict[str, Any]]  # {"type", "single", "bos", "eos"}
    vocab_lookup: Dict[str, int]


class TiktokenSummary(TypedDict, total=False):
    file: str
    size: int
    sha256: str
    entries: int
    distinct_tokens: int
    distinct_ranks: int
    min_rank: Optional[int]
    max_rank: Optional[int]
    dense: bool
    gaps: int
    duplicate_tokens: int
    duplicate_ranks: int
    single_bytes: int
    malformed_lines: int
    malformed_examples: List[Dict[str, Any]]  # {"line", "reason"}


class SentencepieceFile(TypedDict, total=False):  # a ModelProto, read by facts.sentencepiece_model
    file: str
    size: int
    sha256: Optional[str]
    model_type: str  # "unigram" | "bpe" | "word" | "char"
    pieces: int
    types: Dict[str, int]  # piece type -> count
    byte_fallback: bool
    trainer_spec: Dict[str, Any]
    normalizer: Dict[str, Any]
    bos: Optional[TokenPair]
    eos: Optional[TokenPair]
    pad: Optional[TokenPair]
    unk: Optional[TokenPair]
    special_pieces: List[Dict[str, Any]]  # {"id", "token", "type", "score"}: unknown, control, user-defined
    special_pieces_total: int
    special_pieces_truncated: bool  # cut at facts.sentencepiece_model MAX_LISTED_PIECES
    lookup: Dict[str, int]  # the configs' named tokens found among the pieces


class TekkenSummary(TypedDict, total=False):  # Mistral's tekken.json, by facts.tekken (mistral_common's rules)
    file: str
    size: int
    sha256: str
    version: Optional[str]
    pattern: Optional[str]
    num_vocab_tokens: Optional[int]
    vocab_entries: Optional[int]
    default_vocab_size: int
    default_num_special_tokens: int
    vocab_size: int
    inner_vocab_size: int
    special_tokens_source: str
    named_special_tokens: int
    special_tokens: List[TokenPair]
    bos: Optional[TokenPair]
    eos: Optional[TokenPair]
    pad: Optional[TokenPair]
    unk: Optional[TokenPair]
    multimodal: List[str]


class VocabChoice(TypedDict):  # the vocab file the fallback reads when several exist, and why
    kind: str  # "tiktoken" | "sentencepiece" | "tekken"
    file: str
    reason: str
    candidates: List[str]


# "class" is a keyword: the functional form.
ModuleInfo = TypedDict("ModuleInfo", {
    "ref": str, "module": Optional[str], "class": str, "file": Optional[str], "exists": bool,
    "size": Optional[int], "sha256": Optional[str]})


class _StaticSpecials(TypedDict, total=False):
    static: Dict[str, Any]  # facts.static_specials.scan_specials, when the class's file exists


class RemoteCodeInfo(_StaticSpecials):
    """The auto_map tokenizer class and what its source declares."""

    auto_map: Any
    auto_map_source: Optional[str]
    slow: Optional[ModuleInfo]
    fast: Optional[ModuleInfo]
    num_reserved_special_tokens: Optional[int]
    reserved_extra: int
    reserved_declared_in: Optional[str]
    placeholder: Optional[str]


class TokenizerFilesFacts(TypedDict):
    """Section ``tokenizer_files``: tokenizer facts from the raw files (no tokenizer library)."""

    tokenizer_config: Optional[Dict[str, Any]]  # minus "chat_template" (moved to chat_templates)
    special_tokens_map: Optional[Dict[str, Any]]
    chat_templates: List[ChatTemplateEntry]
    tokenizer_json: Optional[TokenizerJsonSummary]
    tiktoken: List[TiktokenSummary]
    sentencepiece: List[SentencepieceFile]
    tekken: Optional[TekkenSummary]
    remote_code: Optional[RemoteCodeInfo]
    vocab_choice: Optional[VocabChoice]


# ---------------------------------------------------------------- safetensors


class TensorGroup(TypedDict):
    template: str  # dotted name, all-digit components as '#'
    dtype: str
    shape: List[int]
    count: int
    layer_ids: Any  # a set while grouping, a sorted list of ints in the facts


class ShardSummary(TypedDict):
    file: str
    size: Optional[int]
    header_len: Optional[int]
    bytes_read: int
    tensors: int
    metadata: Optional[Dict[str, Any]]
    error: Optional[Dict[str, str]]  # {"type", "message"}
    groups: List[TensorGroup]


class SafetensorsFacts(TypedDict):
    index: Optional[IndexSummary]
    shards: List[ShardSummary]
    bytes_read: int
    tensors: int


# ---------------------------------------------------------------- drafters, hashes, fingerprint


class Drafter(TypedDict):
    path: str
    relation: str  # "child" | "sibling"
    matched: List[str]
    config: Any


class HashedFile(TypedDict):
    sha256: Optional[str]
    size: int


class WeightsHashes(TypedDict):
    index: Optional[Dict[str, Any]]  # {"file", "sha256", "total_size"}
    shards: Dict[str, int]  # name -> size (stat only, never read)
    missing_shards: List[str]


class HashesFacts(TypedDict):
    files: Dict[str, HashedFile]
    skipped: List[Dict[str, Any]]  # {"name", "size", "reason"}
    weights: WeightsHashes
    truncated: bool


class Fingerprint(TypedDict):
    digest: str
    entries: int


# ---------------------------------------------------------------- environment


class ModuleEntry(TypedDict, total=False):
    available: bool
    distribution: Optional[str]
    distribution_source: Optional[str]  # "installed" | "static-map" | "module-name" | null
    error: str


class EnvironmentFacts(TypedDict, total=False):
    python_version: str
    python_version_info: List[Any]
    python_executable: str
    prefix: str
    base_prefix: str
    in_venv: bool
    implementation: Optional[str]
    platform: Optional[str]
    machine: Optional[str]
    packages: Dict[str, Optional[str]]
    modules: Dict[str, ModuleEntry]
    missing_modules: List[str]
    env_vars: Dict[str, str]


# ---------------------------------------------------------------- loaded tokenizer


class _TokenizerErrorKeys(TypedDict):
    type: str
    message: str
    cause: str  # "missing-package" | "remote-code-refused" | "missing-files" | "incompatible-code" | "exception" | a limit's (remote/limits.py)
    missing_packages: List[str]
    traceback: List[str]


class TokenizerError(_TokenizerErrorKeys, total=False):
    message_chars: int  # the exception's whole message, in characters (``message`` is cut at 2,000)


class LoadedChatTemplate(TypedDict, total=False):
    text: str  # at most TEMPLATE_TEXT_CAP characters; sha256 is of the whole template
    sha256: str
    source: str
    names: Optional[List[str]]
    size: int  # size (characters) and truncated: only when the text was cut
    truncated: bool


TokenizerProbe = TypedDict("TokenizerProbe", {
    "loaded": bool, "class": Optional[str], "module": Optional[str], "transformers_version": Optional[str],
    "tokenizers_version": Optional[str], "is_fast": Optional[bool], "vocab_size": Optional[int],
    "len": Optional[int], "bos": Optional[TokenPair], "eos": Optional[TokenPair], "pad": Optional[TokenPair],
    "unk": Optional[TokenPair], "mask": Optional[TokenPair], "special_tokens": List[Dict[str, Any]],
    "special_tokens_total": int, "special_tokens_truncated": bool,  # the list's true length, and whether it was cut
    "added_tokens": Optional[int], "added_tokens_check": Optional[AddedTokensCheck],
    "chat_template": Optional[LoadedChatTemplate], "sample": Optional[Dict[str, Any]],
    "import_seconds": Optional[float], "load_seconds": Optional[float], "error": Optional[TokenizerError],
    "fact_errors": List[Dict[str, Any]],  # {"fact", "type", "message"}: a fact that raised after loading
    # Only when transformers failed and the layout's own library loaded it (facts.tokenizer_native_load):
    "source": str,  # "tokenizers" | "mistral_common" | "sentencepiece" | "tiktoken"
    "transformers_error": Optional[TokenizerError],
    "read": List[str],  # the files the native load read (the vocabulary file, the code its specials came from)
    "partial": List[str],  # the fields it could not know ([] or ["vocab_size", "len", "special_tokens"])
}, total=False)
"""Section ``tokenizer_probe``: the tokenizer loaded through transformers, in its own process."""

