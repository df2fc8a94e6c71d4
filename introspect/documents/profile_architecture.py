"""The profile's ``architecture`` section (introspect/analysis/architecture/section.py and its helpers).

Family-dependent parts stay JSON objects (``dict[str, Any]``): ``evidence`` (config.json keys
and their values, as read), ``quantization`` (the checkpoint's own quantization_config keys),
and the model-code / weights witnesses whose keys follow the remote side's probes.
"""

from __future__ import annotations

from typing import Any

from introspect.documents.base import Number, Record


class Attention(Record):
    type: str | None
    num_heads: int | None
    num_kv_heads: int | None
    head_dim: int | None
    q_lora_rank: int | None
    kv_lora_rank: int | None
    qk_nope_head_dim: int | None
    qk_rope_head_dim: int | None
    v_head_dim: int | None
    sliding_window: int | None
    attention_chunk_size: int | None = None
    sparse_indexer: dict[str, Any] | None = None  # DeepSeek V3.2's lightning indexer


class Moe(Record):
    is_moe: bool | None
    routed_experts: int | None
    shared_experts: int | None
    experts_per_token: int | None
    n_group: int | None
    topk_group: int | None
    scoring_func: str | None
    topk_method: str | None
    moe_intermediate_size: int | None
    moe_layers: int | None
    dense_layers: int | None
    routed_scaling_factor: Number | None
    norm_topk_prob: bool | None


class LayerCounts(Record):
    layers: int | None
    moe_layers: int | None
    recurrent_layers: int | None
    sliding_layers: int | None


class LayerSources(Record):
    """What each witness says of the layers: config.json, the model code, the weights."""

    config: LayerCounts | None
    model_code: dict[str, Any] | None
    weights: dict[str, Any] | None


class Layers(Record):
    pattern: list[str] | None
    kinds: dict[str, int] | None  # layer kind -> count
    pure_attention: bool | None
    source: str | None = None
    ffn: list[str | None] | None = None
    ffn_source: str | None = None
    understood: bool | None = None
    unknown_keys: list[str] | None = None
    sources: LayerSources
    why: str | None
    settled_by: str | None = None  # "config_class" / "model_code" when that witness settled the layout


class ParamCounts(Record):
    total: int | None
    active: int | None


class ParamSources(Record):
    config: ParamCounts | None
    model_code: dict[str, Any] | None
    weights: dict[str, Any] | None


class ParamsWhy(Record):
    total: str | None
    active: str | None


class Params(Record):
    total: int | None
    active: int | None
    embedding: int | None
    source: str | None
    config_estimate: ParamCounts
    safetensors: dict[str, Any] | None  # the counts read from the safetensors headers
    breakdown: dict[str, int] | None = None  # component -> parameters
    vision: int | None = None
    assumptions: list[str]
    sources: ParamSources
    active_source: str | None
    why: ParamsWhy


class Mtp(Record):
    layers: int
    params: int | None
    active: int | None
    source: str | None
    safetensors: int | None = None


class KvKind(Record):
    """Per layer kind: KV bytes per token (attention) or state bytes per sequence (recurrent)."""

    layers: int
    bytes_per_token_per_layer: int | None = None
    bytes_per_token: int | None = None
    kv_shared_layers: int | None = None
    state_bytes_per_layer: int | None = None
    state_bytes_per_sequence: int | None = None


class KvCache(Record):
    dtype: str | None
    dtype_assumed: bool
    bytes_per_element: int | None
    bytes_per_token: int | None
    per_kind: dict[str, KvKind]
    state_bytes_per_sequence: int | None
    sliding_window_cap: int | None
    bytes_per_token_beyond_window: int | None
    compress_rates: dict[str, int] | None = None
    indexer_bytes_per_token_per_layer: int | None = None
    settled_by: str | None = None  # "model_code" when the built model's modules settled it
    why: str | None = None


class MaskToken(Record):
    id: int | None
    token: str | None
    kind: str


class DflashPlan(Record):
    hidden_size: int | None
    vocab_size: int | None
    num_target_layers: int | None
    stop_ids: list[int] | None  # null after a stand-in tokenizer, stop_ids_reason says why
    stop_ids_reason: str | None = None
    draft_layers: int
    block_size: int
    target_layer_ids: list[int]
    hidden_states_indices: list[int]
    rule: str
    mask_token: MaskToken | None
    mask_token_reason: str | None = None  # why mask_token is null


class Eagle3Plan(Record):
    hidden_size: int | None
    vocab_size: int | None
    num_target_layers: int | None
    stop_ids: list[int] | None
    stop_ids_reason: str | None = None
    draft_vocab_size: int | None
    aux_layer_ids: list[int]
    hidden_states_indices: list[int]
    rule: str


class DrafterPlan(Record):
    """What a DFlash / EAGLE-3 drafter for this target needs (analysis/serving/drafter_plan.py)."""

    convention: str
    dflash: DflashPlan
    eagle3: Eagle3Plan


class Speculative(Record):
    mtp_layers: int
    mtp_source: str | None
    drafters: list[dict[str, Any]]  # drafter directories found next to the model, as the remote side read them
    drafter_plan: DrafterPlan | None


class Evidence(Record):
    """Per fact, the config.json keys it was read from and their values (free-form config values);
    empty when there was no config.json."""

    num_layers: dict[str, Any] | None = None
    layers: dict[str, Any] | None = None
    attention: dict[str, Any] | None = None
    moe: dict[str, Any] | None = None
    quantization: dict[str, Any] | None = None
    params: dict[str, Any] | None = None
    kv_cache: dict[str, Any] | None = None
    speculative: dict[str, Any] | None = None


class Summary(Record):
    mixers: str | None = None
    attention: str | None = None
    experts: str | None = None
    size: str | None = None
    speculative: str | None = None
    confidence: str | None = None


class Confidence(Record):
    level: str
    reason: str
    verdicts: list[str]


class Architecture(Record):
    model_type: str | None
    text_model_type: str | None
    architectures: list[str] | None
    config_path: str | None
    nesting: list[str]
    num_layers: int | None
    hidden_size: int | None
    vocab_size: int | None
    max_context: int | None
    dtype: str | None
    attention: Attention
    moe: Moe
    layers: Layers
    params: Params
    mtp: Mtp
    quantization: dict[str, Any] | None  # method, bits, group_size, ... as the checkpoint declares them
    kv_cache: KvCache | None
    speculative: Speculative
    evidence: Evidence
    summary: Summary
    text_architectures: list[str] | None = None
    confirmed_by_weights: dict[str, Any] | None = None
    config_class: dict[str, Any] | None = None
    confidence: Confidence | None = None
    invalid_config: dict[str, Any] | None = None
