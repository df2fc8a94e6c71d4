"""Attention verdict: MHA, GQA, MQA, MLA or none, with head geometry.

MLA is told by ``kv_lora_rank`` (DeepSeek-V2/V3, Kimi-K2, Kimi-Linear): its
``num_key_value_heads`` is nominal and the cache holds a shared latent instead.
MQA is told by one KV head or by the older ``multi_query`` flag (StarCoder,
Falcon-7B). A model without attention layers (Mamba) gets ``none`` and null
heads, never an MHA default.
"""

from __future__ import annotations

from introspect.analysis.architecture.config_view import ConfigView, positive
from introspect.analysis.architecture.families import Family
from introspect.analysis.architecture.kinds import CHUNKED, CSA, HCA, SLIDING
from introspect.analysis.architecture.layers import LayerLayout
from introspect.documents.profile_architecture import Attention, SparseIndexer

HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads", "num_heads", "attention_heads")
KV_HEAD_KEYS = (
    "num_key_value_heads",
    "num_kv_heads",
    "n_head_kv",
    "n_kv_heads",
    "num_kv",
    "multi_query_group_num",
    "num_query_groups",
    "kv_n_heads",  # DBRX attn_config.kv_n_heads (transformers configuration_dbrx.py DbrxAttentionConfig)
)
HEAD_DIM_KEYS = ("head_dim", "attention_head_dim", "kv_channels", "d_head")
HIDDEN_KEYS = ("hidden_size", "n_embd", "d_model", "dim", "model_dim")


def hidden_size(view: ConfigView) -> int | None:
    return positive(view.get_int(*HIDDEN_KEYS))


def empty_attention(kind: str | None = "none") -> Attention:
    """No attention heads: ``none`` for a model without attention layers, None for one whose
    attention is unknown."""
    return Attention(type=kind, num_heads=None, num_kv_heads=None, head_dim=None, q_lora_rank=None,
                     kv_lora_rank=None, qk_nope_head_dim=None, qk_rope_head_dim=None, v_head_dim=None,
                     sliding_window=None)


def _kv_heads(view: ConfigView, family: Family, heads: int) -> int:
    multi_query = view.get_bool("multi_query")
    if family.new_decoder_kv and view.get_bool("new_decoder_architecture"):
        # Falcon-40B/180B: grouped KV heads in num_kv_heads, multi_query ignored.
        return positive(view.get_int(*KV_HEAD_KEYS)) or heads
    if multi_query:
        return 1
    return positive(view.get_int(*KV_HEAD_KEYS)) or heads


def analyze_attention(view: ConfigView, family: Family, layout: LayerLayout) -> Attention:
    """The ``architecture.attention`` section."""
    out = empty_attention()
    if layout.pattern and layout.attention_layers == 0:
        return out  # pure SSM (or all-linear): no softmax attention anywhere
    if not layout.pattern and family.ssm_only:
        return out

    # Mamba-2 configs call their SSM heads num_heads: never read that as attention.
    keys = HEAD_KEYS if not family.ssm_only else HEAD_KEYS[:3]
    heads = positive(view.get_int(*keys))
    kv_lora = positive(view.get_int("kv_lora_rank"))
    hidden = hidden_size(view)

    if kv_lora is not None:
        out.type = "MLA"
        out.kv_lora_rank = kv_lora
        out.q_lora_rank = positive(view.get_int("q_lora_rank"))
        nope = positive(view.get_int("qk_nope_head_dim"))
        rope = positive(view.get_int("qk_rope_head_dim"))
        out.qk_nope_head_dim = nope
        out.qk_rope_head_dim = rope
        out.v_head_dim = positive(view.get_int("v_head_dim"))
        out.num_heads = heads
        out.num_kv_heads = positive(view.get_int(*KV_HEAD_KEYS)) or heads  # nominal for MLA
        # The query/key head width is nope + rope; a top-level head_dim (Kimi-Linear's 72) is legacy.
        out.head_dim = (nope or 0) + (rope or 0) or None
    elif heads is not None:
        kv = min(_kv_heads(view, family, heads), heads)
        out.num_heads = heads
        out.num_kv_heads = kv
        head_dim = positive(view.get_int(*HEAD_DIM_KEYS))
        if head_dim is None and hidden is not None and hidden % heads == 0:
            head_dim = hidden // heads
        out.head_dim = head_dim
        out.v_head_dim = head_dim
        out.type = "MHA" if kv == heads else "MQA" if kv == 1 else "GQA"
    else:
        out.type = None  # attention layers exist but the file does not say how many heads

    if SLIDING in layout.components or CSA in layout.components or HCA in layout.components:
        out.sliding_window = positive(view.get_int("sliding_window", "sliding_window_size", "attention_window"))
    if CHUNKED in layout.components:
        # transformers modeling_llama4.py: chunked layers attend within attention_chunk_size-token chunks.
        out.attention_chunk_size = positive(view.get_int("attention_chunk_size"))
    indexer = sparse_indexer(view)
    if indexer is not None and out.type is not None:
        out.sparse_indexer = indexer
    return out


def sparse_indexer(view: ConfigView) -> SparseIndexer | None:
    """DeepSeek-V3.2's lightning indexer: each query attends to only ``index_topk`` selected tokens.

    transformers models/deepseek_v32 inference/model.py ``Indexer``: ``wq_b`` (q_lora_rank ->
    index_n_heads x index_head_dim), ``wk`` (hidden -> index_head_dim), ``k_norm`` (LayerNorm),
    ``weights_proj`` (hidden -> index_n_heads), and a ``k_cache`` of index_head_dim per token per layer.
    """
    topk = positive(view.get_int("index_topk"))
    heads = positive(view.get_int("index_n_heads"))
    head_dim = positive(view.get_int("index_head_dim"))
    if topk is None or heads is None or head_dim is None:
        return None
    return SparseIndexer(kind="sparse_indexer", index_topk=topk, index_n_heads=heads, index_head_dim=head_dim)
