"""One entry per token-mixer kind: how configs name it, its plain words, state and parameters.

A layer's *mixer* is what mixes information across tokens: softmax attention (full
or sliding), or a recurrent mechanism with a fixed per-sequence state (Gated
DeltaNet, KDA, Mamba-1, Mamba-2, lightning/linear attention, short convolution).
``MIXERS`` is the only place that knows, for each kind:

* ``names``: the spellings of config ``layer_types`` entries that always mean it
  (family-dependent spellings such as ``linear_attention`` or ``mamba`` are
  resolved in :mod:`introspect.analysis.architecture.layers` through the family table);
* ``markers``: config keys that betray the kind when the family is unknown;
* ``words``: how the report names it;
* ``state`` / ``params``: the formulas in :mod:`introspect.analysis.architecture.mixer_math`.

Attention variants (MLA vs. plain MHA/GQA/MQA heads) are in ``ATTENTION_VARIANTS``:
their KV-cache width per token and their parameter formula.

A new mechanism is one entry here (plus its formulas), the family row that uses it
and a JSON case in ``tests/data/families``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from introspect.analysis.architecture import compressed_attention as v4
from introspect.analysis.architecture import mixer_math as math_
from introspect.analysis.architecture.config_view import ConfigView
from introspect.analysis.architecture.kinds import (
    CHUNKED,
    CONV,
    CROSS,
    CSA,
    FULL,
    GDN,
    HCA,
    KDA,
    LINEAR,
    MAMBA,
    MAMBA2,
    MLP,
    RECURRENT,
    RWKV,
    SLIDING,
)
from introspect.analysis.architecture.mixer_math import LayerCtx
from introspect.analysis.architecture.state_dtypes import KDA_RULE, MAMBA_RULE
from introspect.documents.profile_architecture import Attention

StateFn = Callable[[ConfigView, int | None], tuple[int, int]]  # (view, hidden) -> (conv, recurrent) elements
ParamsFn = Callable[[LayerCtx], int]


@dataclass(frozen=True)
class Mixer:
    """One token-mixer kind."""

    kind: str
    words: str  # plain words for the report's "mixers" line
    names: tuple[str, ...] = ()  # layer_types spellings that always mean this kind
    markers: tuple[str, ...] = ()  # config keys that reveal it when the family is unknown
    attention: bool = False  # softmax attention: a KV cache that grows with the context
    recurrent: bool = False  # a fixed per-sequence state instead of a KV cache
    state: StateFn | None = None  # state elements per layer (conv window, recurrent matrix)
    params: ParamsFn | None = None  # parameters of one layer's mixer; None counts nothing
    state_rule: str | None = MAMBA_RULE  # the engines' dtypes for its state (state_dtypes.py); None: model dtype


MIXERS: dict[str, Mixer] = {
    m.kind: m
    for m in (
        # transformers modeling_llama.py LlamaAttention and every family that copies it.
        Mixer(FULL, "full attention", attention=True, params=math_.attention_params,
              names=("full_attention", "attention", "global", "global_attention",
                     "indexed_attention")),  # DSA (GLM-5/DeepSeek-V3.2): sparse reads, full KV cache
        # Gemma-2/3, gpt-oss, Mistral: a window bounds the cache.
        Mixer(SLIDING, "sliding attention", attention=True, params=math_.attention_params,
              names=("sliding_attention", "sliding", "local", "local_attention", "window_attention")),
        # transformers modeling_llama4.py: attention within fixed attention_chunk_size-token chunks; vLLM
        # (ChunkedLocalAttention) keeps at most one chunk of KV per layer, so the cache is bounded too.
        Mixer(CHUNKED, "chunked attention", attention=True, params=math_.attention_params,
              names=("chunked_attention",)),
        # transformers modeling_deepseek_v4.py: a window plus compressed K/V entries (compressed_attention.py).
        Mixer(CSA, "compressed sparse attention (CSA)", attention=True, names=("compressed_sparse_attention",)),
        Mixer(HCA, "heavily compressed attention (HCA)", attention=True, names=("heavily_compressed_attention",)),
        # transformers modeling_qwen3_next.py Qwen3NextGatedDeltaNet.
        Mixer(GDN, "Gated DeltaNet", names=("gated_deltanet", "gdn"), recurrent=True,
              markers=("linear_num_value_heads", "linear_key_head_dim"),
              state=math_.gdn_state, params=math_.gdn_params),
        # moonshotai/Kimi-Linear modeling_kimi.py KimiDeltaAttention.
        Mixer(KDA, "KDA (Kimi Delta Attention)", names=("kda",), recurrent=True,
              markers=("linear_attn_config",), state=math_.kda_state, params=math_.kda_params,
              state_rule=KDA_RULE),
        # transformers modeling_mamba2.py Mamba2Mixer (also Bamba, Nemotron-H, Falcon-H1, Zamba2).
        Mixer(MAMBA2, "Mamba-2", names=("mamba2",), recurrent=True,
              markers=("mamba_d_ssm", "mamba_num_heads", "mamba_n_heads"),
              state=math_.mamba2_state, params=math_.mamba2_params),
        # transformers modeling_mamba.py MambaMixer (also Jamba, Falcon-Mamba).
        Mixer(MAMBA, "Mamba", names=("mamba1",), recurrent=True,
              markers=("mamba_d_state", "time_step_rank", "mamba_dt_rank"),
              state=math_.mamba1_state, params=math_.mamba1_params),
        # MiniMax-Text-01 lightning attention (the generic "linear_attention" of a family without a row).
        Mixer(LINEAR, "linear-attention", recurrent=True, state=math_.lightning_state,
              params=math_.lightning_params),
        # transformers modeling_rwkv.py (RWKV-4) time + channel mixing; fla rwkv6/rwkv7 for RWKV-5..7.
        # Neither SGLang nor vLLM serves RWKV: its state stays at the model's dtype (state_rule None).
        Mixer(RWKV, "RWKV (recurrent time mixing)", names=("rwkv",), recurrent=True,
              state=math_.rwkv_state,
              params=math_.rwkv_params, state_rule=None),
        # LFM2's gated short convolution: a fixed state, no KV.
        Mixer(CONV, "conv", names=("conv",), recurrent=True),
        # transformers modeling_mllama.py MllamaTextCrossAttention: K/V of the image, computed once per
        # request (vLLM v1 kv_cache_interface.py CrossAttentionSpec), nothing per generated token.
        Mixer(CROSS, "cross-attention (K/V of the image/encoder, per sequence)", params=math_.attention_params),
        # A mixer the built model shows to keep a state (A_log, dt_bias, conv1d, decay ...) of no known kind.
        Mixer(RECURRENT, "recurrent mixer (kind not identified)", recurrent=True),
        # Nemotron-H "-"/"E" blocks: an FFN only, no token mixing.
        Mixer(MLP, "MLP-only", names=("moe", "mlp")),
    )
}

ATTENTION_KINDS = frozenset(k for k, m in MIXERS.items() if m.attention)
RECURRENT_KINDS = frozenset(k for k, m in MIXERS.items() if m.recurrent)
# The order in which markers are tried for a family the table does not name.
MARKER_ORDER = (GDN, KDA, MAMBA2, MAMBA)
# Layer-type spellings that mean one kind whatever the family.
FIXED_NAMES = {name: m.kind for m in MIXERS.values() for name in m.names}


def words(kind: str) -> str:
    """The report's words for one layer kind (a parallel ``a+b`` kind is spelled out)."""
    mixer = MIXERS.get(kind)
    return mixer.words if mixer is not None else kind.replace("_", " ")


@dataclass(frozen=True)
class AttentionVariant:
    """How one attention type stores its cache and weighs its parameters."""

    type: str
    kv_elements: Callable[[Attention], int]  # cached elements per token per layer
    words: Callable[[Attention], str]


def _mla_words(att: Attention) -> str:
    return (f"MLA: {att.num_heads} heads over a shared KV latent of {att.kv_lora_rank} "
            f"+ {att.qk_rope_head_dim} rope dims")


def _indexer_words(att: Attention) -> str:
    indexer = att.sparse_indexer
    if indexer is None:
        return ""
    return (f"; sparse indexer (MLA+sparse_indexer): each query reads the top {indexer.index_topk} tokens "
            f"picked by {indexer.index_n_heads} indexer heads of {indexer.index_head_dim}")


def _heads_words(att: Attention) -> str:
    return f"{att.type}: {att.num_heads} query heads, {att.num_kv_heads} KV heads, head_dim {att.head_dim}"


ATTENTION_VARIANTS: dict[str, AttentionVariant] = {
    # DeepSeek-V2 paper section 2.1: one latent of kv_lora_rank plus the decoupled rope key per token.
    "MLA": AttentionVariant("MLA", math_.mla_kv_elements, _mla_words),
    "GQA": AttentionVariant("GQA", math_.heads_kv_elements, _heads_words),
    "MQA": AttentionVariant("MQA", math_.heads_kv_elements, _heads_words),
    "MHA": AttentionVariant("MHA", math_.heads_kv_elements, _heads_words),
}


def attention_words(att: Attention) -> str:
    variant = ATTENTION_VARIANTS.get(str(att.type))
    if variant is not None:
        return variant.words(att) + _indexer_words(att)
    if att.type == "none":
        return "none (no attention layers)"
    return "unknown (attention layers without a head count)"


def attention_kv_elements(att: Attention) -> int:
    """Cached elements per token per attention layer, the sparse indexer's keys included."""
    return _variant_kv_elements(att) + math_.indexer_kv_elements(att)


def _variant_kv_elements(att: Attention) -> int:
    variant = ATTENTION_VARIANTS.get(str(att.type))
    return variant.kv_elements(att) if variant is not None else math_.heads_kv_elements(att)


def attention_kv_bytes(att: Attention, width: int) -> int:
    """Cached bytes per token per attention layer: K/V (or the MLA latent) at ``width`` bytes an element, plus
    the sparse indexer's key at the engines' fixed fp8 layout (mixer_math.indexer_key_bytes)."""
    return _variant_kv_elements(att) * width + math_.indexer_key_bytes(att)


def layer_params(ctx: LayerCtx, kind: str) -> tuple[int, int]:
    """(attention params, recurrent params) of one layer's mixer(s); ``a+b`` runs both."""
    attention = recurrent = 0
    if ctx.family.compressed_attention and kind in (SLIDING, CSA, HCA):
        return v4.attention_params(ctx.view, ctx.attention, ctx.hidden, kind), 0
    for part in kind.split("+"):
        mixer = MIXERS.get(part)
        if mixer is None:
            attention += math_.attention_params(ctx)  # unknown mixer: count it as attention (best effort)
        elif mixer.params is None:
            continue
        elif mixer.attention or part == CROSS:  # cross-attention has q/k/v/o projections too
            attention += mixer.params(ctx)
        else:
            recurrent += mixer.params(ctx)
    return attention, recurrent


def state_split(view: ConfigView, kind: str, hidden: int | None) -> tuple[int, int]:
    """(conv, recurrent) state elements of one recurrent layer per sequence; (0, 0) for kinds without a formula."""
    mixer = MIXERS.get(kind)
    if mixer is None or mixer.state is None:
        return 0, 0
    return mixer.state(view, hidden)


def state_elements(view: ConfigView, kind: str, hidden: int | None) -> int:
    """Fixed per-sequence state of one recurrent layer, both tensors; 0 for kinds without a formula."""
    return sum(state_split(view, kind, hidden))
