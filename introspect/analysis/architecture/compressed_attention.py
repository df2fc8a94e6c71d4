"""DeepSeek-V4's compressed attention: per-layer compression ratios, their cache and their weights.

transformers configuration_deepseek_v4.py ``DeepseekV4Config.__post_init__`` turns the
checkpoint's per-layer ``compress_ratios`` (0 / 4 / 128; the list may be longer than
``num_hidden_layers``: the extra entries are the MTP layers') into ``layer_types``:

* 0: ``sliding_attention``: only the ``sliding_window``-token window branch;
* 4: ``compressed_sparse_attention`` (CSA): the window plus one compressed K/V entry
  per 4 tokens (two overlapping series), of which the lightning indexer picks
  ``index_topk`` per query; the indexer keeps its own compressed keys;
* 128: ``heavily_compressed_attention`` (HCA): the window plus one entry per 128
  tokens, all read.

A compression ratio is not a sliding window: CSA/HCA layers keep growing with the
context, 1/4 or 1/128 as fast as full attention. Every layer attends with one shared
K=V head of ``head_dim`` (modeling_deepseek_v4.py: "shared-KV MQA").
"""

from __future__ import annotations

from introspect.analysis.architecture.config_view import ConfigView, positive
from introspect.analysis.architecture.kinds import CSA, HCA, SLIDING
from introspect.documents.profile_architecture import Attention

# transformers configuration_deepseek_v4.py _COMPRESS_RATIO_TO_LAYER_TYPE.
RATIO_KINDS = {0: SLIDING, 4: CSA, 128: HCA}
# DeepseekV4Config.default_compress_rates: the ratio each compressed kind stores at.
DEFAULT_RATES = {CSA: 4, HCA: 128}


def compress_rates(view: ConfigView) -> dict[str, int]:
    rates = dict(DEFAULT_RATES)
    given = view.get_dict("compress_rates") or {}
    for kind in rates:
        value = given.get(kind)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            rates[kind] = value
    return rates


def _dims(view: ConfigView) -> tuple[int, int, int]:
    """(head_dim, index_head_dim, sliding_window) with DeepseekV4Config's defaults."""
    head_dim = positive(view.get_int("head_dim")) or 512
    index_dim = positive(view.get_int("index_head_dim")) or 128
    window = positive(view.get_int("sliding_window")) or 128
    return head_dim, index_dim, window


def growing_elements(view: ConfigView, kind: str) -> float:
    """Cached elements added per token by one layer of ``kind`` once the context passes the window."""
    head_dim, index_dim, _ = _dims(view)
    rates = compress_rates(view)
    if kind == CSA:
        return (head_dim + index_dim) / rates[CSA]  # compressed K=V entries + the indexer's compressed keys
    if kind == HCA:
        return head_dim / rates[HCA]
    return 0.0


def window_elements(view: ConfigView) -> int:
    """The bounded window branch every V4 layer keeps: sliding_window tokens of one K=V head."""
    head_dim, _, window = _dims(view)
    return head_dim * window


def _compressor(hidden: int, out: int, rate: int) -> int:
    # DeepseekV4*Compressor: kv_proj and gate_proj (hidden -> out), position_bias [rate, out], kv_norm.
    return 2 * hidden * out + rate * out


def attention_params(view: ConfigView, attention: Attention, hidden: int, kind: str) -> int:
    """One V4 attention block of ``kind`` with its compressor, indexer and the layer's mHC mixing weights."""
    head_dim, index_dim, _ = _dims(view)
    heads = attention.num_heads or 0
    q_lora = positive(view.get_int("q_lora_rank")) or hidden
    groups = positive(view.get_int("o_groups")) or 1
    o_lora = positive(view.get_int("o_lora_rank")) or hidden
    q = hidden * q_lora + q_lora + q_lora * heads * head_dim  # wq_a, q_norm, wq_b
    kv = hidden * head_dim + head_dim  # wkv (one shared K=V head), kv_norm
    out = heads * head_dim * o_lora + groups * o_lora * hidden  # grouped wo_a, wo_b
    total = q + kv + out + heads  # attn_sink per head
    rates = compress_rates(view)
    if kind == CSA:
        total += _compressor(hidden, 2 * head_dim, rates[CSA]) + head_dim  # two overlapping series
        index_heads = positive(view.get_int("index_n_heads")) or 64
        total += q_lora * index_heads * index_dim + hidden * index_heads  # indexer wq_b, weights_proj
        total += _compressor(hidden, 2 * index_dim, rates[CSA]) + index_dim
    elif kind == HCA:
        total += _compressor(hidden, head_dim, rates[HCA]) + head_dim
    return total + 2 * hyper_connection_params(view, hidden)


def hyper_connection_params(view: ConfigView, hidden: int) -> int:
    """mHC weights of one sub-block (hc_attn_* or hc_ffn_*): fn [(2 + n) n, n h], base [(2 + n) n], scale [3]."""
    n = positive(view.get_int("hc_mult"))
    if n is None:
        return 0
    mix = (2 + n) * n
    return mix * n * hidden + mix + 3


def head_hyper_connection_params(view: ConfigView, hidden: int) -> int:
    """The model-level hc_head_fn [n, n h], hc_head_base [n] and hc_head_scale [1] before the output head."""
    n = positive(view.get_int("hc_mult"))
    return n * n * hidden + n + 1 if n is not None else 0
