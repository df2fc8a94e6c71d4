"""The KV-cache section is built as typed records (KvKind, KvCache), and its JSON holds only the fields
each rule set: a record field left unset must not appear as a null key.

Figures are worked out here by hand from the engines' state-dtype rules that state_dtypes.py cites
(SGLang 0.5.23 configs/mamba_utils.py: conv bf16, recurrent fp32; vLLM 0.33.0 layers/mamba/mamba_utils.py:
both at the model dtype on ``auto``).
"""

from __future__ import annotations

from introspect.analysis.architecture.config_view import ConfigView
from introspect.analysis.architecture.kinds import FULL, GDN, RWKV, SLIDING
from introspect.analysis.architecture.kv_cache import kv_section
from introspect.analysis.architecture.state_dtypes import MAMBA_RULE, rescaled_state, state_entry
from introspect.documents.profile_architecture import Attention, KvKind

BF16 = ConfigView({"torch_dtype": "bfloat16", "architectures": ["Qwen3NextForCausalLM"]})


def _attention(window: int | None) -> Attention:
    return Attention(type="GQA", num_heads=8, num_kv_heads=2, head_dim=64, q_lora_rank=None, kv_lora_rank=None,
                     qk_nope_head_dim=None, qk_rope_head_dim=None, v_head_dim=64, sliding_window=window)


def test_state_entry_and_its_rescale_keep_the_set_fields_only() -> None:
    entry = state_entry(BF16, MAMBA_RULE, conv=300, recurrent=1000, layers=4)
    sglang, vllm = 300 * 2 + 1000 * 4, 300 * 2 + 1000 * 2  # 4,600 and 2,600 B a layer
    assert entry.to_dict() == {
        "layers": 4, "state_bytes_per_layer": sglang, "state_bytes_per_sequence": 4 * sglang,
        "state_elements_per_layer": {"conv": 300, "recurrent": 1000},
        "state_dtypes": {"sglang": {"conv": "bfloat16", "recurrent": "float32"},
                         "vllm": {"conv": "bfloat16", "recurrent": "bfloat16"}},
        "state_bytes_per_layer_by_engine": {"sglang": sglang, "vllm": vllm}}
    moved = rescaled_state(entry, 7)  # the model-code witness counted 7 such layers
    assert list(moved.to_dict()) == list(entry.to_dict())
    assert moved.layers == 7 and moved.state_bytes_per_sequence == 7 * sglang
    # A kind kept at the model's dtype (no engine serves RWKV) has one figure: no per-engine keys appear.
    plain = KvKind(layers=2, state_bytes_per_layer=500, state_bytes_per_sequence=1000)
    assert rescaled_state(plain, 3).to_dict() == {"layers": 3, "state_bytes_per_layer": 500,
                                                  "state_bytes_per_sequence": 1500}


def test_kv_section_sums_typed_entries() -> None:
    per_token = 2 * 64 * 2 * 2  # K and V of 2 KV heads of 64, bf16: 512 B a layer
    per_kind = {
        FULL: KvKind(layers=2, bytes_per_token_per_layer=per_token, bytes_per_token=2 * per_token),
        SLIDING: KvKind(layers=6, bytes_per_token_per_layer=per_token, bytes_per_token=6 * per_token),
        GDN: state_entry(BF16, MAMBA_RULE, conv=300, recurrent=1000, layers=4),
        RWKV: KvKind(layers=1, state_bytes_per_layer=500, state_bytes_per_sequence=500),
    }
    kv = kv_section(per_kind, _attention(window=4096), "bfloat16", 2)
    assert kv.bytes_per_token == 8 * per_token and kv.bytes_per_token_beyond_window == 2 * per_token
    assert kv.sliding_window_cap == 4096
    assert kv.state_bytes_per_sequence == 4 * 4600 + 500
    # Each engine's total: GDN at its own figure, RWKV at its one figure in both.
    assert kv.state_bytes_per_sequence_by_engine == {"sglang": 4 * 4600 + 500, "vllm": 4 * 2600 + 500}
    data = kv.to_dict()
    assert "indexer_bytes_per_token_per_layer" not in data and "settled_by" not in data
    assert "kv_shared_layers" not in data["per_kind"][FULL]


def test_kv_section_without_a_per_engine_figure_sets_no_engine_totals() -> None:
    per_kind = {FULL: KvKind(layers=2, bytes_per_token_per_layer=512, bytes_per_token=1024)}
    kv = kv_section(per_kind, _attention(window=None), "float8_e4m3fn", 1)
    assert kv.sliding_window_cap is None and kv.bytes_per_token_beyond_window == 1024
    assert "state_bytes_per_sequence_by_engine" not in kv.to_dict()
    assert kv.dtype_assumed is False and kv.state_bytes_per_sequence == 0
