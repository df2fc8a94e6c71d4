"""Shapes of what crosses the wire: the envelope, the framed reply, each task's request and reply.

Re-exported by :mod:`introspect.remote.contract`; import them from there. Requests
are ``total=False``: the remote side fills a missing key from the defaults in
contract (a missing ``model_path`` is reported, never a crash).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, TypedDict, Union

__all__ = [
    "Envelope",
    "Reply",
    "ModelRequest",
    "ModelSections",
    "ModelReply",
    "TokenizerRequest",
    "ModelCodeRequest",
    "HealthRequest",
    "HealthReply",
    "PreflightRequest",
    "PreflightReply",
    "DiscoverRequest",
    "DiscoverReply",
    "HashesReply",
    "ResolveRequest",
    "ResolveReply",
    "FingerprintRequest",
    "EchoRequest",
    "EchoReply",
    "TaskRequest",
    "BatchEntry",
    "PythonFacts",
    "SupervisorFacts",
    "RawFacts",
]

if TYPE_CHECKING:  # names only: contract imports this module at run time
    from .contract import ErrorRecord, TargetBlock
    from .sections import (
        Drafter,
        EnvironmentFacts,
        FilesFacts,
        Fingerprint,
        HashesFacts,
        SafetensorsFacts,
        TokenizerFilesFacts,
        TokenizerProbe,
    )
    from .wire_preflight import (
        ConfigIds,
        DiskFacts,
        EndpointFacts,
        MarkersFacts,
        MasksFacts,
        MaskTokenFacts,
        PackagesFacts,
        PreflightModel,
        PreflightTokenizer,
        TemplateFacts,
    )


class Envelope(TypedDict, total=False):
    """The one JSON line the controller writes on the remote interpreter's stdin."""

    protocol: int
    probe_version: str
    task: str
    request: Dict[str, Any]
    isolate: bool  # run the task in a supervised child (own process group, private caches)
    timeout: Optional[float]  # seconds, for an isolated task
    sources: Dict[str, str]  # dotted module name -> source, served from memory
    packages: List[str]  # the dotted names in sources that are packages
    # Several tasks in one session instead of ``task``: [{key, task, request, isolate, timeout}]
    batch: List[Dict[str, Any]]  # BatchEntry each, read as parsed JSON: the remote side checks every key


class Reply(TypedDict, total=False):
    """The framed document between BEGIN and END; ``fatal`` alone when Python is too old."""

    protocol: int
    probe_version: Optional[str]
    pid: int
    facts: Any  # the task's reply
    errors: List[ErrorRecord]
    seconds: float
    supervisor: SupervisorFacts  # isolated tasks
    python: PythonFacts
    fatal: Dict[str, Any]
    key: Any  # in a batch: the key of the task this reply answers
    stopped: bool  # in a batch: this check's digest matched, so no other task ran


class PythonFacts(TypedDict, total=False):
    """The interpreter that ran the task (remote/runner.py)."""

    version: List[int]  # [3, 11, 7]
    executable: str


class SupervisorFacts(TypedDict, total=False):
    """How an isolated task's child ended (remote/supervisor.py); keys vary with how it ended."""

    seconds: float
    exit_status: Optional[int]
    timeout: float
    stderr_tail: str
    temp_dir_removed: bool
    subreaper: bool
    limits: Dict[str, Any]  # remote/limits.py task_limits: the limits the child ran under
    peak_rss: Optional[int]
    memory_limit: int


# ---------------------------------------------------------------- model, tokenizer


class ModelRequest(TypedDict, total=False):
    model_path: str
    json_cap: int
    max_header: int
    deadline: float  # seconds for all sections
    sections: List[str]  # default: all of ModelReply's sections


class ModelSections(TypedDict, total=False):
    """The raw sections of task ``model``; raw facts (contract.RawFacts) carry them as they came.

    A section is null when it ran past the deadline (an error says so).
    """

    fingerprint: Optional[Fingerprint]
    files: Optional[FilesFacts]
    tokenizer_files: Optional[TokenizerFilesFacts]
    safetensors: Optional[SafetensorsFacts]
    drafters: Optional[List[Drafter]]
    environment: Optional[EnvironmentFacts]
    hashes: Optional[HashesFacts]
    engines: Optional[Dict[str, Any]]  # facts/host/engines.py: serving engines read from their sources
    gpus: Optional[Dict[str, Any]]  # facts/host/gpus.py: nvidia-smi query and topology


class ModelReply(ModelSections, total=False):
    """Task ``model``: the sections, their errors and how long each took."""

    errors: List[ErrorRecord]
    timings: Dict[str, float]


class TokenizerRequest(TypedDict, total=False):
    """Task ``tokenizer`` (isolated); its reply is :class:`~introspect.remote.sections.TokenizerProbe`."""

    model_path: str
    trust_remote_code: bool
    sample: bool
    json_cap: int
    memory_limit: int  # bytes of address space, read by the supervisor (remote/supervisor.py)


class ModelCodeRequest(TypedDict, total=False):
    """Task ``model_code`` (isolated): the model's own code, imported under the probe's limits."""

    model_path: str
    trust_remote_code: bool
    memory_limit: int  # bytes of address space, read by the supervisor


# ---------------------------------------------------------------- health, preflight


class HealthRequest(TypedDict, total=False):
    imports: List[str]  # module names, each imported in a fresh interpreter
    model_dirs: List[str]  # paths whose filesystem free space is reported
    import_timeout: float  # seconds per import; the import's process group is killed after
    nvidia_smi: bool  # query GPUs when nvidia-smi is on PATH


class HealthReply(TypedDict, total=False):
    probe_version: str
    # {version, version_info, executable, prefix, base_prefix, in_venv, implementation, marker_env}
    python: Optional[Dict[str, Any]]
    distributions: Dict[str, Dict[str, Any]]  # normalized name -> {name, version, requires: [Requires-Dist]}
    # module -> {ok, error: null | {type, message}, seconds, wall_seconds?, stderr_tail?}
    imports: Dict[str, Dict[str, Any]]
    disk: Dict[str, Dict[str, Any]]  # path -> {free_bytes, total_bytes, error: null | {type, message}}
    # null without nvidia-smi; else {count, devices: [{index, name, memory_used_mib, memory_total_mib,
    # driver_version}], driver_version, cuda_version, error}
    gpus: Optional[Dict[str, Any]]
    errors: List[ErrorRecord]  # {probe, type, message, path?}
    timings: Dict[str, float]  # section -> seconds


class PreflightRequest(TypedDict, total=False):
    model_path: str
    trust_remote_code: bool
    parts: List[str]  # "light" and/or "tokenizer" (isolated)
    endpoint: Optional[str]
    endpoint_timeout: float
    api_key_env: Optional[str]  # the key's *name*; its value is never reported
    output_dir: Optional[str]
    pipeline_packages: List[str]
    decode_budget_s: float


class PreflightReply(TypedDict, total=False):
    """Evidence only; the verdicts are made on the controller (introspect.checks).

    Each section's shape is in :mod:`introspect.remote.wire_preflight`; a section the probe
    could not build is ``{"error": ErrorRecord}`` alone."""

    model: PreflightModel
    endpoint: EndpointFacts  # light part
    disk: DiskFacts
    packages: PackagesFacts
    config: ConfigIds  # tokenizer part
    tokenizer: PreflightTokenizer
    template: TemplateFacts
    markers: MarkersFacts
    masks: MasksFacts
    mask_token: MaskTokenFacts
    errors: List[ErrorRecord]
    timings: Dict[str, float]


# ---------------------------------------------------------------- discover, resolve, fingerprint, echo


class DiscoverRequest(TypedDict, total=False):
    mode: str  # "discover" (default) or "hashes"
    roots: List[str]  # reported when missing
    optional_roots: List[str]  # skipped quietly when missing
    max_depth: int
    use_hf_scanner: bool
    hf_cache: Optional[str]
    json_cap: int
    deadline: float
    max_models: int
    model_path: str  # mode "hashes"


class DiscoverReply(TypedDict, total=False):
    models: List[Dict[str, Any]]  # one entry per real model directory
    roots: List[Dict[str, Any]]  # {path, status, required}
    hf_cache: Dict[str, Any]  # {path, exists, scanner, scanner_version, repos}
    truncated: bool
    dirs_visited: int
    errors: List[ErrorRecord]


class HashesReply(TypedDict):
    hashes: HashesFacts
    errors: List[ErrorRecord]


class ResolveRequest(TypedDict, total=False):
    spec: str  # "org/name[@REV]"
    cache_dir: Optional[str]


class ResolveReply(TypedDict):
    spec: Any
    cache_dir: str
    path: Optional[str]
    repo_id: Optional[str]
    revision: Optional[str]
    commit: Optional[str]
    refs: List[str]
    cached_revisions: List[Dict[str, Any]]  # {commit, refs, mtime, path}
    errors: List[ErrorRecord]


class FingerprintRequest(TypedDict):
    model_path: str


class EchoRequest(TypedDict, total=False):
    """Task ``echo``, for the transport tests."""

    pad: int  # characters of output padding
    sleep: float  # seconds


# Every task's request, as the controller builds it (task ``gpus`` takes ``{}``).
TaskRequest = Union[ModelRequest, TokenizerRequest, ModelCodeRequest, HealthRequest, PreflightRequest,
                    DiscoverRequest, ResolveRequest, FingerprintRequest, EchoRequest]


class BatchEntry(TypedDict, total=False):
    """One task of a batch envelope (remote/batch.py)."""

    key: Any  # the caller's, echoed in the reply
    task: str
    request: TaskRequest
    isolate: bool
    timeout: Optional[float]
    stop_if_digest: Optional[str]  # see client.runner.Channel.stop_if_digest


class EchoReply(TypedDict):
    request: Dict[str, Any]
    pad: str
    pid: int
    pgid: int


class RawFacts(ModelSections, total=False):
    """``introspect.raw/v1``: what ``probe --save-raw`` writes and ``introspect profile`` reads.

    Sections are filled by the remote tasks (those of :class:`ModelSections` by the model
    task, ``tokenizer_probe`` by the isolated tokenizer task); the rest by the controller.
    """

    schema: str
    target: TargetBlock
    errors: List[ErrorRecord]
    fatal: Optional[Dict[str, Any]]
    options: Dict[str, Any]
    python: PythonFacts  # the interpreter that answered
    tokenizer_probe: Optional[TokenizerProbe]
    timings: Dict[str, Any]
    resources: Dict[str, Any]  # per isolated task, from its supervisor: {"peak_rss": bytes, "limits": {...}}
    cache: Optional[Dict[str, Any]]
    resolved: Optional[Dict[str, Any]]
    # The isolated model-code task's reply (remote/tasks/model_code.py): built, params, layers, config,
    # config_dict (the config class's to_dict()), error.
    model_code_probe: Optional[Dict[str, Any]]
    settings: Optional[Dict[str, Any]]  # which inventory and remote-code policy a live run used (userconfig.py)
