"""The profile's ``architecture`` section (introspect/analysis/architecture/section.py and its helpers).

The analysis builds these records directly; JSON comes from them at the edge. Only what is
read from outside stays a JSON object (``JSONObject``): ``evidence`` (config.json keys and
their values, as read) and the model-code witness's per-run layer descriptions and config
facts, whose keys follow the remote side's probe (remote/facts/model/model_code_layers.py).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from introspect.documents.base import Number, Record
from introspect.remote.contract import JSONObject


class SparseIndexer(Record):
    """DeepSeek-V3.2's lightning indexer (analysis/architecture/attention.py ``sparse_indexer``)."""

    kind: Literal["sparse_indexer"]
    index_topk: int
    index_n_heads: int
    index_head_dim: int


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
    sparse_indexer: SparseIndexer | None = None  # DeepSeek V3.2's lightning indexer


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


class CodeWitness(Record):
    """What the model-code witness said: built (its exact counts), failed (why) or skipped
    (analysis/architecture/witnesses.py ``model_code_witness``)."""

    status: Literal["built", "failed", "skipped"]
    cause: str | None = None
    stage: str | None = None
    reason: str | None = None
    missing_packages: list[str] | None = None
    class_: str | None = Field(default=None, validation_alias="class", serialization_alias="class")
    built_with: str | None = None
    remote_code: bool | None = None
    total: int | None = None  # without the MTP layers
    active: int | None = None
    mtp: int | None = None
    components: dict[str, int] | None = None  # component -> parameters
    experts_per_token: int | None = None
    moe_layers: int | None = None
    one_expert: int | None = None
    seconds: dict[str, Number] | None = None  # step -> seconds
    peak_rss_kib: int | None = None


class CodeLayerCounts(LayerCounts):
    """The layers as the built model's code shows them, with the task's own per-run descriptions."""

    runs: list[JSONObject]  # as the remote side sent them
    config: JSONObject  # the config class's facts the task sent (class, layer_types runs)


class WeightsConfirmation(Record):
    """Per-layer verdicts the safetensors headers confirm (true), contradict (false) or cannot
    tell (null); the last three only where such tensors exist (analysis/architecture/weights_check.py)."""

    moe_layers: bool | None
    mla_layers: bool | None
    recurrent_layers: bool | None = None
    indexer_layers: bool | None = None
    compressed_layers: bool | None = None


class LayerSources(Record):
    """What each witness says of the layers: config.json, the model code, the weights."""

    config: LayerCounts | None
    model_code: CodeLayerCounts | CodeWitness | None  # the witness's status when it built nothing
    weights: WeightsConfirmation | None


class Layers(Record):
    pattern: list[str] | None
    kinds: dict[str, int] | None  # layer kind -> count
    pure_attention: bool | None
    source: str | None = None
    ffn: list[str | None] | None = None
    ffn_source: str | None = None
    understood: bool | None = None
    unknown_keys: list[str] | None = None
    sources: LayerSources | None = None  # absent only when the witnesses could not be compared
    why: str | None = None
    settled_by: str | None = None  # "config_class" / "model_code" when that witness settled the layout


class ParamCounts(Record):
    total: int | None
    active: int | None


class WeightsCount(Record):
    total: int  # without the MTP layers
    mtp: int
    vision: int


class ParamSources(Record):
    config: ParamCounts | None
    model_code: CodeWitness | None
    weights: WeightsCount | None


class SafetensorsCount(Record):
    """The logical parameters the safetensors headers hold (analysis/architecture/safetensors_count.py);
    a count that met an absurd tensor keeps ``total`` 0 and names it in ``implausible``."""

    total: int
    implausible: list[str] | None = None
    by_dtype: dict[str, int] | None = None  # logical dtype -> parameters
    stored_bytes: int | None = None
    shards: int
    shards_failed: int
    tensors: int | None = None
    stored_elements: int | None = None
    excluded_elements: int | None = None
    text: int
    mtp: int
    vision: int


class ParamsWhy(Record):
    total: str | None
    active: str | None


class Params(Record):
    total: int | None
    active: int | None
    embedding: int | None
    source: str | None
    config_estimate: ParamCounts
    safetensors: SafetensorsCount | None  # the counts read from the safetensors headers
    breakdown: dict[str, int] | None = None  # component -> parameters
    vision: int | None = None
    assumptions: list[str]
    sources: ParamSources | None = None  # absent only when the witnesses could not be compared
    active_source: str | None = None
    why: ParamsWhy | None = None


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
    attention_sublayers: int | None = None  # attention modules per decoder layer, all in the per-layer figure
    state_bytes_per_layer: int | None = None  # the larger of the engines' figures
    state_bytes_per_sequence: int | None = None
    state_elements_per_layer: dict[str, int] | None = None  # {"conv": n, "recurrent": n}
    state_dtypes: dict[str, dict[str, str]] | None = None  # {engine: {"conv": dtype, "recurrent": dtype}}
    state_bytes_per_layer_by_engine: dict[str, int] | None = None
    # Cross-attention layers the model-code witness settled: why their K/V are not per token
    # (analysis/architecture/code_settle.py).
    note: str | None = None


class KvCache(Record):
    dtype: str | None
    dtype_assumed: bool
    bytes_per_element: int | None
    bytes_per_token: int | None
    per_kind: dict[str, KvKind]
    state_bytes_per_sequence: int | None
    state_bytes_per_sequence_by_engine: dict[str, int] | None = None
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
    draft_taps: int | None = None  # target layers tapped (absent in profiles before taps and depth were apart)
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
    # The drafter config keys taken from the target (analysis/serving/drafter_fields.py), free-form
    # config values (RoPE dicts); a null one, or a derived one, has its reason in target_field_notes.
    target_fields: dict[str, Any] | None = None
    target_field_notes: dict[str, str] | None = None


class Drafter(Record):
    """A drafter directory found next to the model, read off its config (analysis/architecture/speculative.py)."""

    error: str | None  # why its config could not be read
    path: str | None
    kind: str  # dflash, eagle3, eagle, mtp or unknown
    architectures: list[str] | None
    num_layers: int | None
    hidden_size: int | None
    block_size: int | None
    target_layer_ids: list[int] | None
    num_target_layers: int | None
    mask_token_id: int | None
    draft_vocab_size: int | None
    vocab_size: int | None


class Speculative(Record):
    mtp_layers: int
    mtp_source: str | None
    drafters: list[Drafter]  # drafter directories found next to the model
    drafter_plan: DrafterPlan | None = None  # absent only when the serving sections could not be built


class Evidence(Record):
    """Per fact, the config.json keys it was read from and their values (free-form config values);
    empty when there was no config.json."""

    num_layers: JSONObject | None = None
    layers: JSONObject | None = None
    attention: JSONObject | None = None
    moe: JSONObject | None = None
    quantization: JSONObject | None = None
    params: JSONObject | None = None
    kv_cache: JSONObject | None = None
    speculative: JSONObject | None = None


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


class Quantization(Record):
    """The checkpoint's declared weight quantization, one shape for every method
    (analysis/architecture/quantization.py); the last five only where the method has them."""

    method: str
    bits: int | None
    group_size: int | None
    symmetric: bool | None
    format: str | None
    targets: list[str] | None
    ignore: list[str] | None
    strategy: str | None = None  # compressed-tensors
    type: str | None = None  # compressed-tensors
    block_size: list[int] | None = None  # compressed-tensors, fp8
    activation_scheme: str | None = None  # fp8
    desc_act: bool | None = None  # gptq


class ConfigClass(Record):
    """Which config class read config.json on the host (analysis/architecture/config_witness.py)."""

    class_: str = Field(validation_alias="class", serialization_alias="class")
    fallback: JSONObject | None  # the remote side's note when transformers' own class stood in


class InvalidValue(Record):
    value: str  # the value as config.json holds it, shortened
    reason: str


class InvalidConfig(Record):
    """Config values no verdict could use, and the figures left unknown because of them."""

    keys: dict[str, InvalidValue]  # config key -> what was wrong
    unknown: dict[str, list[str]]  # figure -> the keys that voided it


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
    quantization: Quantization | None
    kv_cache: KvCache | None
    speculative: Speculative
    evidence: Evidence
    summary: Summary
    text_architectures: list[str] | None = None
    invalid_config: InvalidConfig | None = None
    confirmed_by_weights: WeightsConfirmation | None = None
    confidence: Confidence | None = None
    config_class: ConfigClass | None = None
