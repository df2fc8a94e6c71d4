"""Memory and parallelism plan: which TP / EP / PP layouts fit, with how much KV cache.

Pure: the profile's sections in, the ``plan`` section out. Per candidate layout
(TP = 1, 2, 4, 8 up to the GPU count; for MoE also EP = TP; PP where the layers
divide), per GPU:

* weights = (experts + tensor_parallel) / TP + replicated, for the layers of one
  pipeline stage (layers split evenly, so 1/PP of them), plus the heavier end of
  the pipeline: embedding / TP (+ vision) on the first stage, lm_head / TP + final
  norm on the last (both on the only stage when PP = 1);
* usable = GPU memory x memory fraction (SGLang ``--mem-fraction-static``, vLLM
  ``--gpu-memory-utilization``); KV room = usable - weights (activations and CUDA
  graphs come out of the remaining fraction);
* KV bytes of one token on one GPU: MLA keeps one latent per layer that every TP
  rank stores whole; GQA/MHA split the KV heads over TP (replicated when TP exceeds
  them); each pipeline stage holds its own layers' share;
* ``kv_tokens_per_gpu`` = KV room / that share = the tokens one model replica can
  cache (every GPU of it holds a share of every token); ``kv_tokens_total`` adds up
  the replicas the GPUs allow (data parallel).

The divisibility rules are the engines': attention heads % TP
(vllm/config/model.py ``verify_with_parallel_config``), KV heads vs TP
(``QKVParallelLinear`` replicates KV heads when TP exceeds them), experts % EP and
the expert FFN size over TP aligned to the quantization group
(``FusedMoE`` weight loading), layers % PP (this plan's rule; engines can also split
unevenly), vocab % TP (VocabParallelEmbedding pads, so only a note).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from introspect.remote.contract import as_dict

CANDIDATE_TP = (1, 2, 4, 8)
CANDIDATE_PP = (1, 2, 4, 8)
DEFAULT_FRACTION = 0.9
GROUP_QUANT_METHODS = ("compressed-tensors", "gptq", "awq")


@dataclasses.dataclass(frozen=True)
class GpuBudget:
    """The GPUs a plan is made for: from the probe's nvidia-smi facts or from flags."""

    count: int
    memory_bytes: int
    name: str | None = None
    source: str = "flags"


@dataclasses.dataclass(frozen=True)
class Shape:
    """The model facts the plan reads, taken from a profile's architecture section."""

    num_layers: int | None
    heads: int | None
    kv_heads: int | None
    attention_type: str | None
    experts: int | None
    moe_inter: int | None
    vocab: int | None
    max_context: int | None
    kv_bytes_per_token: int
    state_bytes_per_sequence: int
    quant_method: str | None
    group_size: int | None

    @classmethod
    def of(cls, arch: dict[str, Any]) -> Shape:
        attn, moe = as_dict(arch.get("attention")), as_dict(arch.get("moe"))
        kv, quant = as_dict(arch.get("kv_cache")), as_dict(arch.get("quantization"))
        return cls(num_layers=_int(arch.get("num_layers")), heads=_int(attn.get("num_heads")),
                   kv_heads=_int(attn.get("num_kv_heads")), attention_type=attn.get("type"),
                   experts=_int(moe.get("routed_experts")) if moe.get("is_moe") else None,
                   moe_inter=_int(moe.get("moe_intermediate_size")), vocab=_int(arch.get("vocab_size")),
                   max_context=_int(arch.get("max_context")), kv_bytes_per_token=_int(kv.get("bytes_per_token")) or 0,
                   state_bytes_per_sequence=_int(kv.get("state_bytes_per_sequence")) or 0,
                   quant_method=quant.get("method"), group_size=_int(quant.get("group_size")))



def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _gib(value: int) -> str:
    return f"{value / 2**30:.1f} GiB"


def weight_bytes_per_gpu(weights: dict[str, int], tp: int, pp: int) -> int:
    layers = (weights.get("experts", 0) + weights.get("tensor_parallel", 0)) / tp + weights.get("replicated", 0)
    first = weights.get("embedding", 0) / tp + weights.get("vision", 0)
    last = weights.get("lm_head", 0) / tp + weights.get("final", 0)
    ends = first + last if pp == 1 else max(first, last)
    return int(round(layers / pp + ends))


def kv_bytes_per_token_per_gpu(shape: Shape, tp: int, pp: int) -> int:
    per_token = shape.kv_bytes_per_token
    if shape.attention_type != "MLA" and shape.kv_heads:
        heads_here = -(-shape.kv_heads // tp)  # ceil: replicated when TP > KV heads
        per_token = per_token * heads_here // shape.kv_heads
    return -(-per_token // pp)


def _check(name: str, ok: bool, detail: str) -> dict[str, Any]:
    return {"check": name, "ok": ok, "detail": detail}


def divisibility(shape: Shape, tp: int, ep: int, pp: int) -> list[dict[str, Any]]:
    out = []
    if shape.heads:
        out.append(_check("attention heads % TP", shape.heads % tp == 0, f"{shape.heads} heads over TP {tp}"))
    if shape.kv_heads and shape.attention_type != "MLA":
        ok = shape.kv_heads % tp == 0 if shape.kv_heads >= tp else tp % shape.kv_heads == 0
        out.append(_check("KV heads vs TP", ok, f"{shape.kv_heads} KV heads over TP {tp}"
                          + (" (replicated)" if ok and shape.kv_heads < tp else "")))
    if shape.experts and ep > 1:
        out.append(_check("experts % EP", shape.experts % ep == 0, f"{shape.experts} experts over EP {ep}"))
    if shape.experts and ep == 1 and shape.moe_inter:
        part, ok = shape.moe_inter // tp, shape.moe_inter % tp == 0
        group = shape.group_size if shape.quant_method in GROUP_QUANT_METHODS else None
        if ok and group:
            ok = part % group == 0
        out.append(_check("expert FFN size % TP", ok, f"{shape.moe_inter} over TP {tp} = {shape.moe_inter / tp:g}"
                          + (f", quantization group {group}" if group else "")))
    if shape.num_layers and pp > 1:
        out.append(_check("layers % PP", shape.num_layers % pp == 0, f"{shape.num_layers} layers over PP {pp}"))
    if shape.vocab:
        padded = "" if shape.vocab % tp == 0 else " (not divisible: the engine pads the embedding)"
        out.append(_check("vocab % TP", True, f"{shape.vocab} over TP {tp}{padded}"))
    return out


def candidate_layouts(shape: Shape, gpus: int) -> list[tuple[int, int, int]]:
    """(tp, ep, pp) with tp x pp GPUs at most ``gpus``; PP only where the layers divide."""
    out = []
    for pp in CANDIDATE_PP:
        if pp > 1 and not (shape.num_layers and shape.num_layers % pp == 0):
            continue
        for tp in CANDIDATE_TP:
            if tp * pp > gpus:
                continue
            out.append((tp, 1, pp))
            if shape.experts and tp > 1:
                out.append((tp, tp, pp))
    return out


def layout(shape: Shape, weights: dict[str, int], budget: GpuBudget, fraction: float,
           tp: int, ep: int, pp: int) -> dict[str, Any]:
    used = tp * pp
    usable = int(budget.memory_bytes * fraction)
    per_gpu = weight_bytes_per_gpu(weights, tp, pp)
    room = usable - per_gpu
    checks = divisibility(shape, tp, ep, pp)
    token = kv_bytes_per_token_per_gpu(shape, tp, pp)
    tokens = room // token if room > 0 and token > 0 else (0 if token > 0 else None)
    replicas = budget.count // used
    reasons = [f"{c['check']}: {c['detail']}" for c in checks if not c["ok"]]
    if room <= 0:
        reasons.append(f"weights {_gib(per_gpu)} per GPU > usable {_gib(usable)} ({fraction:g} x "
                       f"{_gib(budget.memory_bytes)})")
    out = {"name": " ".join([f"TP{tp}"] + ([f"EP{ep}"] if ep > 1 else []) + ([f"PP{pp}"] if pp > 1 else [])),
           "tp": tp, "ep": ep, "pp": pp, "gpus": used, "replicas": replicas,
           "weight_bytes_per_gpu": per_gpu, "usable_bytes_per_gpu": usable, "kv_room_bytes_per_gpu": max(room, 0),
           "kv_bytes_per_token_per_gpu": token, "kv_tokens_per_gpu": tokens,
           "kv_tokens_total": tokens * replicas if tokens is not None else None,
           "fits": not reasons, "reasons": reasons, "checks": checks}
    if shape.state_bytes_per_sequence and room > 0:
        out["state_sequences_per_gpu"] = room // -(-shape.state_bytes_per_sequence // pp)
    if shape.max_context and tokens is not None:
        out["max_context_sequences"] = tokens // shape.max_context
    return out


def _kv_rule(shape: Shape, kv: dict[str, Any]) -> str:
    rule = ("MLA: the compressed latent is stored whole on every TP rank" if shape.attention_type == "MLA"
            else "KV heads split over TP (replicated when TP exceeds them)")
    if kv.get("sliding_window_cap"):
        rule += (f"; sliding-window layers counted at the full rate (they stop growing past "
                 f"{kv['sliding_window_cap']} tokens, so this is a lower bound on tokens)")
    if shape.state_bytes_per_sequence:
        rule += (f"; recurrent layers keep {shape.state_bytes_per_sequence} B per sequence instead "
                 "(state_sequences_per_gpu: sequences whose state fits)")
    return rule


def plan_section(arch: dict[str, Any], weights: dict[str, Any] | None, budget: GpuBudget | None,
                 fraction: float = DEFAULT_FRACTION) -> dict[str, Any]:
    """The ``plan`` section: weights, GPUs, every candidate layout, the first that fits."""
    out: dict[str, Any] = {"weights": weights, "gpus": dataclasses.asdict(budget) if budget else None,
                           "memory_fraction": fraction, "layouts": [], "best": None, "reason": None}
    if weights is None:
        out["reason"] = "no safetensors headers were read: weight bytes are unknown"
        return out
    if budget is None or budget.count < 1 or budget.memory_bytes <= 0:
        out["reason"] = "no GPU facts: plan offline with `introspect plan PROFILE.json --gpus N --gpu-mem SIZE`"
        return out
    shape = Shape.of(arch)
    split = {k: int(v) for k, v in as_dict(weights.get("bytes")).items() if isinstance(v, int)}
    out["kv_rule"] = _kv_rule(shape, as_dict(arch.get("kv_cache")))
    unknown = as_dict(as_dict(arch.get("invalid_config")).get("unknown")).get("kv_cache")
    if unknown:  # KV bytes per token unknown: kv_tokens stay null rather than computed from 0
        out["kv_rule"] += f"; KV cache unknown because of config.json {', '.join(map(str, unknown))}"
    out["layouts"] = [layout(shape, split, budget, fraction, tp, ep, pp)
                      for tp, ep, pp in candidate_layouts(shape, budget.count)]
    fitting = [item for item in out["layouts"] if item["fits"]]
    # The smallest group that fits leaves the most replicas; among equals, the most KV per replica.
    if fitting:
        best = min(fitting, key=lambda item: (item["gpus"], -(item["kv_tokens_per_gpu"] or 0)))
        out["best"] = best["name"]
    else:
        out["reason"] = "no candidate layout fits on these GPUs"
    return out
