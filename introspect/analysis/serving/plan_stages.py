"""Pipeline stages and multi-node layouts of the plan: which layers each stage holds, which layouts to try.

Layers need not divide by PP: vLLM gives the remainder to the stages before the last (the middle
ones when few are left over), since the first stage holds the embedding and the last the lm_head:
https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/distributed/utils.py#L198 (``get_pp_indices``).

Across nodes, vLLM's guide sets "the tensor parallel size [to] the number of GPUs in each node,
and the pipeline parallel size [to] the number of nodes" (16 GPUs in 2 nodes: TP 8, PP 2), so that
every layer's all-reduce stays on NVLink:
https://docs.vllm.ai/en/v0.8.3/serving/distributed_serving.html ; tensor parallelism across
nodes (TP 16 over 2 nodes, as SGLang's ``--tp 16 --nnodes 2`` recipes run) is listed too, ranked
after it among layouts of the same GPU count.
"""

from __future__ import annotations

from introspect.documents.profile_serving import Layout

MAX_PARALLEL = 1024


def pp_partition(num_layers: int, pp: int) -> list[int]:
    """Layers per stage as vLLM's ``get_pp_indices`` splits them (without VLLM_PP_LAYER_PARTITION)."""
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    return parts


def powers_of_two(limit: int) -> list[int]:
    out, size = [], 1
    while size <= min(limit, MAX_PARALLEL):
        out.append(size)
        size *= 2
    return out


def candidate_layouts(num_layers: int | None, experts: int | None, gpus: int,
                      per_node: int | None = None) -> list[tuple[int, int, int]]:
    """(tp, ep, pp), TP and PP powers of two: every TP up to the GPU count without PP; with PP
    (at most the layers) only groups of whole nodes (one host: all its GPUs), since pipeline
    stages serve to span GPUs that tensor parallelism alone does not reach."""
    groups = {per_node * k for k in range(1, gpus // per_node + 1)} if per_node else {gpus}
    out = []
    for pp in powers_of_two(gpus):
        if pp > 1 and not (num_layers and pp <= num_layers):
            continue
        for tp in powers_of_two(gpus // pp):
            if pp > 1 and tp * pp not in groups:
                continue
            out.append((tp, 1, pp))
            if experts and tp > 1:
                out.append((tp, tp, pp))
    return out


def stage_weights(weights: dict[str, int], tp: int, stages: list[int]) -> list[int]:
    """Bytes on one GPU of each stage: its share of the layers, the embedding (+ vision) on the
    first, lm_head and the final norm on the last."""
    layers = (weights.get("experts", 0) + weights.get("tensor_parallel", 0)) / tp + weights.get("replicated", 0)
    first = weights.get("embedding", 0) / tp + weights.get("vision", 0)
    last = weights.get("lm_head", 0) / tp + weights.get("final", 0)
    total = sum(stages)
    out = []
    for i, n in enumerate(stages):
        ends = (first if i == 0 else 0) + (last if i == len(stages) - 1 else 0)
        out.append(int(round(layers * n / total + ends)))
    return out


def node_fields(layout: Layout, tp: int, gpus: int, per_node: int | None) -> None:
    """How many nodes ``layout`` spans, and whether its tensor-parallel group leaves one node (multi-node only)."""
    if per_node:
        layout.nodes, layout.tp_across_nodes = -(-gpus // per_node), tp > per_node
