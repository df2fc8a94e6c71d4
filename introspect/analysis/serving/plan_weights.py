"""Stored weight bytes from the safetensors headers, split by how engines shard them.

Bytes are the exact stored sizes (``dtype bits x shape``, which is what each
tensor's ``data_offsets`` span), so quantized tensors count at their packed size
and their scales count too: that is what lands in GPU memory.

How SGLang and vLLM place the tensors of a DeepSeek-style decoder
(vllm/model_executor/models/deepseek_v2.py, sglang/srt/models/deepseek_v2.py):

* ``experts``: routed experts, split over the expert-parallel group, or each
  expert's matrices split over the tensor-parallel group; either way 1/TP per GPU;
* ``tensor_parallel``: attention projections, dense and shared-expert MLPs
  (Column/RowParallelLinear), 1/TP per GPU;
* ``replicated``: norms, the router, MLA's ``q_a_proj`` / ``kv_a_proj_with_mqa``
  (ReplicatedLinear): whole on every GPU;
* ``embedding`` (VocabParallelEmbedding, first pipeline stage) and ``lm_head``
  (ParallelLMHead, last stage): 1/TP per GPU; ``final`` (the last norm, last stage)
  and ``vision`` (first stage) whole;
* ``mtp``: layers past ``num_hidden_layers``, loaded only for MTP speculative decoding.
"""

from __future__ import annotations

from collections import Counter

from introspect.analysis.architecture.safetensors_count import DTYPE_BITS, MAX_GROUP_ELEMENTS, VISION_PARTS
from introspect.documents.profile_serving import WeightsBytes
from introspect.remote.contract import SafetensorsFacts, TensorGroup

# The shared expert's 1-wide gate (Qwen2-MoE, Qwen3-Next) is a ReplicatedLinear in vLLM:
# https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/model_executor/models/qwen3_next.py#L197
REPLICATED_PARTS = ("q_a_proj", "kv_a_proj_with_mqa", "fused_qkv_a_proj", "e_score_correction_bias",
                    "shared_expert_gate")
EMBEDDING_PARTS = ("embed_tokens", "wte", "word_embeddings", "tok_embeddings")
LAYER_CATEGORIES = ("experts", "tensor_parallel", "replicated")


def _category(template: str) -> str:
    parts = template.split(".")
    if any(part in VISION_PARTS for part in parts[:3]):
        return "vision"
    if "layers" in parts:
        if "experts" in parts and "shared_experts" not in parts:
            return "experts"
        last = parts[-2] if parts[-1] in ("weight", "bias") and len(parts) > 1 else parts[-1]
        if "norm" in last or last == "gate" or any(p in parts for p in REPLICATED_PARTS):
            return "replicated"
        return "tensor_parallel"
    if any(part in EMBEDDING_PARTS for part in parts):
        return "embedding"
    if "lm_head" in parts:
        return "lm_head"
    return "final"


def _layer_share(group: TensorGroup, num_layers: int | None) -> float:
    """Fraction of a per-layer group that lies in MTP layers (ids >= num_hidden_layers)."""
    ids = [i for i in group.get("layer_ids") or [] if isinstance(i, int) and not isinstance(i, bool)]
    if num_layers is None or not ids:
        return 0.0
    return sum(1 for i in ids if i >= num_layers) / len(ids)


def _group_bytes(group: TensorGroup) -> int | None:
    shape, count, dtype = group.get("shape"), group.get("count"), group.get("dtype")
    if not isinstance(shape, list) or not isinstance(count, int) or dtype not in DTYPE_BITS:
        return None
    elements = 1
    for dim in shape:
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 0:
            return None
        elements *= dim
    if elements * count > MAX_GROUP_ELEMENTS:
        raise ValueError("implausible tensor group")  # split_weights: the weights' bytes are unknown
    return elements * count * DTYPE_BITS[dtype] // 8


def split_weights(safetensors: SafetensorsFacts | None, num_layers: int | None) -> WeightsBytes | None:
    """The plan's ``weights``: bytes by category from the safetensors headers, or None without usable headers."""
    if not isinstance(safetensors, dict) or not isinstance(safetensors.get("shards"), list):
        return None
    by_category: Counter[str] = Counter()
    shards = failed = 0
    for shard in safetensors["shards"]:
        if not isinstance(shard, dict) or shard.get("error") or not isinstance(shard.get("groups"), list):
            failed += 1
            continue
        shards += 1
        for group in shard["groups"]:
            if not isinstance(group, dict) or not isinstance(group.get("template"), str):
                continue
            try:
                size = _group_bytes(group)
            except ValueError:
                return None  # safetensors_count names the absurd tensor in its finding
            if size is None:
                continue
            category = _category(group["template"])
            mtp = round(size * _layer_share(group, num_layers)) if category in LAYER_CATEGORIES else 0
            by_category["mtp"] += mtp
            by_category[category] += size - mtp
    if shards == 0:
        return None
    names = ("experts", "tensor_parallel", "replicated", "embedding", "lm_head", "final", "vision", "mtp")
    return WeightsBytes(source="safetensors headers (stored bytes)", total_bytes=sum(by_category.values()),
                        bytes={name: by_category[name] for name in names}, shards=shards, shards_failed=failed)
