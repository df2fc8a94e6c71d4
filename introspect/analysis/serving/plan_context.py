"""Context length in the plan: the KV of one request at ``max_model_len`` must fit beside the weights.

The engines' rules, from the installed sources (vLLM 0.33.0, SGLang 0.5.23):

* vLLM refuses to start when the KV memory left after weights, activations and CUDA graphs
  cannot hold one request of ``max_model_len`` tokens ("To serve at least one request with the
  model's max seq len ..."), and names the longest length that would fit:
  https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/core/kv_cache_planning.py#L151
  (``check_enough_kv_cache_memory``; the message at #L50, the binary search at #L97).
* SGLang starts, warns, and caps every request at the pool's size instead
  (``max_req_len = min(context_len - 1, kv_capacity - 1)``):
  https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/managers/tp_worker.py#L558
* ``max_model_len`` defaults to the config's ``max_position_embeddings`` (the smallest of the
  length keys), times the RoPE ``factor`` except for yarn / llama3 / longrope, whose
  ``max_position_embeddings`` is already the scaled length:
  https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/model.py#L2545
* KV dtype ``auto`` is the model's dtype, with float32 (and any dtype the GPU cannot compute in,
  like an fp8 ``torch_dtype``) taken down to bfloat16, the CUDA platform's first dtype:
  https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/model.py#L2423 and
  https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/mem_cache/kv_cache_dtype.py#L49
  ``fp8`` stores one byte per element: plain MLA (DeepSeek-V3, Kimi-K2) keeps its kv_lora_rank + rope
  latent in fp8 with no per-token scale (vLLM ``MLAAttention.head_size = kv_lora_rank + qk_rope_head_dim``,
  https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/model_executor/layers/attention/mla_attention.py#L480;
  SGLang ``MLATokenToKVPool.kv_cache_dim``,
  https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/mem_cache/memory_pool.py#L4793).
  MLA with a sparse-attention indexer (DeepSeek-V3.2, GLM-5) uses the ``fp8_ds_mla`` row of 656 bytes per
  token and layer (512 fp8 + 4 fp32 scales + 64 bf16 rope), in vLLM's sparse backend and SGLang's DSA pool:
  https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/model_executor/layers/attention/mla_attention.py#L1386
  https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/mem_cache/kv_cache_configurator.py#L3469
  and the indexer's key is fp8 plus a 4-byte scale per 128 elements at any KV dtype
  (mixer_math.indexer_key_bytes: vLLM deepseek_v2.py #L732, SGLang index_key_cache.py #L46).
* Recurrent state (linear attention, SSM) is priced at the engine's state dtypes
  (architecture/state_dtypes.py): the profile's ``state_bytes_per_sequence_by_engine`` for the engine
  named, else the larger figure. It is split over TP like the heads it belongs to (vLLM
  ``mamba2_state_shape`` / ``gated_delta_net_state_shape`` divide heads and conv channels by the TP size,
  https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/model_executor/layers/mamba/mamba_utils.py#L186;
  Mamba-2 groups fewer than the TP size are replicated, a few KiB a layer this split leaves out).

Sizes are per GPU and exact to the token: the engines allocate whole blocks (16 tokens, 64 for
FlashMLA) and keep one null block aside, so their figure can be one block smaller.
"""

from __future__ import annotations

import dataclasses

from introspect.analysis.architecture.mixer_math import indexer_key_bytes
from introspect.analysis.serving.drafter_fields import text_view
from introspect.documents.profile_architecture import Architecture, Attention, KvCache
from introspect.documents.profile_serving import Layout
from introspect.remote.contract import as_dict

KV_DTYPES = ("auto", "fp8")
HALF_DTYPES = ("bfloat16", "float16")
FP8_DS_MLA_ROW = 656  # vLLM mla_attention.py #L1386: bytes per token and layer of the fp8_ds_mla layout
# vLLM model.py #L2610: these RoPE types leave max_position_embeddings already scaled.
PRESCALED_ROPE = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")


@dataclasses.dataclass(frozen=True)
class ContextOptions:
    """What the plan checks: one request of ``max_model_len`` (None: the model's), KV at ``kv_dtype``."""

    max_model_len: int | None = None
    kv_dtype: str = "auto"
    context_len: int | None = None
    engine: str | None = None  # "sglang" / "vllm": its recurrent-state dtypes; None: the larger figure


@dataclasses.dataclass(frozen=True)
class TokenBytes:
    """KV bytes of one token for the whole model: ``growing`` with every token, ``bounded`` only up
    to ``window`` tokens (sliding-window / chunked layers), ``state`` once per sequence."""

    growing: int
    bounded: int
    window: int | None
    state: int
    dtype: str
    known: bool

    @property
    def per_token(self) -> int:
        return self.growing + self.bounded


def engine_kv_dtype(model_dtype: str | None, kv_dtype: str) -> str:
    if kv_dtype == "fp8":
        return "fp8"
    return model_dtype if model_dtype in HALF_DTYPES else "bfloat16"


def _dsa_bytes(attention: Attention, kv: KvCache, kv_dtype: str) -> int | None:
    """Per-token bytes of an MLA model with an indexer at the engine's layout, or None if not one."""
    key = indexer_key_bytes(attention)  # from index_head_dim: a profile of any version reads the same
    latent = (attention.kv_lora_rank or 0) + (attention.qk_rope_head_dim or 0)
    if attention.type != "MLA" or not key or not latent:
        return None
    layers = sum((e.bytes_per_token or 0) // (e.bytes_per_token_per_layer or 1) * (e.attention_sublayers or 1)
                 for e in kv.per_kind.values() if e.bytes_per_token_per_layer)
    row = FP8_DS_MLA_ROW if kv_dtype == "fp8" else latent * 2
    return layers * (row + key)


def state_bytes(kv: KvCache | None, engine: str | None) -> int:
    """Recurrent state of one sequence at ``engine``'s state dtypes, else the profile's (larger) figure."""
    if kv is None:
        return 0
    figure = (kv.state_bytes_per_sequence_by_engine or {}).get(engine) if engine else None
    return figure if figure is not None else kv.state_bytes_per_sequence or 0


def kv_unknown(arch: Architecture) -> list[str] | None:
    """The config.json keys whose invalid values voided the KV cache figures, or None."""
    return arch.invalid_config.unknown.get("kv_cache") if arch.invalid_config is not None else None


def token_bytes(arch: Architecture, kv_dtype: str = "auto", engine: str | None = None) -> TokenBytes:
    """The profile's KV rule re-priced at the engine's KV dtype (2 bytes for auto, 1 for fp8), with the
    recurrent state at ``engine``'s state dtypes."""
    kv = arch.kv_cache
    dtype = engine_kv_dtype(kv.dtype if kv is not None else None, kv_dtype)
    state = state_bytes(kv, engine)
    if kv is None or kv.bytes_per_token is None or not kv.bytes_per_element or kv_unknown(arch):
        return TokenBytes(0, 0, None, state, dtype, known=False)
    total, width = kv.bytes_per_token, kv.bytes_per_element
    beyond = total if kv.bytes_per_token_beyond_window is None else kv.bytes_per_token_beyond_window
    window = kv.sliding_window_cap if beyond < total else None
    element = 1 if kv_dtype == "fp8" else 2
    dsa = _dsa_bytes(arch.attention, kv, kv_dtype)
    if dsa is not None:
        return TokenBytes(dsa, 0, None, state, "fp8_ds_mla" if kv_dtype == "fp8" else dtype, known=True)
    growing = beyond * element // width
    return TokenBytes(growing, (total - beyond) * element // width, window, state, dtype, known=True)


def rope_default(config: object, nesting: list[str] | None, max_context: int | None) -> tuple[int | None, str]:
    """(max_model_len, how) as vLLM derives it from config.json (``config``, as read; model.py #L2545)."""
    view = text_view(config, nesting or [])
    if max_context is None:
        return None, "the config gives no context length"
    rope = as_dict(view.get("rope_parameters")) or as_dict(view.get("rope_scaling"))
    kind = rope.get("rope_type") or rope.get("type")
    factor = rope.get("factor")
    original = view.get("original_max_position_embeddings")
    if kind == "longrope" and isinstance(original, int) and not isinstance(original, bool) and original > 0:
        # vLLM model.py #L2643: LongRoPE serves the short (original) length unless asked for more.
        return original, f"original_max_position_embeddings (longrope; up to {max_context} when asked)"
    if (not rope or kind in PRESCALED_ROPE or not isinstance(factor, (int, float)) or isinstance(factor, bool)
            or "gemma3" in str(view.get("model_type"))):
        scaled = f", {kind} RoPE: already the scaled length" if kind in PRESCALED_ROPE else ""
        return max_context, f"max_position_embeddings{scaled}"
    return int(max_context * factor), f"max_position_embeddings {max_context} x {kind} RoPE factor {factor:g}"


def request_bytes(per_gpu: TokenBytes, length: int) -> int:
    """KV (and recurrent state) of one request of ``length`` tokens on one GPU."""
    bounded = min(length, per_gpu.window) if per_gpu.window else length
    return per_gpu.growing * length + per_gpu.bounded * bounded + per_gpu.state


def longest_context(per_gpu: TokenBytes, room: int, cap: int) -> int:
    """The longest request whose KV fits in ``room`` bytes (at most ``cap``, the engine's limit)."""
    left = room - per_gpu.state
    if left <= 0:
        return 0
    if per_gpu.per_token <= 0:
        return cap  # attention-free: nothing grows with the context
    window = per_gpu.window or 0
    if not window or per_gpu.per_token * window >= left:
        return min(cap, left // per_gpu.per_token)
    if per_gpu.growing <= 0:
        return cap
    return min(cap, window + (left - per_gpu.per_token * window) // per_gpu.growing)


def suggested_len(tokens: int) -> int:
    """A round ``--max-model-len`` at most ``tokens``: down to a multiple of 1024 when that large."""
    return tokens - tokens % 1024 if tokens >= 1024 else tokens


def context_fields(layout: Layout, per_gpu: TokenBytes, room: int, max_model_len: int, cap: int,
                   context_len: int | None) -> str | None:
    """Sets the layout's context keys; returns the reason it cannot hold one request (None: it can)."""
    need = request_bytes(per_gpu, max_model_len)
    layout.max_model_len, layout.kv_dtype = max_model_len, per_gpu.dtype
    layout.kv_one_request_bytes_per_gpu = need if per_gpu.known else None
    if not per_gpu.known:
        layout.max_context_fits = layout.concurrent_requests = None
        return None
    fits = longest_context(per_gpu, max(room, 0), max(cap, max_model_len))
    layout.max_context_fits = fits
    layout.concurrent_requests = max(room, 0) // need if need > 0 else None
    if context_len:
        at = request_bytes(per_gpu, context_len)
        layout.context_len = context_len
        layout.concurrent_requests_at_context_len = max(room, 0) // at if at else None
    if room <= 0 or need <= room:
        return None
    fix = f"--max-model-len {suggested_len(fits)} or more GPUs" if fits > 0 else "more GPUs"
    return (f"KV for one {max_model_len}-token request needs {need / 2**30:.1f} GiB, "
            f"{room / 2**30:.1f} GiB left (fix: {fix})")
