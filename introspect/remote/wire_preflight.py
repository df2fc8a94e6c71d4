"""Shapes of the sections of task ``preflight``'s reply (:class:`~introspect.remote.wire.PreflightReply`).

Each section is built by one function on the remote side, which documents it (the module
named at each class); these are annotations only. Every key is optional (``total=False``): a
section the probe could not build is ``{"error": ErrorRecord}`` alone, and raw evidence may
be damaged, so the controller still reads each key with ``.get`` and checks its type.
Re-exported by :mod:`introspect.remote.contract`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, TypedDict

__all__ = [
    "PreflightModel",
    "HttpCall",
    "ModelMatch",
    "EndpointFacts",
    "DiskFacts",
    "PackageItem",
    "PackagesFacts",
    "ConfigIds",
    "DecodeFailure",
    "DecodeSweep",
    "PreflightTokenizer",
    "TextDiff",
    "RoundTrip",
    "IdsDiff",
    "RenderLimit",
    "Render",
    "Runaway",
    "TemplateFacts",
    "Marker",
    "EndOfTurn",
    "MarkersFacts",
    "AssistantMask",
    "PrefixTurn",
    "PrefixProperty",
    "MasksFacts",
    "MaskCandidate",
    "MaskTokenFacts",
]

if TYPE_CHECKING:  # names only: contract imports this module at run time
    from .contract import ErrorRecord
    from .sections import AddedTokensCheck, ShortError, TokenizerError, TokenPair


class PreflightModel(TypedDict, total=False):
    """tasks/preflight.py ``_model_dir``."""

    path: str
    status: str  # "ok" | "not-found" | "not-a-directory" | "permission-denied"
    home: str


# ---------------------------------------------------------------- light part


class HttpCall(TypedDict, total=False):
    """One request to the endpoint (facts/host/endpoint.py): ``/v1/models`` or the one-token completion."""

    ok: bool
    status: Optional[int]
    seconds: Optional[float]
    error: Optional[ShortError]
    ids: List[str]  # /v1/models only
    roots: List[Optional[str]]
    model: Optional[str]  # the completion only
    finish_reason: Optional[str]
    completion_tokens: Optional[int]


class ModelMatch(TypedDict):
    id: str
    root: Optional[str]
    by: str  # "id-path" | "root-name" | ...


class EndpointFacts(TypedDict, total=False):
    """facts/host/endpoint.py ``check_endpoint``."""

    url: Optional[str]
    skipped: bool
    api_key_env: Optional[str]  # the key's name; its value is never reported
    api_key_present: Optional[bool]
    models: Optional[HttpCall]
    matched: Optional[ModelMatch]
    completion: Optional[HttpCall]


class DiskFacts(TypedDict, total=False):
    """facts/host/disk_space.py ``check_disk``."""

    output_dir: str
    defaulted: bool
    checked_path: str
    exists: bool
    writable: bool
    free_bytes: int
    total_bytes: int


class PackageItem(TypedDict, total=False):
    name: str
    kind: str  # "distribution" | "module"
    required_by: str  # "pipeline" | "tokenizer code"
    version: Optional[str]
    available: bool
    install: str


class PackagesFacts(TypedDict, total=False):
    """facts/host/packages.py ``check_packages``."""

    python: str
    prefix: str
    in_venv: bool
    tokenizer_code: List[str]
    items: List[PackageItem]
    missing: List[str]


# ---------------------------------------------------------------- tokenizer part


class ConfigIds(TypedDict, total=False):
    """facts/model/configs.py ``vocab_and_eos``."""

    vocab_size: Optional[int]
    vocab_size_source: Optional[str]
    config_eos: Optional[List[int]]
    config_eos_source: Optional[str]
    generation_eos: Optional[List[int]]
    generation_config_present: bool
    errors: List[ErrorRecord]


class DecodeFailure(TypedDict):
    id: int
    error: str


class DecodeSweep(TypedDict, total=False):
    """facts/tokenizer/decode_sweep.py ``decode_sweep``."""

    total: int
    checked: int
    complete: bool
    failures: int
    items: List[DecodeFailure]
    items_total: int
    items_truncated: bool
    seconds: float


# tasks/preflight.py ``_load`` and ``_tokenizer_facts`` ("class" is a keyword: the functional form).
PreflightTokenizer = TypedDict("PreflightTokenizer", {
    "loaded": bool,
    "trust_remote_code": bool,
    "error": Optional["TokenizerError"],
    "transformers_version": Optional[str],
    "load_seconds": float,
    "class": str,
    "is_fast": bool,
    "len": Optional[int],
    "vocab_size": Optional[int],
    "bos": Optional["TokenPair"],
    "eos": Optional["TokenPair"],
    "pad": Optional["TokenPair"],
    "unk": Optional["TokenPair"],
    "mask": Optional["TokenPair"],
    "declared_classes": Optional[List[str]],
    "added_tokens_check": Optional["AddedTokensCheck"],
    "decode_sweep": Optional[DecodeSweep],
}, total=False)


class TextDiff(TypedDict, total=False):
    """facts/tokenizer/chat_template.py ``first_diff``; the loss masks add ``what`` was compared."""

    what: str
    offset: int
    expected: str
    got: str


class RoundTrip(TypedDict, total=False):
    """facts/tokenizer/chat_template.py ``roundtrip``."""

    ok: bool
    tokens: int
    ids: List[int]
    diff: TextDiff
    ok_without_cleanup: bool


class IdsDiff(TypedDict):
    offset: int
    template: List[int]
    encode: List[int]


class RenderLimit(TypedDict):
    cause: str
    message: str


class Render(TypedDict, total=False):
    """facts/tokenizer/chat_template.py ``_render_one`` (``limit`` is moved to the template's ``runaway``)."""

    ok: bool
    error: Optional[ShortError]
    text: str
    chars: int
    tail: str
    roundtrip: Optional[RoundTrip]
    template_ids_match: Optional[bool]
    template_ids_diff: IdsDiff
    template_ids_error: ShortError
    tool_rendered: bool  # the "tools" render only


class Runaway(RenderLimit):
    variant: str  # the render that met the limit


class TemplateFacts(TypedDict, total=False):
    """facts/tokenizer/chat_template.py ``describe_template``, filled by ``render_all``."""

    present: bool
    sha256: str
    chars: int
    variables: List[str]
    uses_tools: bool
    thinking_switch: Optional[str]
    generation_markers: bool
    mentions_reasoning: bool
    text: str
    renders: Dict[str, Render]
    source: Optional[str]
    name: Optional[str]
    runaway: Runaway
    generation_prompt_text: str
    switch_changes_render: bool


class Marker(TypedDict):
    """facts/tokenizer/turn_markers.py ``_marker``."""

    text: str
    ids: List[int]
    single: bool
    special: bool
    added: bool


class EndOfTurn(TypedDict, total=False):
    text: str
    id: Optional[int]
    single: bool


class MarkersFacts(TypedDict, total=False):
    """facts/tokenizer/turn_markers.py ``find_markers``."""

    items: List[Marker]
    end_of_turn: Optional[EndOfTurn]
    source_render: Optional[str]


class AssistantMask(TypedDict, total=False):
    """facts/tokenizer/loss_masks.py ``_assistant_mask``."""

    tried: bool
    ok: bool
    masked_tokens: int
    tokens: int
    masked_text: str
    covers_turns: bool
    error: Optional[ShortError]


class PrefixTurn(TypedDict, total=False):
    index: int
    prompt_prefix: bool
    turn_prefix: bool
    prompt_token_prefix: bool
    turn_token_prefix: bool
    ok: bool
    diff: TextDiff


class PrefixProperty(TypedDict, total=False):
    """facts/tokenizer/loss_masks.py ``prefix_property`` (``{"error"}`` when it raised)."""

    ok: bool
    turns: List[PrefixTurn]
    error: Any  # guards.safe_get's record of what raised


class MasksFacts(TypedDict, total=False):
    """facts/tokenizer/loss_masks.py ``check_masks``."""

    generation_markers: bool
    assistant_tokens_mask: AssistantMask
    prefix: Dict[str, Optional[PrefixProperty]]


class MaskCandidate(TypedDict, total=False):
    token: Optional[str]  # None: an embedding row no token uses
    id: int
    kind: str  # "mask_token" | "unk" | "reserved" | "unassigned-row"
    used_by_template: bool


class MaskTokenFacts(TypedDict, total=False):
    """facts/tokenizer/mask_token.py ``mask_token``."""

    present: Optional[MaskCandidate]
    vocab_size: Optional[int]
    used_ids: int
    candidates: List[MaskCandidate]
