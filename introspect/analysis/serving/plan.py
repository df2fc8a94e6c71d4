"""Memory and parallelism plan: which TP / EP / PP layouts fit, with how much KV cache.

Pure: the profile's sections in, the ``plan`` section out. Per candidate layout
(TP and PP powers of two with TP x PP up to the GPU count, for MoE also EP = TP;
plan_stages.py), per GPU of each pipeline stage:

* weights = (experts + tensor_parallel) / TP + replicated, for the stage's layers
  (split as vLLM splits them, unevenly when PP does not divide them), plus the
  embedding / TP (+ vision) on the first stage and lm_head / TP + final norm on the
  last; the heaviest stage is the layout's ``weight_bytes_per_gpu``;
* usable = GPU memory x memory fraction; KV room = usable - weights. The fraction
  (default 0.9) is the headroom for activations, CUDA graphs and the CUDA context:
  vLLM 0.33 takes ``gpu_memory_utilization`` 0.92 of the GPU and then subtracts its
  profiled activation peak and CUDA-graph estimate from it
  (https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/cache.py#L215,
  https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/worker/gpu_worker.py#L753);
  SGLang sets ``mem_fraction_static`` = (GPU memory - reserved) / GPU memory with at
  least 10 GiB reserved on GPUs over 60 GB, 0.929 at most on an H200
  (https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/arg_groups/memory_hook.py#L281);
* KV bytes of one token on one GPU: MLA keeps one latent per layer that every TP
  rank stores whole; GQA/MHA split the KV heads over TP (replicated when TP exceeds
  them); each pipeline stage holds its own layers' share, and the stage with the
  least room per layer bounds the replica; a recurrent layer's state per sequence
  (at the engine's state dtypes) splits over TP with its heads (plan_context.py);
* ``kv_tokens_per_gpu`` = KV room / that share = the tokens one model replica can
  cache (every GPU of it holds a share of every token); ``kv_tokens_total`` adds up
  the replicas the GPUs allow (data parallel);
* a layout fits only when it also holds the KV of one request of ``max_model_len``
  tokens, as vLLM checks at start (plan_context.py).

The divisibility rules are the engines': attention heads % TP
(vllm/config/model.py ``verify_with_parallel_config``), KV heads vs TP
(``QKVParallelLinear`` replicates KV heads when TP exceeds them), experts % EP and
the expert FFN size over TP aligned to the quantization group or FP8 block
(``FusedMoE`` weight loading), vocab % TP (VocabParallelEmbedding pads, so only a note).
"""

from __future__ import annotations

import dataclasses

from introspect.analysis.serving.plan_context import (
    ContextOptions,
    TokenBytes,
    context_fields,
    kv_unknown,
    rope_default,
    suggested_len,
    token_bytes,
)
from introspect.analysis.serving.plan_stages import (
    candidate_layouts,
    node_fields,
    pp_partition,
    stage_weights,
)
from introspect.documents.profile_architecture import Architecture
from introspect.documents.profile_serving import ContextFix, Layout, LayoutCheck, Plan, WeightsBytes
from introspect.documents.profile_serving import GpuBudget as GpuRecord

DEFAULT_FRACTION = 0.9
GROUP_QUANT_METHODS = ("compressed-tensors", "gptq", "awq")


@dataclasses.dataclass(frozen=True)
class GpuBudget:
    """The GPUs a plan is made for: from the probe's nvidia-smi facts or from flags."""

    count: int
    memory_bytes: int
    name: str | None = None
    source: str = "flags"
    per_node: int | None = None  # --gpus-per-node: layouts spanning nodes are named and ranked by it

    def record(self) -> GpuRecord:
        """The plan's ``gpus`` member; ``per_node`` only on multi-node plans (one host: the keys as before)."""
        out = GpuRecord(count=self.count, memory_bytes=self.memory_bytes, name=self.name, source=self.source)
        if self.per_node:
            out.per_node = self.per_node
        return out


@dataclasses.dataclass(frozen=True)
class Demand:
    """What one replica must hold besides the weights: KV for one request of ``max_model_len``."""

    tokens: TokenBytes
    max_model_len: int | None
    cap: int
    context_len: int | None = None


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
    block: tuple[int, int] | None = None  # block-FP8 (block_n, block_k)

    @classmethod
    def of(cls, arch: Architecture) -> Shape:
        attn, moe, kv, quant = arch.attention, arch.moe, arch.kv_cache, arch.quantization
        return cls(num_layers=arch.num_layers, heads=attn.num_heads, kv_heads=attn.num_kv_heads,
                   attention_type=attn.type, experts=moe.routed_experts if moe.is_moe else None,
                   moe_inter=moe.moe_intermediate_size, vocab=arch.vocab_size, max_context=arch.max_context,
                   kv_bytes_per_token=(kv.bytes_per_token if kv is not None else None) or 0,
                   state_bytes_per_sequence=(kv.state_bytes_per_sequence if kv is not None else None) or 0,
                   quant_method=quant.method if quant is not None else None,
                   group_size=quant.group_size if quant is not None else None,
                   block=_block(quant.block_size if quant is not None else None))


def _block(value: list[int] | None) -> tuple[int, int] | None:
    if value is not None and len(value) == 2 and all(v > 0 for v in value):
        return value[0], value[1]
    return None


def _gib(value: int) -> str:
    return f"{value / 2**30:.1f} GiB"


def kv_bytes_per_token_per_gpu(shape: Shape, tp: int, share: tuple[int, int], per_token: int | None = None) -> int:
    """One GPU's bytes of a token for a stage holding ``share`` = (its layers, all layers)."""
    per_token = shape.kv_bytes_per_token if per_token is None else per_token
    if shape.attention_type != "MLA" and shape.kv_heads:
        heads_here = -(-shape.kv_heads // tp)  # ceil: replicated when TP > KV heads
        per_token = per_token * heads_here // shape.kv_heads
    return -(-per_token * share[0] // share[1])


def state_bytes_per_gpu(state: int, tp: int, share: tuple[int, int]) -> int:
    """One GPU's share of a sequence's recurrent state: its stage's layers, its TP rank's heads (plan_context.py)."""
    return -(-state * share[0] // (share[1] * tp))


def token_bytes_per_gpu(shape: Shape, tokens: TokenBytes, tp: int, share: tuple[int, int]) -> TokenBytes:
    """One GPU's share of a token's KV (and of a sequence's state: its stage's layers, split over TP)."""
    return dataclasses.replace(tokens, growing=kv_bytes_per_token_per_gpu(shape, tp, share, tokens.growing),
                               bounded=kv_bytes_per_token_per_gpu(shape, tp, share, tokens.bounded),
                               state=state_bytes_per_gpu(tokens.state, tp, share))


def _check(name: str, ok: bool, detail: str) -> LayoutCheck:
    return LayoutCheck(check=name, ok=ok, detail=detail)


def divisibility(shape: Shape, tp: int, ep: int, pp: int) -> list[LayoutCheck]:
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
        # Block FP8: each rank's gate/up rows divide by block_n, its down columns by block_k (TP > 1), or
        # both engines raise at load: https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/model_executor/
        # layers/quantization/utils/fp8_utils.py#L1361 and https://github.com/sgl-project/sglang/blob/v0.5.23/
        # python/sglang/srt/layers/quantization/fp8.py#L1588
        block = shape.block if shape.quant_method == "fp8" else None
        if ok and block:
            ok = part % block[0] == 0 and (tp == 1 or part % block[1] == 0)
        out.append(_check("expert FFN size % TP", ok, f"{shape.moe_inter} over TP {tp} = {shape.moe_inter / tp:g}"
                          + (f", quantization group {group}" if group else "")
                          + (f", FP8 block {block[0]}x{block[1]}" if block else "")))
    if shape.num_layers and pp > 1:
        parts = pp_partition(shape.num_layers, pp)
        split = "" if shape.num_layers % pp == 0 else f": {' + '.join(map(str, parts))} (vLLM splits unevenly)"
        out.append(_check("layers over PP", True, f"{shape.num_layers} layers over PP {pp}{split}"))
    if shape.vocab:
        padded = "" if shape.vocab % tp == 0 else " (not divisible: the engine pads the embedding)"
        out.append(_check("vocab % TP", True, f"{shape.vocab} over TP {tp}{padded}"))
    return out


def _stages(shape: Shape, weights: dict[str, int], tp: int, pp: int, usable: int) -> list[tuple[int, int, int]]:
    """(weight bytes, layers, room) of one GPU of each pipeline stage."""
    layers = shape.num_layers if shape.num_layers and pp > 1 else pp
    parts = pp_partition(layers, pp)
    return [(w, n, usable - w) for w, n in zip(stage_weights(weights, tp, parts), parts, strict=True)]


def layout(shape: Shape, weights: dict[str, int], budget: GpuBudget, fraction: float,
           tp: int, ep: int, pp: int, demand: Demand | None = None) -> Layout:
    used = tp * pp
    usable = int(budget.memory_bytes * fraction)
    stages = _stages(shape, weights, tp, pp, usable)
    per_gpu = max(w for w, _, _ in stages)
    # The stage with the least room per layer it caches limits the tokens of the whole pipeline.
    _, held, room = min(stages, key=lambda s: (min(s[2], 0), s[2] / s[1]))
    share = (held, sum(n for _, n, _ in stages))
    checks = divisibility(shape, tp, ep, pp)
    token = kv_bytes_per_token_per_gpu(shape, tp, share)
    tokens = room // token if room > 0 and token > 0 else (0 if token > 0 else None)
    replicas = budget.count // used
    reasons = [f"{c.check}: {c.detail}" for c in checks if not c.ok]
    if room <= 0:
        reasons.append(f"weights {_gib(per_gpu)} per GPU > usable {_gib(usable)} ({fraction:g} x "
                       f"{_gib(budget.memory_bytes)})")
    out = Layout(name=" ".join([f"TP{tp}"] + ([f"EP{ep}"] if ep > 1 else []) + ([f"PP{pp}"] if pp > 1 else [])),
                 tp=tp, ep=ep, pp=pp, gpus=used, replicas=replicas,
                 weight_bytes_per_gpu=per_gpu, usable_bytes_per_gpu=usable, kv_room_bytes_per_gpu=max(room, 0),
                 kv_bytes_per_token_per_gpu=token, kv_tokens_per_gpu=tokens,
                 kv_tokens_total=tokens * replicas if tokens is not None else None,
                 fits=not reasons, reasons=reasons, checks=checks)
    node_fields(out, tp, used, budget.per_node)
    if shape.state_bytes_per_sequence and room > 0:
        out.state_sequences_per_gpu = room // state_bytes_per_gpu(shape.state_bytes_per_sequence, tp, share)
    if shape.max_context and tokens is not None:
        out.max_context_sequences = tokens // shape.max_context
    if demand is not None and demand.max_model_len:
        short = context_fields(out, token_bytes_per_gpu(shape, demand.tokens, tp, share), room,
                               demand.max_model_len, demand.cap, demand.context_len)
        out.kv_bytes_per_token = demand.tokens.per_token
        if short:  # holds the weights but not one request: vLLM refuses to start (plan_context.py)
            out.reasons.append(short)  # the model holds its own copy of the list
            out.fits = False
    return out


def _kv_rule(shape: Shape, window_cap: object, demand: Demand, engine: str | None) -> str:
    rule = f"KV at {demand.tokens.dtype}; " + ("MLA: the compressed latent is stored whole on every TP rank" if shape.attention_type == "MLA"
            else "KV heads split over TP (replicated when TP exceeds them)")
    if window_cap:  # the architecture's kv_cache.sliding_window_cap
        rule += (f"; sliding-window layers counted at the full rate (they stop growing past "
                 f"{window_cap} tokens, so this is a lower bound on tokens)")
    if shape.state_bytes_per_sequence:
        at = f"{engine}'s" if engine else "the larger of SGLang's and vLLM's"
        rule += (f"; recurrent layers keep {shape.state_bytes_per_sequence} B per sequence instead, at {at} "
                 "state dtypes, split over TP (state_sequences_per_gpu: sequences whose state fits)")
    return rule


def rank(item: Layout, per_node: int | None) -> tuple[bool, int, bool, int, int]:
    """Recipe layouts first: no PP, or PP across nodes with TP filling each node (plan_stages.py);
    then the smallest group (the most replicas), TP within a node, the fewest stages, the most KV."""
    recipe = item.pp == 1 or bool(per_node and item.tp == per_node)
    return (not recipe, item.gpus, bool(item.tp_across_nodes), item.pp, -(item.kv_tokens_per_gpu or 0))


def _demand(arch: Architecture, context: ContextOptions, default_len: tuple[int | None, str] | None
            ) -> tuple[Demand, str | None]:
    """The request every layout must hold, and where its length came from (the plan's ``max_model_len_source``)."""
    derived, source = default_len or rope_default(None, None, arch.max_context)
    tokens = token_bytes(arch, context.kv_dtype, context.engine)
    length = context.max_model_len or derived
    cap = max(derived or 0, arch.max_context or 0, length or 0)  # the longest the engine serves
    return Demand(tokens, length, cap, context.context_len), "--max-model-len" if context.max_model_len else source


def _context_fix(layouts: list[Layout]) -> ContextFix | None:
    """The longest --max-model-len some layout holds, where only the request's KV stopped it."""
    held = [(item.max_context_fits, item) for item in layouts if not item.fits and item.max_context_fits
            and all(c.ok for c in item.checks) and item.kv_room_bytes_per_gpu > 0]
    if not held:
        return None
    fits, best = max(held, key=lambda pair: (pair[0], -pair[1].gpus))
    return ContextFix(layout=best.name, max_context_fits=fits, max_model_len=suggested_len(fits))


def plan_section(arch: Architecture, weights: WeightsBytes | None, budget: GpuBudget | None,
                 fraction: float = DEFAULT_FRACTION, context: ContextOptions | None = None,
                 default_len: tuple[int | None, str] | None = None) -> Plan:
    """The ``plan`` section: weights, GPUs, every candidate layout, the first that fits."""
    context = context or ContextOptions()
    demand, source = _demand(arch, context, default_len)
    tokens = demand.tokens
    out = Plan(weights=weights, gpus=budget.record() if budget else None, memory_fraction=fraction, layouts=[],
               best=None, reason=None, max_model_len=demand.max_model_len, max_model_len_source=source,
               kv_dtype=tokens.dtype, kv_bytes_per_token=tokens.per_token if tokens.known else None,
               context_len=context.context_len)
    if weights is None:
        out.reason = "no safetensors headers were read: weight bytes are unknown"
        return out
    if budget is None or budget.count < 1 or budget.memory_bytes <= 0:
        out.reason = "no GPU facts: plan offline with `introspect plan PROFILE.json --gpus N --gpu-mem SIZE`"
        return out
    shape = dataclasses.replace(Shape.of(arch), state_bytes_per_sequence=tokens.state)
    if tokens.known:
        shape = dataclasses.replace(shape, kv_bytes_per_token=tokens.per_token)
    kv_rule = _kv_rule(shape, arch.kv_cache.sliding_window_cap if arch.kv_cache is not None else None, demand,
                       context.engine)
    unknown = kv_unknown(arch)
    if unknown:  # KV bytes per token unknown: kv_tokens stay null rather than computed from 0
        kv_rule += f"; KV cache unknown because of config.json {', '.join(map(str, unknown))}"
    out.kv_rule = kv_rule
    out.layouts = [layout(shape, dict(weights.bytes), budget, fraction, tp, ep, pp, demand)
                   for tp, ep, pp in candidate_layouts(shape.num_layers, shape.experts, budget.count, budget.per_node)]
    fitting = [item for item in out.layouts if item.fits]
    if fitting:
        out.best = min(fitting, key=lambda item: rank(item, budget.per_node)).name
        return out
    fix = out.context_fix = _context_fix(out.layouts)
    out.reason = ("no candidate layout fits on these GPUs" if fix is None else
                  f"no candidate layout holds the KV of one {demand.max_model_len}-token request; "
                  f"{fix.layout} holds {fix.max_context_fits} tokens")
    return out
