"""Logical parameter counts from summarised safetensors headers (pure, no files).

Each test builds the tensor list a real checkpoint of that layout stores (names,
dtypes, stored shapes) from the model's config, summarises it the way the remote
probe does (docs/raw-facts.md: name templates with '#', grouped by dtype and
shape, with the layer ids), and checks that the count equals the logical count of
the very same tensors: packed INT4 / MXFP4 weights expanded, scales and shape
tensors excluded.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from introspect.analysis.architecture.safetensors_count import count_safetensors
from introspect.analysis.architecture.section import analyze_architecture
from introspect.documents.profile_architecture import Quantization

REAL = Path(__file__).resolve().parents[1] / "data" / "realconfigs"


def quantization(method: str, bits: int) -> Quantization:
    """The architecture section's quantization verdict for ``method`` at ``bits`` (nothing else declared)."""
    return Quantization(method=method, bits=bits, group_size=None, symmetric=None, format=None, targets=None,
                        ignore=None)
FAMILIES = Path(__file__).resolve().parents[1] / "data" / "families"

# (name, dtype, stored shape, logical parameters it holds)
Tensor = tuple[str, str, list[int], int]


def _prod(shape: list[int]) -> int:
    out = 1
    for dim in shape:
        out *= dim
    return out


def plain(name: str, shape: list[int], dtype: str = "BF16") -> list[Tensor]:
    return [(name, dtype, shape, _prod(shape))]


def linear(name: str, out_dim: int, in_dim: int, mode: str) -> list[Tensor]:
    """One nn.Linear weight as the given quantization stores it."""
    logical = out_dim * in_dim
    if mode == "int4":  # compressed-tensors pack-quantized, group 32
        return [
            (f"{name}.weight_packed", "I32", [out_dim, in_dim // 8], logical),
            (f"{name}.weight_scale", "BF16", [out_dim, in_dim // 32], 0),
            (f"{name}.weight_shape", "I32", [2], 0),
        ]
    if mode == "fp8":  # block-wise 128x128 with fp32 inverse scales
        blocks = [-(-out_dim // 128), -(-in_dim // 128)]
        return [
            (f"{name}.weight", "F8_E4M3", [out_dim, in_dim], logical),
            (f"{name}.weight_scale_inv", "F32", blocks, 0),
        ]
    if mode == "gptq":  # 4-bit, group 128, act-order index
        return [
            (f"{name}.qweight", "I32", [in_dim // 8, out_dim], logical),
            (f"{name}.qzeros", "I32", [in_dim // 128, out_dim // 8], 0),
            (f"{name}.scales", "F16", [in_dim // 128, out_dim], 0),
            (f"{name}.g_idx", "I32", [in_dim], 0),
        ]
    return plain(f"{name}.weight", [out_dim, in_dim], "F16" if mode == "f16" else "BF16")


def deepseek_layer(
    prefix: str, cfg: dict[str, Any], i: int, expert_mode: str, other_mode: str
) -> list[Tensor]:
    """One DeepSeek-V3-layout decoder layer (MLA + dense or MoE FFN)."""
    h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    nope, rope, v, q_lora, kv_lora = (
        cfg["qk_nope_head_dim"],
        cfg["qk_rope_head_dim"],
        cfg["v_head_dim"],
        cfg["q_lora_rank"],
        cfg["kv_lora_rank"],
    )
    p = f"{prefix}.layers.{i}"
    out = plain(f"{p}.input_layernorm.weight", [h]) + plain(f"{p}.post_attention_layernorm.weight", [h])
    out += linear(f"{p}.self_attn.q_a_proj", q_lora, h, other_mode) + plain(
        f"{p}.self_attn.q_a_layernorm.weight", [q_lora]
    )
    out += linear(f"{p}.self_attn.q_b_proj", heads * (nope + rope), q_lora, other_mode)
    out += linear(f"{p}.self_attn.kv_a_proj_with_mqa", kv_lora + rope, h, other_mode)
    out += plain(f"{p}.self_attn.kv_a_layernorm.weight", [kv_lora])
    out += linear(f"{p}.self_attn.kv_b_proj", heads * (nope + v), kv_lora, other_mode)
    out += linear(f"{p}.self_attn.o_proj", h, heads * v, other_mode)
    if i < cfg["first_k_dense_replace"]:
        inter = cfg["intermediate_size"]
        for proj, (o, n) in {"gate_proj": (inter, h), "up_proj": (inter, h), "down_proj": (h, inter)}.items():
            out += linear(f"{p}.mlp.{proj}", o, n, other_mode)
        return out
    experts, width = cfg["n_routed_experts"], cfg["moe_intermediate_size"]
    out += plain(f"{p}.mlp.gate.weight", [experts, h]) + plain(
        f"{p}.mlp.gate.e_score_correction_bias", [experts], "F32"
    )
    shared = width * cfg["n_shared_experts"]
    for proj, (o, n) in {"gate_proj": (shared, h), "up_proj": (shared, h), "down_proj": (h, shared)}.items():
        out += linear(f"{p}.mlp.shared_experts.{proj}", o, n, other_mode)
    for e in range(experts):
        for proj, (o, n) in {"gate_proj": (width, h), "up_proj": (width, h), "down_proj": (h, width)}.items():
            out += linear(f"{p}.mlp.experts.{e}.{proj}", o, n, expert_mode)
    return out


def deepseek_checkpoint(cfg: dict[str, Any], prefix: str, expert_mode: str, other_mode: str) -> list[Tensor]:
    h, vocab, n = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    out = plain(f"{prefix}.embed_tokens.weight", [vocab, h]) + plain(f"{prefix}.norm.weight", [h])
    head = prefix.rsplit(".", 1)[0] + ".lm_head.weight" if "." in prefix else "lm_head.weight"
    out += plain(head, [vocab, h])
    for i in range(n):
        out += deepseek_layer(prefix, cfg, i, expert_mode, other_mode)
    for i in range(n, n + cfg.get("num_nextn_predict_layers", 0)):
        # DeepSeek-V3's MTP module: a full layer plus its own norms, projection and copies of embed/head.
        out += deepseek_layer(prefix, cfg, i, expert_mode, other_mode)
        p = f"{prefix}.layers.{i}"
        out += (
            plain(f"{p}.enorm.weight", [h])
            + plain(f"{p}.hnorm.weight", [h])
            + plain(f"{p}.shared_head.norm.weight", [h])
        )
        out += linear(f"{p}.eh_proj", h, 2 * h, other_mode)
        out += plain(f"{p}.embed_tokens.weight", [vocab, h]) + plain(
            f"{p}.shared_head.head.weight", [vocab, h]
        )
    return out


def template(name: str) -> str:
    return ".".join("#" if part.isdigit() else part for part in name.split("."))


def summarise(tensors: list[Tensor], shards: int) -> dict[str, Any]:
    """The probe's summary: contiguous runs of tensors per shard, grouped by template/dtype/shape."""
    per_shard = -(-len(tensors) // shards)
    out = []
    for s in range(shards):
        chunk = tensors[s * per_shard : (s + 1) * per_shard]
        groups: dict[tuple[str, str, tuple[int, ...]], dict[str, Any]] = {}
        layer_ids: dict[tuple[str, str, tuple[int, ...]], set[int]] = defaultdict(set)
        for name, dtype, shape, _ in chunk:
            key = (template(name), dtype, tuple(shape))
            group = groups.setdefault(
                key, {"template": key[0], "dtype": dtype, "shape": list(shape), "count": 0}
            )
            group["count"] += 1
            digits = [part for part in name.split(".") if part.isdigit()]
            if digits:
                layer_ids[key].add(int(digits[0]))
        for key, group in groups.items():
            group["layer_ids"] = sorted(layer_ids[key])
        name = f"model-{s + 1:05d}-of-{shards:06d}.safetensors"
        out.append(
            {
                "file": name,
                "size": 0,
                "header_len": 0,
                "bytes_read": 0,
                "tensors": len(chunk),
                "metadata": None,
                "error": None,
                "groups": list(groups.values()),
            }
        )
    return {"index": None, "shards": out, "bytes_read": 0}


def logical(tensors: list[Tensor]) -> int:
    return sum(count for *_, count in tensors)


def real_config(folder: str) -> dict[str, Any]:
    return json.loads((REAL / folder / "config.json").read_text())


@pytest.fixture(scope="module")
def kimi_k25() -> tuple[dict[str, Any], list[Tensor], dict[str, Any]]:
    config = real_config("kimi-k2.5")
    tensors = deepseek_checkpoint(config["text_config"], "language_model.model", "int4", "bf16")
    # A few vision tensors, so the tower is told apart from the text model.
    tensors += plain("vision_tower.encoder.blocks.0.wqkv.weight", [3456, 1152]) + plain(
        "mm_projector.proj.0.weight", [4608, 4608]
    )
    return config, tensors, summarise(tensors, 64)


def test_kimi_k25_int4_exact_logical_count(
    kimi_k25: tuple[dict[str, Any], list[Tensor], dict[str, Any]],
) -> None:
    config, tensors, summary = kimi_k25
    result = count_safetensors(summary, quantization("compressed-tensors", 4), num_layers=61)
    assert result is not None
    assert result.total == logical(tensors)
    assert result.shards == 64 and result.tensors == len(tensors)
    assert result.vision == 3456 * 1152 + 4608 * 4608
    assert result.mtp == 0
    # Summing header elements naively gives the ~170.7 B the model-card reports quote (packed, with scales).
    naive = sum(_prod(shape) for _, _, shape, _ in tensors)
    assert result.stored_elements == naive
    assert naive == pytest.approx(170.7e9 - 0.47e9, rel=0.01)
    assert (result.by_dtype or {})["INT4"] == 60 * 384 * 3 * 7168 * 2048
    assert result.text == pytest.approx(1.0264e12, rel=1e-3)


def test_kimi_k25_profile_uses_the_headers(
    kimi_k25: tuple[dict[str, Any], list[Tensor], dict[str, Any]],
) -> None:
    config, tensors, summary = kimi_k25
    arch, findings = analyze_architecture(config, safetensors=summary)
    params = arch["params"]
    assert params["source"] == "safetensors"
    assert params["total"] == logical(tensors)
    assert not [f for f in findings if f["code"] == "params-mismatch"], findings
    text_estimate = params["config_estimate"]["total"] - params["vision"]
    assert params["safetensors"]["text"] == pytest.approx(text_estimate, rel=1e-6)


def test_missing_shards_raise_a_mismatch() -> None:
    config = real_config("kimi-k2-instruct") | {"num_hidden_layers": 61}
    tensors = deepseek_checkpoint(config, "model", "fp8", "fp8")
    summary = summarise(tensors, 8)
    summary["shards"] = summary["shards"][:6]  # two shards' worth of experts missing
    arch, findings = analyze_architecture(config, safetensors=summary)
    # The total is off, and the per-layer check names the layers whose experts are missing.
    warnings = [f for f in findings if f["severity"] == "warning"]
    assert warnings[0]["code"] == "params-mismatch"
    layer_warnings = warnings[1:]
    assert layer_warnings and all(f["code"] == "weights-layer-mismatch" and "lack" in f["message"]
                                  for f in layer_warnings)


def test_fp8_block_checkpoint_with_mtp_layer() -> None:
    case = json.loads((FAMILIES / "deepseek-v3.json").read_text())
    config = case["config"]
    tensors = deepseek_checkpoint(config, "model", "fp8", "fp8")
    summary = summarise(tensors, 163)
    result = count_safetensors(summary, quantization("fp8", 8), num_layers=61)
    assert result is not None
    assert result.total == logical(tensors)
    assert (result.excluded_elements or 0) > 0  # the weight_scale_inv tensors
    mtp_tensors = [t for t in tensors if re.match(r"model\.layers\.61\.", t[0])]
    assert result.mtp == logical(mtp_tensors)

    arch, findings = analyze_architecture(config, safetensors=summary)
    assert not [f for f in findings if f["code"] == "params-mismatch"], findings
    assert arch["params"]["total"] == pytest.approx(671e9, rel=0.01)
    # The published MTP module is 11.5B plus the embedding and head copies it stores (0.93B each).
    assert arch["mtp"]["safetensors"] == pytest.approx(11.5e9 + 2 * 129280 * 7168, rel=0.02)


def test_gptq_checkpoint() -> None:
    config = real_config("llama-3.1-8b")
    h, inter, vocab, kv = config["hidden_size"], config["intermediate_size"], config["vocab_size"], 8 * 128
    tensors = plain("model.embed_tokens.weight", [vocab, h], "F16") + plain(
        "lm_head.weight", [vocab, h], "F16"
    )
    tensors += plain("model.norm.weight", [h], "F16")
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}"
        tensors += plain(f"{p}.input_layernorm.weight", [h], "F16") + plain(
            f"{p}.post_attention_layernorm.weight", [h], "F16"
        )
        for proj, (o, n) in {
            "q_proj": (h, h),
            "k_proj": (kv, h),
            "v_proj": (kv, h),
            "o_proj": (h, h),
        }.items():
            tensors += linear(f"{p}.self_attn.{proj}", o, n, "gptq")
        for proj, (o, n) in {"gate_proj": (inter, h), "up_proj": (inter, h), "down_proj": (h, inter)}.items():
            tensors += linear(f"{p}.mlp.{proj}", o, n, "gptq")
    summary = summarise(tensors, 2)
    config["quantization_config"] = {
        "quant_method": "gptq",
        "bits": 4,
        "group_size": 128,
        "sym": True,
        "desc_act": True,
    }
    arch, findings = analyze_architecture(config, safetensors=summary)
    sf = arch["params"]["safetensors"]
    assert sf["total"] == logical(tensors)
    assert sf["by_dtype"]["INT4"] == logical([t for t in tensors if t[0].endswith(".qweight")])
    assert sf["total"] == arch["params"]["config_estimate"]["total"]  # Llama has no biases: exact
    assert arch["quantization"]["method"] == "gptq" and arch["quantization"]["bits"] == 4
    assert not findings


def test_mxfp4_gpt_oss_checkpoint() -> None:
    config = real_config("gpt-oss-20b")
    h, vocab, experts, width = config["hidden_size"], config["vocab_size"], 32, config["intermediate_size"]
    q, kv = 64 * 64, 8 * 64
    tensors = (
        plain("model.embed_tokens.weight", [vocab, h])
        + plain("lm_head.weight", [vocab, h])
        + plain("model.norm.weight", [h])
    )
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}"
        tensors += plain(f"{p}.input_layernorm.weight", [h]) + plain(
            f"{p}.post_attention_layernorm.weight", [h]
        )
        for proj, (o, n) in {
            "q_proj": (q, h),
            "k_proj": (kv, h),
            "v_proj": (kv, h),
            "o_proj": (h, q),
        }.items():
            tensors += plain(f"{p}.self_attn.{proj}.weight", [o, n]) + plain(
                f"{p}.self_attn.{proj}.bias", [o]
            )
        tensors += plain(f"{p}.self_attn.sinks", [64])
        tensors += plain(f"{p}.mlp.router.weight", [experts, h]) + plain(f"{p}.mlp.router.bias", [experts])
        # Two e2m1 values per byte, one e8m0 scale per 32 values (16 bytes).
        tensors += [
            (
                f"{p}.mlp.experts.gate_up_proj_blocks",
                "U8",
                [experts, 2 * width, h // 32, 16],
                experts * 2 * width * h,
            )
        ]
        tensors += [(f"{p}.mlp.experts.gate_up_proj_scales", "U8", [experts, 2 * width, h // 32], 0)]
        tensors += plain(f"{p}.mlp.experts.gate_up_proj_bias", [experts, 2 * width])
        tensors += [
            (f"{p}.mlp.experts.down_proj_blocks", "U8", [experts, h, width // 32, 16], experts * h * width)
        ]
        tensors += [(f"{p}.mlp.experts.down_proj_scales", "U8", [experts, h, width // 32], 0)]
        tensors += plain(f"{p}.mlp.experts.down_proj_bias", [experts, h])
    arch, findings = analyze_architecture(config, safetensors=summarise(tensors, 3))
    sf = arch["params"]["safetensors"]
    assert sf["total"] == logical(tensors)
    assert sf["by_dtype"]["MXFP4"] == 24 * experts * 3 * width * h
    assert not [f for f in findings if f["code"] == "params-mismatch"], findings
    assert arch["params"]["total"] == pytest.approx(21e9, rel=0.03)


@pytest.mark.parametrize(
    "summary",
    [
        None,
        7,
        "x",
        {},
        {"shards": None},
        {"shards": [None, 3, {"error": {"type": "x"}}]},
        {"shards": [{"groups": [None, {"template": 3}]}]},
    ],
)
def test_garbage_summaries(summary: Any) -> None:
    result = count_safetensors(summary)
    assert result is None or result.total == 0
