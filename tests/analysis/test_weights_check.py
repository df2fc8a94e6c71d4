"""Per-layer verdicts confirmed (or contradicted) by the safetensors headers."""

from __future__ import annotations

import json
from pathlib import Path

from introspect.analysis.architecture.section import analyze_architecture

KIMI_LINEAR = Path(__file__).resolve().parent.parent / "data/realconfigs/kimi-linear-48b-a3b-instruct/config.json"


def _shards(groups: list[tuple[str, list[int]]]) -> dict:
    return {"shards": [{"file": "model.safetensors", "groups": [
        {"template": t, "dtype": "BF16", "shape": [4, 4], "count": len(ids), "layer_ids": ids}
        for t, ids in groups]}]}


def test_kimi_linear_mla_and_moe_layers_agree_with_the_weights():
    config = json.loads(KIMI_LINEAR.read_text())
    mla = [3, 7, 11, 15, 19, 23, 26]  # 0-based; the config's full_attn_layers are 1-based
    moe = list(range(1, 27))
    arch, findings = analyze_architecture(config, safetensors=_shards([
        ("model.layers.#.self_attn.kv_a_proj_with_mqa.weight", mla),
        ("model.layers.#.mlp.experts.#.w1.weight", moe),
        ("model.layers.#.mlp.gate_proj.weight", [0]),
    ]))
    assert arch["confirmed_by_weights"] == {"moe_layers": True, "mla_layers": True}
    assert not [f for f in findings if f["code"] == "weights-layer-mismatch"]


def test_disagreement_is_a_warning_naming_both_layer_lists():
    config = json.loads(KIMI_LINEAR.read_text())
    arch, findings = analyze_architecture(config, safetensors=_shards([
        ("model.layers.#.self_attn.kv_a_proj_with_mqa.weight", [2, 6, 10, 14, 18, 22, 25]),  # read as 0-based
        ("model.layers.#.mlp.experts.#.w1.weight", list(range(0, 27))),  # no dense first layer
    ]))
    assert arch["confirmed_by_weights"] == {"moe_layers": False, "mla_layers": False}
    mismatches = [f for f in findings if f["code"] == "weights-layer-mismatch"]
    assert len(mismatches) == 2 and all(f["severity"] == "warning" for f in mismatches)
    assert any("[3, 7, 11, 15, 19, 23, 26]" in f["message"] and "[2, 6, 10" in f["message"] for f in mismatches)


def test_fused_experts_and_no_headers_are_left_unchecked():
    config = json.loads(KIMI_LINEAR.read_text())
    arch, _ = analyze_architecture(config, safetensors=_shards([("model.layers.#.mlp.experts.gate_up_proj", [1])]))
    assert arch["confirmed_by_weights"] == {"moe_layers": None, "mla_layers": None}
    arch, _ = analyze_architecture(config)
    assert arch["confirmed_by_weights"] is None


REAL = Path(__file__).resolve().parent.parent / "data/realconfigs"


def _real(folder: str) -> dict:
    return json.loads((REAL / folder / "config.json").read_text())


def test_recurrent_layers_of_a_hybrid_agree_with_their_state_tensors():
    # Qwen3-Next: full attention at every 4th layer (0-based 3, 7, ...), Gated DeltaNet (linear_attn.A_log) elsewhere.
    gdn = [i for i in range(48) if (i + 1) % 4]
    arch, findings = analyze_architecture(_real("qwen3-next-80b-a3b-thinking"), safetensors=_shards([
        ("model.layers.#.linear_attn.A_log", gdn),
        ("model.layers.#.self_attn.q_proj.weight", [i for i in range(48) if i not in gdn]),
    ]))
    assert arch["confirmed_by_weights"]["recurrent_layers"] is True
    assert "indexer_layers" not in arch["confirmed_by_weights"]  # no indexer tensors: not checked
    assert not [f for f in findings if f["code"] == "weights-layer-mismatch"]


def test_recurrent_layers_in_the_wrong_place_are_a_warning():
    # MiniMax lightning layers own output_gate; a checkpoint with softmax at layer 0 instead of 7 disagrees.
    lightning = [i for i in range(80) if (i + 1) % 8 and i != 0] + [7]
    arch, findings = analyze_architecture(_real("minimax-text-01"), safetensors=_shards([
        ("model.layers.#.self_attn.output_gate.weight", sorted(lightning)),
    ]))
    assert arch["confirmed_by_weights"]["recurrent_layers"] is False
    message = next(f["message"] for f in findings if f["code"] == "weights-layer-mismatch")
    assert "recurrent" in message and "0, 1, 2" in message


def test_rwkv_blocks_are_read_as_layers():
    arch, findings = analyze_architecture(_real("rwkv-4-169m-pile"), safetensors=_shards([
        ("rwkv.blocks.#.attention.time_decay", list(range(12))),
    ]))
    assert arch["confirmed_by_weights"]["recurrent_layers"] is True
    assert not [f for f in findings if f["code"] == "weights-layer-mismatch"]


def test_indexer_tensors_follow_the_sparse_attention_verdict():
    indexer = [("model.layers.#.self_attn.indexer.wk.weight", list(range(61)))]
    arch, findings = analyze_architecture(_real("deepseek-v3.2-exp"), safetensors=_shards(indexer))
    assert arch["confirmed_by_weights"]["indexer_layers"] is True
    assert not [f for f in findings if f["code"] == "weights-layer-mismatch"]
    # The same weights under a DeepSeek-V3 config (no index_topk): the headers hold an indexer it never declares.
    arch, findings = analyze_architecture(_real("deepseek-v3"), safetensors=_shards(indexer))
    assert arch["confirmed_by_weights"]["indexer_layers"] is False
    assert any("sparse-indexer" in f["message"] for f in findings if f["code"] == "weights-layer-mismatch")


def test_deepseek_v4_compressor_and_indexer_layers_follow_compress_ratios():
    # The public tensor list of DeepSeek-V4-Flash: compressors at layers 2-42, the indexer at 2, 4, ..., 42.
    csa, hca = list(range(2, 43, 2)), list(range(3, 42, 2))
    arch, findings = analyze_architecture(_real("deepseek-v4-flash"), safetensors=_shards([
        ("layers.#.attn.compressor.wkv.weight", sorted(csa + hca)),
        ("layers.#.attn.indexer.wq_b.weight", csa),
        ("layers.#.ffn.experts.#.w1.weight", list(range(43))),
    ]))
    assert arch["confirmed_by_weights"] == {"moe_layers": True, "mla_layers": None, "indexer_layers": True,
                                            "compressed_layers": True}
    assert not [f for f in findings if f["code"] == "weights-layer-mismatch"]
    # Read as a sliding window (every layer bounded), the same weights would contradict the verdict.
    config = dict(_real("deepseek-v4-flash"), compress_ratios=[0] * 44)
    arch, findings = analyze_architecture(config, safetensors=_shards([
        ("layers.#.attn.compressor.wkv.weight", sorted(csa + hca))]))
    assert arch["confirmed_by_weights"]["compressed_layers"] is False


def test_rwkv7_decay_lora_marks_every_recurrent_layer():
    arch, _ = analyze_architecture(_real("rwkv7-goose-world3-1.5b"), safetensors=_shards([
        ("model.layers.#.attn.w_lora.lora.0.weight", list(range(23))),  # one layer's tensors missing
    ]))
    assert arch["confirmed_by_weights"]["recurrent_layers"] is False
