"""MoE verdict: dense or mixture of experts, how it is routed, which layers are sparse.

Families disagree on every key name (``n_routed_experts`` / ``num_local_experts``
/ ``num_experts``; ``num_experts_per_tok`` / ``experts_per_token`` /
``num_experts_per_token``) and on where the sparse layers are
(``first_k_dense_replace`` + ``moe_layer_freq``, ``decoder_sparse_step`` +
``mlp_only_layers``, Jamba's ``expert_layer_period``/``offset``, Nemotron-H's
``E`` blocks, transformers 5's ``mlp_layer_types``). The FFN of every layer is
resolved here once, and params.py reuses it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from introspect.analysis.architecture.config_view import MAX_LAYERS, ConfigView, positive
from introspect.analysis.architecture.families import Family
from introspect.analysis.architecture.layers import LayerLayout
from introspect.documents.profile_architecture import Moe

DENSE = "dense"
SPARSE = "moe"

ROUTED_KEYS = (
    "n_routed_experts",
    "num_local_experts",
    "num_experts",
    "moe_num_experts",
    "num_routed_experts",
)
TOPK_KEYS = (
    "num_experts_per_tok",
    "experts_per_token",
    "num_experts_per_token",
    "moe_topk",
    "moe_top_k",
    "num_selected_experts",
)
# num_shared_expert: tencent/Tencent-Hunyuan-Large configuration_hunyuan.py (shared MLPs of intermediate_size).
SHARED_COUNT_KEYS = ("n_shared_experts", "num_shared_experts", "shared_experts_num", "num_shared_expert")


@dataclass
class MoeLayout:
    """Routing facts plus the FFN kind of every layer (``moe``, ``dense`` or None for no FFN)."""

    section: Moe
    ffn: list[str | None] = field(default_factory=list)
    expert_width: int | None = None  # intermediate size of one routed expert
    shared_width: int = 0  # total intermediate size of the always-on shared expert(s)
    shared_gate: bool = False  # Qwen's sigmoid gate on the shared expert
    source: str | None = None


def empty_moe(is_moe: bool | None = False) -> Moe:
    """No routing facts: dense (False), or unknown (None) when the MoE keys could not be used."""
    return Moe(is_moe=is_moe, routed_experts=None, shared_experts=None, experts_per_token=None, n_group=None,
               topk_group=None, scoring_func=None, topk_method=None, moe_intermediate_size=None, moe_layers=None,
               dense_layers=None, routed_scaling_factor=None, norm_topk_prob=None)


def _ffn_without_experts(view: ConfigView, family: Family, layout: LayerLayout) -> list[str | None]:
    """Which layers carry a dense FFN at all (pure SSM blocks and Nemotron-H mixers do not)."""
    n = len(layout.pattern)
    text = view.get_str("hybrid_override_pattern")
    if text and len(text) == n:
        return [DENSE if ch in "-E" else None for ch in text]
    names = view.get_str_list("layer_types", "layers_block_type")
    if family.ffn_from_block_types and names and len(names) == n:
        return [DENSE if name in ("mlp", "moe") else None for name in names]
    if family.ssm_only or view.present("ssm_cfg"):
        # Mamba blocks have no FFN; mamba_ssm's d_intermediate adds one per layer.
        return [DENSE] * n if (view.get_int("d_intermediate") or 0) > 0 else [None] * n
    return [DENSE] * n


def _sparse_layers(
    view: ConfigView, family: Family, n: int, base: list[str | None]
) -> tuple[list[bool], str]:
    """Which layers are MoE, and the key(s) that said so."""
    kinds = view.get_str_list("mlp_layer_types")
    if kinds and len(kinds) == n:
        return [kind == "sparse" for kind in kinds], "mlp_layer_types"

    text = view.get_str("hybrid_override_pattern")
    if text and len(text) == n:
        return [ch == "E" for ch in text], "hybrid_override_pattern (E)"
    names = view.get_str_list("layer_types", "layers_block_type")
    if family.ffn_from_block_types and names and len(names) == n:
        return [name == "moe" for name in names], "layers_block_type (moe)"

    period = positive(view.get_int("expert_layer_period", maximum=MAX_LAYERS))
    if period is not None:
        offset = view.get_int("expert_layer_offset", maximum=MAX_LAYERS) or 0
        return [i % period == offset for i in range(n)], "expert_layer_period/offset"

    freq_list = view.get_int_list("moe_layer_freq", maximum=1)
    if freq_list is not None and len(freq_list) == n:
        return [bool(flag) for flag in freq_list], "moe_layer_freq (list)"
    first_dense = view.get_int("first_k_dense_replace", maximum=MAX_LAYERS)
    freq = positive(view.get_int("moe_layer_freq", maximum=MAX_LAYERS))
    if first_dense is not None or freq is not None:
        # DeepSeek/Kimi/GLM: MoE iff i >= first_k_dense_replace and i % moe_layer_freq == 0.
        k, f = first_dense or 0, freq or 1
        return [i >= k and i % f == 0 for i in range(n)], "first_k_dense_replace/moe_layer_freq"

    step = positive(view.get_int("decoder_sparse_step", maximum=MAX_LAYERS))
    only_dense = view.get_int_list("mlp_only_layers", maximum=MAX_LAYERS)
    if step is not None or only_dense is not None:
        # Qwen-MoE: MoE iff i not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0.
        s, skip = step or 1, set(only_dense or [])
        return [i not in skip and (i + 1) % s == 0 for i in range(n)], "decoder_sparse_step/mlp_only_layers"

    # transformers configuration_llama4.py: moe_layers when given, else
    # range(interleave_moe_layer_step - 1, n, interleave_moe_layer_step).
    explicit = view.get_int_list("moe_layers", maximum=MAX_LAYERS)
    if explicit is not None:
        chosen = set(explicit)
        return [i in chosen for i in range(n)], "moe_layers"
    interleave = positive(view.get_int("interleave_moe_layer_step", maximum=MAX_LAYERS))
    if interleave is not None:
        return [(i + 1) % interleave == 0 for i in range(n)], "interleave_moe_layer_step"

    return [ffn is not None for ffn in base], "every layer"


def _shared(view: ConfigView, family: Family, expert_width: int | None) -> tuple[int, int, bool]:
    """(number of shared experts, their total intermediate size, has Qwen's shared gate).

    A width or count of 0 is a valid config value, never an error: what it builds is the
    modeling code's, read below key by key."""
    if family.shared_expert_key is not None:
        width = view.get_int(family.shared_expert_key)
        if width is not None:
            # 0: GraniteMoeHybridMLP(shared_intermediate_size=0) is two 0-wide Linears, no weight
            # (transformers modeling_granitemoehybrid.py GraniteMoeHybridMLP.__init__, lines 759-763);
            # GraniteMoeShared builds none at all (modeling_granitemoeshared.py line 344).
            return (1, width, False) if width > 0 else (0, 0, False)
    if family.implicit_shared_expert:
        # Llama-4 (modeling_llama4.py Llama4TextMoe): one shared expert of intermediate_size, no key says so.
        width = positive(view.get_int("intermediate_size"))
        return (1, width, False) if width is not None else (0, 0, False)
    count = view.get_int(*SHARED_COUNT_KEYS)
    qwen_width = view.get_int("shared_expert_intermediate_size")
    nemotron_width = view.get_int("moe_shared_expert_intermediate_size")
    if qwen_width is not None and not count:
        # Qwen2-MoE / Qwen3-Next: no count key; one shared expert implied by its width. Width 0:
        # Qwen2MoeMLP(intermediate_size=0) keeps the 0 (modeling_qwen2_moe.py line 127, the same in
        # modeling_qwen3_next.py line 777 and Qwen3_5MoeMLP line 842): three 0-wide Linears, no weight,
        # no output. Its shared_expert_gate (Linear(hidden_size, 1), modeling_qwen2_moe.py line 338)
        # then scales nothing and is left out with the expert: the same key at 0 also sits in Qwen3-MoE
        # configs, whose modeling_qwen3_moe.py builds no shared expert (nor gate) at all.
        return (1, qwen_width, True) if qwen_width > 0 else (0, 0, False)
    if nemotron_width is not None:
        # NemotronHMoE always builds one NemotronHMLP(intermediate_size=moe_shared_expert_intermediate_size)
        # (modeling_nemotron_h.py line 733) and never reads n_shared_experts; NemotronHMLP takes
        # `intermediate_size or config.intermediate_size` (line 644), so 0 is a shared expert of
        # intermediate_size, not none.
        width = nemotron_width or positive(view.get_int("intermediate_size"))
        return (1, width, False) if width else (0, 0, False)
    if count:
        return count, count * (expert_width or 0), False
    # 0 (or no count): DeepseekV3MLP(intermediate_size=moe_intermediate_size * 0) keeps the 0
    # (modeling_deepseek_v3.py lines 109 and 211): 0-wide Linears, no weight.
    return 0, 0, False


def analyze_moe(view: ConfigView, family: Family, layout: LayerLayout) -> MoeLayout:
    """The ``architecture.moe`` section and the per-layer FFN kinds."""
    n = len(layout.pattern)
    base = _ffn_without_experts(view, family, layout)
    routed = positive(view.get_int(*ROUTED_KEYS))
    if routed is None or routed < 2 or n == 0:
        return MoeLayout(empty_moe(), base)

    sparse, source = _sparse_layers(view, family, n, base)
    if not any(sparse):
        return MoeLayout(empty_moe(), base, source=source)
    ffn: list[str | None] = [
        SPARSE if is_sparse else kind for is_sparse, kind in zip(sparse, base, strict=True)
    ]

    expert_width = positive(
        view.get_int("moe_intermediate_size", "expert_intermediate_size", "moe_ffn_hidden_size")
    )
    if expert_width is None:
        # Mixtral, gpt-oss, MiniMax, Jamba: each expert is a full-width FFN.
        expert_width = positive(view.get_int("intermediate_size", "ffn_hidden_size"))
    shared_count, shared_width, shared_gate = _shared(view, family, expert_width)

    section = Moe(
        is_moe=True,
        routed_experts=routed,
        shared_experts=shared_count,
        experts_per_token=positive(view.get_int(*TOPK_KEYS)),
        n_group=positive(view.get_int("n_group", "num_expert_group", "moe_router_num_groups")),
        topk_group=positive(view.get_int("topk_group", "moe_router_group_topk")),
        scoring_func=view.get_str("scoring_func", "moe_router_activation_func", "router_activation"),
        topk_method=view.get_str("topk_method"),
        moe_intermediate_size=expert_width,
        moe_layers=sum(1 for kind in ffn if kind == SPARSE),
        dense_layers=sum(1 for kind in ffn if kind == DENSE),
        routed_scaling_factor=view.get_float("routed_scaling_factor"),
        norm_topk_prob=view.get_bool("norm_topk_prob", "moe_renormalize", "renormalize"),
    )
    return MoeLayout(section, ffn, expert_width, shared_width, shared_gate, source)
