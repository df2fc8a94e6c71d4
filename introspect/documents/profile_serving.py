"""The profile's ``engines``, ``gpus`` and ``plan`` sections (introspect/analysis/serving/section.py);
the plan section is also the body of ``introspect.plan/v1``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from introspect.documents.base import Number, Record


class Registration(Record):
    """Whether an engine registers an architecture class, and where (analysis/serving/engines.py)."""

    architecture: str | None
    registered: bool
    module: str | None
    class_: str | None = Field(alias="class")
    source: str | None


class EngineSpeculative(Record):
    source: str | None
    algorithms: list[str]
    dflash: bool
    eagle3: bool


class EngineDrafter(Record):
    class_: str = Field(alias="class")
    kind: str
    match: str
    module: str | None
    file: str | None


Verdict = Literal["yes", "no", "unknown"]


class CodeSite(Record):
    """A line of the engine (path relative to its package) that states a requirement."""

    file: str | None
    line: int | None
    text: str | None


class ClassSite(Record):
    """Where a model class provides a requirement (the class statement or the hook's def)."""

    file: str | None
    line: int | None
    class_: str | None = Field(alias="class")


class ReadinessCheck(Record):
    """One thing an engine requires of the model class for a method (remote/facts/host/engine_rules.py)."""

    requires: str
    verdict: Verdict
    why: str
    requirement: CodeSite | None
    provided_by: ClassSite | None
    delegate: dict[str, Any] | None  # the wrapped model a hook hands the call to


class MethodReadiness(Record):
    """Can the engine serve this speculative method for the model's class (analysis/serving/engine_readiness.py)."""

    method: str
    kind: str  # dflash, dspark, eagle, eagle3, mtp, ngram, standalone, draft_model, other
    aliases: list[str]
    verdict: Verdict
    why: str
    requires: str
    requirement: CodeSite | None
    provided_by: ClassSite | None
    checks: list[ReadinessCheck]
    note: str | None


class EngineReadiness(Record):
    architecture: str | None
    class_site: ClassSite | None
    files_parsed: int | None
    methods: list[MethodReadiness]
    notes: list[str]


class Engine(Record):
    """One serving engine installed in the venv (sglang, vllm, ...) as ``describe_engine`` reports it."""

    name: str | None
    version: str | None
    location: str | None
    layout: str | None
    notes: list[str]
    registered_architectures: int | None
    architecture: Registration | None
    text_architecture: Registration | None
    speculative: EngineSpeculative | None
    drafters: list[EngineDrafter]
    generic_drafters: list[str]
    quantization: dict[str, Any] | None  # the engine's quantization methods vs the checkpoint's
    readiness: EngineReadiness | None = None  # per speculative method, for this model's class


class Engines(Record):
    probed: bool
    searched: list[str]
    engines: list[Engine]


class Interconnect(Record):
    summary: str
    links: dict[str, int]  # nvidia-smi topo link kind -> GPU pairs


class Gpus(Record):
    """GPU facts of the host (analysis/serving/gpus.py); ``devices`` are nvidia-smi rows as the remote side read them."""

    probed: bool
    available: bool | None
    reason: str | None = None
    count: int
    models: dict[str, int] | None = None  # GPU name -> count
    devices: list[dict[str, Any]]
    memory_total_mib_min: int | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    interconnect: Interconnect | None = None


class WeightsBytes(Record):
    source: str
    total_bytes: int
    bytes: dict[str, int]  # category (experts, embedding, ...) -> bytes
    shards: int
    shards_failed: int


class GpuBudget(Record):
    """The GPUs a plan is made for (analysis/serving/plan.py ``GpuBudget``)."""

    count: int
    memory_bytes: int
    name: str | None
    source: str
    per_node: int | None = None  # --gpus-per-node (multi-node plans only)


class ContextFix(Record):
    """The longest --max-model-len a layout holding the weights can serve (analysis/serving/plan.py ``_context_fix``)."""

    layout: str
    max_context_fits: int
    max_model_len: int


class LayoutCheck(Record):
    check: str
    ok: bool
    detail: str


class Layout(Record):
    """One candidate TP / EP / PP layout (analysis/serving/plan.py ``layout``)."""

    name: str
    tp: int
    ep: int
    pp: int
    gpus: int
    replicas: int
    weight_bytes_per_gpu: int
    usable_bytes_per_gpu: int
    kv_room_bytes_per_gpu: int
    kv_bytes_per_token_per_gpu: int
    kv_tokens_per_gpu: int | None
    kv_tokens_total: int | None
    fits: bool
    reasons: list[str]
    checks: list[LayoutCheck]
    nodes: int | None = None  # --gpus-per-node (multi-node plans only)
    tp_across_nodes: bool | None = None
    state_sequences_per_gpu: int | None = None
    max_context_sequences: int | None = None
    # One request of max_model_len must fit beside the weights (analysis/serving/plan_context.py).
    max_model_len: int | None = None
    kv_dtype: str | None = None
    kv_one_request_bytes_per_gpu: int | None = None
    max_context_fits: int | None = None
    concurrent_requests: int | None = None
    context_len: int | None = None
    concurrent_requests_at_context_len: int | None = None
    kv_bytes_per_token: int | None = None


class DrafterServing(Record):
    """How to serve the drafter with the chosen engine (analysis/serving/drafter_config.py ``_serving``)."""

    args: list[str]
    draft_tokens: int | None
    draft_tokens_rule: str
    source: str


class PlanDflashDrafter(Record):
    target_layer_ids: list[int]
    ids_key: str
    ids_convention: str
    draft_taps: int
    draft_layers: int
    block_size: int
    mask_token: str | None
    mask_token_id: int | None
    serving: DrafterServing


class PlanEagle3Drafter(Record):
    aux_layer_ids: list[int]
    ids_key: str
    ids_convention: str
    draft_vocab_size: int | None
    serving: DrafterServing


class PlanDrafter(Record):
    """The drafter plan in the chosen engine's conventions (analysis/serving/drafter_config.py ``plan_drafter``)."""

    engine: str
    engine_version: str | None
    conventions: str
    conventions_known: bool
    choice: str
    unknown: str | None
    dflash: PlanDflashDrafter
    eagle3: PlanEagle3Drafter


class Plan(Record):
    weights: WeightsBytes | None
    gpus: GpuBudget | None
    memory_fraction: Number
    layouts: list[Layout]
    best: str | None
    reason: str | None
    max_model_len: int | None = None
    max_model_len_source: str | None = None
    kv_dtype: str | None = None
    kv_bytes_per_token: int | None = None
    context_len: int | None = None
    kv_rule: str | None = None
    context_fix: ContextFix | None = None
    drafter: PlanDrafter | None = None  # introspect plan only: the drafter plan in one engine's terms

