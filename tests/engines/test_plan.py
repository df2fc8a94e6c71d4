"""The memory / parallelism plan, checked against numbers worked out by hand.

The Kimi-like checkpoint is tests/fixtures/shards.py ``write_kimi_k25_int4_checkpoint``
(64 sparse shards, the shapes of Kimi-K2.5's INT4 release; config from
tests/data/realconfigs/kimi-k2.5): hidden 7168, vocab 163840, 61 layers (layer 0
dense, FFN 18432), 64 MLA heads (q_lora 1536, kv_lora 512, qk_nope 128, qk_rope 64,
v 128), 384 routed experts of FFN 2048 plus 1 shared, INT4 group 32.
"""

from __future__ import annotations

import json
from pathlib import Path

from introspect.analysis.profile import build_profile
from introspect.analysis.serving.plan import GpuBudget
from introspect.analysis.serving.plan import plan_section as plan_model
from introspect.analysis.serving.plan_context import ContextOptions
from introspect.documents.profile_architecture import Architecture
from introspect.documents.profile_serving import WeightsBytes
from tests.conftest import run_cli
from tests.golden.cases import DATA, config_raw

GIB = 2**30


def weights_of(split: dict[str, int]) -> WeightsBytes:
    """The plan's weights member for a hand-made split (one shard read)."""
    return WeightsBytes(source="safetensors headers (stored bytes)", total_bytes=sum(split.values()), bytes=split,
                        shards=1, shards_failed=0)


def plan_section(arch: dict, weights: dict | None, budget: GpuBudget | None, **options: object) -> dict:
    """The plan as its JSON reads (``weights`` as ``{"bytes": split}``)."""
    member = weights_of(weights["bytes"]) if weights is not None else None
    return plan_model(Architecture.model_validate(arch), member, budget, **options).to_dict()  # type: ignore[arg-type]

# Stored bytes, by hand from the shapes.
# Routed experts: gate/up/down each = packed I32 (2048 x 7168/8 x 4 B = 7,340,032)
#   + scale BF16 (2048 x 7168/32 x 2 B = 917,504) + shape I32 (2 x 4 B = 8) = 8,257,544 B
#   (down: 7168 x 2048/8 x 4 and 7168 x 2048/32 x 2: the same sizes).
EXPERTS = 3 * (7_340_032 + 917_504 + 8) * 384 * 60
# Sharded over TP: attention q_b (64*192 x 1536) + kv_b (64*256 x 512) + o (7168 x 64*128), BF16, 61 layers;
# dense MLP of layer 0 (3 x 18432 x 7168); shared expert of 60 layers (3 x 2048 x 7168).
ATTENTION_TP = (64 * 192 * 1536 + 64 * 256 * 512 + 7168 * 64 * 128) * 2 * 61
TENSOR_PARALLEL = ATTENTION_TP + 3 * 18432 * 7168 * 2 + 3 * 2048 * 7168 * 2 * 60
# Whole on every GPU: 2 norms (7168), q_a (1536 x 7168), q_a norm (1536), kv_a (576 x 7168), kv_a norm (512)
# in 61 layers; router (384 x 7168 BF16) and its bias (384 F32) in 60.
REPLICATED = (2 * 7168 + 1536 * 7168 + 1536 + 576 * 7168 + 512) * 2 * 61 + (384 * 7168 * 2 + 384 * 4) * 60
EMBEDDING = LM_HEAD = 163840 * 7168 * 2
FINAL = 7168 * 2
KV_PER_TOKEN = (512 + 64) * 2 * 61  # MLA latent + rope key, BF16, every layer: 70,272 B


def per_gpu(tp: int) -> int:
    return round((EXPERTS + TENSOR_PARALLEL) / tp + REPLICATED + (EMBEDDING + LM_HEAD) / tp + FINAL)


def _plan(profile: Path, *args: str) -> dict:
    result = run_cli("plan", str(profile), *args, "--json")
    assert result.code in (0, 1), result.stderr
    return result.json()


def test_hand_computed_weight_split(kimi_profile: Path) -> None:
    weights = json.loads(kimi_profile.read_text())["plan"]["weights"]
    assert EXPERTS == 570_761_441_280 and TENSOR_PARALLEL == 16_567_500_800 and REPLICATED == 2_179_328_000
    assert weights["bytes"] == {"experts": EXPERTS, "tensor_parallel": TENSOR_PARALLEL, "replicated": REPLICATED,
                                "embedding": EMBEDDING, "lm_head": LM_HEAD, "final": FINAL, "vision": 0, "mtp": 0}
    assert weights["shards"] == 64
    # The exact header bytes add up to the index's total_size.
    assert weights["total_bytes"] == EXPERTS + TENSOR_PARALLEL + REPLICATED + EMBEDDING + LM_HEAD + FINAL


def test_eight_gpus_of_96_gib(kimi_profile: Path) -> None:
    plan = _plan(kimi_profile, "--gpus", "8", "--gpu-mem", "96GiB")
    layouts = {item["name"]: item for item in plan["layouts"]}
    # MoE: an EP variant per TP > 1; 61 layers split unevenly over PP as vLLM's get_pp_indices does.
    assert list(layouts)[:7] == ["TP1", "TP2", "TP2 EP2", "TP4", "TP4 EP4", "TP8", "TP8 EP8"]
    assert "TP4 EP4 PP2" in layouts and "TP1 PP8" in layouts and "TP8 PP2" not in layouts  # 16 GPUs > 8
    usable = int(96 * GIB * 0.9)  # 92,771,293,593 B
    tp8 = layouts["TP8 EP8"]
    assert tp8["weight_bytes_per_gpu"] == per_gpu(8) == 76_182_662_656
    assert tp8["usable_bytes_per_gpu"] == usable
    assert tp8["kv_room_bytes_per_gpu"] == usable - per_gpu(8) == 16_588_630_937
    assert tp8["kv_bytes_per_token_per_gpu"] == KV_PER_TOKEN == 70_272  # MLA: whole latent on every rank
    assert tp8["kv_tokens_per_gpu"] == (usable - per_gpu(8)) // KV_PER_TOKEN == 236_063
    assert tp8["kv_tokens_total"] == 236_063 and tp8["replicas"] == 1
    assert tp8["max_context_sequences"] == 0  # fewer tokens than one 262,144-token context
    # So no layout fits: vLLM refuses to start when one max_model_len request does not fit
    # (kv_cache_planning.py check_enough_kv_cache_memory; tests/engines/test_plan_context.py).
    assert not tp8["fits"] and not layouts["TP8"]["fits"] and tp8["max_context_fits"] == 236_063
    tp4 = layouts["TP4 EP4"]
    assert tp4["weight_bytes_per_gpu"] == per_gpu(4) == 150_185_982_976 and not tp4["fits"]
    assert tp4["reasons"] == ["weights 139.9 GiB per GPU > usable 86.4 GiB (0.9 x 96.0 GiB)"]
    # PP 8 holds it: 61 layers split 7+7+8+8+8+8+8+7; an 8-layer stage holds 8/61 of the layers
    # (589,508,270,080 B x 8/61 = 77,312,560,010 B) and the least room per layer it caches, with
    # 70,272 x 8/61 = 9,216 B of every token: (92,771,293,593 - 77,312,560,010) // 9,216 = 1,677,379.
    pp8 = layouts["TP1 PP8"]
    assert pp8["weight_bytes_per_gpu"] == round((EXPERTS + TENSOR_PARALLEL + REPLICATED) * 8 / 61)
    assert pp8["kv_bytes_per_token_per_gpu"] == 9_216 and pp8["kv_tokens_per_gpu"] == 1_677_379
    assert pp8["fits"] and layouts["TP4 PP2"]["fits"]
    assert plan["best"] == "TP4 PP2"  # of the layouts that fit, the fewest pipeline stages (the most TP)
    checks = {c["check"]: c for c in tp8["checks"]}
    assert checks["attention heads % TP"]["ok"] and checks["experts % EP"]["detail"] == "384 experts over EP 8"
    tp8_checks = {c["check"]: c for c in layouts["TP8"]["checks"]}
    assert tp8_checks["expert FFN size % TP"]["detail"] == "2048 over TP 8 = 256, quantization group 32"


def test_eight_gpus_of_141_gib_and_a_lower_fraction(kimi_profile: Path) -> None:
    plan = _plan(kimi_profile, "--gpus", "8", "--gpu-mem", "141GiB")
    layouts = {item["name"]: item for item in plan["layouts"]}
    usable = int(141 * GIB * 0.9)  # 136,257,837,465 B
    assert layouts["TP8"]["kv_tokens_per_gpu"] == (usable - per_gpu(8)) // KV_PER_TOKEN == 854_894
    assert layouts["TP8"]["max_context_sequences"] == 854_894 // 262_144 == 3
    assert per_gpu(4) > usable and not layouts["TP4"]["fits"]  # 150.19 GB of weights > 136.26 GB usable
    low = _plan(kimi_profile, "--gpus", "8", "--gpu-mem", "141GiB", "--mem-fraction", "0.6")
    tp8 = {item["name"]: item for item in low["layouts"]}["TP8"]
    assert tp8["kv_tokens_per_gpu"] == (int(141 * GIB * 0.6) - per_gpu(8)) // KV_PER_TOKEN == 208_559


def test_too_small_gpus_exit_1_with_the_reason(kimi_profile: Path) -> None:
    result = run_cli("plan", str(kimi_profile), "--gpus", "4", "--gpu-mem", "80GiB")
    assert result.code == 1
    assert "error: no candidate layout fits on these GPUs" in result.stderr and "fix: " in result.stderr
    assert "TP4" in result.stdout and "Traceback" not in result.stderr


def _qwen_arch() -> dict:
    config = json.loads((DATA / "families" / "qwen2.5-7b.json").read_text())["config"]
    return build_profile(config_raw("qwen2.5-7b", config))["architecture"]


def test_gqa_heads_split_pp_and_divisibility() -> None:
    """Qwen2.5-7B (tests/data/families/qwen2.5-7b.json): 28 heads, 4 KV heads of 128, 28 layers, BF16."""
    arch = _qwen_arch()
    weights = {"bytes": {"tensor_parallel": 12 * GIB, "replicated": 0, "embedding": GIB, "lm_head": GIB,
                         "final": 0, "vision": 0, "experts": 0}}
    plan = plan_section(arch, weights, GpuBudget(count=8, memory_bytes=24 * GIB))
    layouts = {item["name"]: item for item in plan["layouts"]}
    assert "TP2 PP4" in layouts and "TP4 PP2" in layouts
    # 28 layers over PP 8: 3 each and the 4 left over to the stages before the last (vLLM get_pp_indices).
    pp8 = {c["check"]: c for c in layouts["TP1 PP8"]["checks"]}["layers over PP"]
    assert pp8["ok"] and pp8["detail"] == "28 layers over PP 8: 3 + 3 + 3 + 4 + 4 + 4 + 4 + 3 (vLLM splits unevenly)"
    # The heaviest stage has 4 of 28 layers (12 GiB x 4/28) plus no end: 1.714 GiB; the first
    # (3 layers + embedding 1 GiB) = 12 GiB x 3/28 + 1 GiB = 2.286 GiB is heavier still.
    assert layouts["TP1 PP8"]["weight_bytes_per_gpu"] == round(12 * GIB * 3 / 28 + GIB)
    per_token = 2 * 4 * 128 * 2 * 28  # K and V, 4 heads of 128, BF16, 28 layers = 57,344 B
    assert arch["kv_cache"]["bytes_per_token"] == per_token
    assert layouts["TP2"]["kv_bytes_per_token_per_gpu"] == per_token // 2
    assert layouts["TP8"]["kv_bytes_per_token_per_gpu"] == per_token // 4  # 4 KV heads: one each, replicated
    assert layouts["TP2 PP4"]["kv_bytes_per_token_per_gpu"] == per_token // 2 // 4
    # PP: (12 GiB / 2) / 4 per stage, plus the heavier end (embedding or lm_head, 1 GiB / 2).
    assert layouts["TP2 PP4"]["weight_bytes_per_gpu"] == round(6 * GIB / 4 + GIB / 2)
    assert not layouts["TP8"]["fits"] and "attention heads % TP: 28 heads over TP 8" in layouts["TP8"]["reasons"]
    assert layouts["TP4"]["fits"] and not any(c["check"] == "experts % EP" for c in layouts["TP4"]["checks"])
    assert layouts["TP1"]["replicas"] == 8 and layouts["TP1"]["kv_tokens_total"] == 8 * layouts["TP1"]["kv_tokens_per_gpu"]
    assert plan["best"] == "TP1"


def test_experts_not_divisible_by_ep() -> None:
    arch = _qwen_arch()
    arch["moe"] = dict(arch["moe"], is_moe=True, routed_experts=60, moe_intermediate_size=1408)
    weights = {"bytes": {"experts": 8 * GIB, "tensor_parallel": GIB}}
    plan = plan_section(arch, weights, GpuBudget(count=8, memory_bytes=80 * GIB))
    layouts = {item["name"]: item for item in plan["layouts"]}
    assert layouts["TP4 EP4"]["fits"]
    assert "experts % EP: 60 experts over EP 8" in layouts["TP8 EP8"]["reasons"]
    assert "expert FFN size % TP: 1408 over TP 8 = 176" not in layouts["TP8"]["reasons"]  # 1408 = 8 x 176


def test_no_weights_or_no_gpus_say_why() -> None:
    arch = _qwen_arch()
    assert "weight bytes are unknown" in plan_section(arch, None, GpuBudget(8, 80 * GIB))["reason"]
    assert "--gpus N --gpu-mem SIZE" in plan_section(arch, {"bytes": {}}, None)["reason"]


def _family_arch(name: str) -> dict:
    config = json.loads((DATA / "families" / f"{name}.json").read_text())["config"]
    return build_profile(config_raw(name, config))["architecture"]


def test_hybrid_layers_use_the_profiles_kv_and_state_rules() -> None:
    """Qwen3.5-397B-A17B (tests/data/families/qwen3.5-397b-a17b.json): linear-attention (GDN) layers
    keep a fixed state per sequence; only its full-attention layers grow with tokens."""
    arch = _family_arch("qwen3.5-397b-a17b")
    kv = arch["kv_cache"]
    assert kv["state_bytes_per_sequence"] > 0 and kv["bytes_per_token"] == kv["per_kind"]["full_attention"]["bytes_per_token"]
    plan = plan_section(arch, {"bytes": {"experts": 700 * GIB, "tensor_parallel": 40 * GIB}},
                        GpuBudget(count=8, memory_bytes=141 * GIB))
    tp8 = {item["name"]: item for item in plan["layouts"]}["TP8 EP8"]
    room = tp8["kv_room_bytes_per_gpu"]
    # The state splits over TP with the GDN heads (vLLM gated_delta_net_state_shape divides the value heads
    # and conv channels by the TP size): one GPU of TP8 keeps an eighth of each sequence's state.
    assert tp8["state_sequences_per_gpu"] == room // -(-kv["state_bytes_per_sequence"] // 8)
    assert "recurrent layers keep" in plan["kv_rule"] and "the larger of SGLang's and vLLM's" in plan["kv_rule"]
    # Named, an engine's own state dtypes price it: vLLM keeps this config's GDN state at bf16 (no
    # mamba_ssm_dtype in it), SGLang its recurrent matrix at fp32 (architecture/state_dtypes.py).
    by_engine = kv["state_bytes_per_sequence_by_engine"]
    assert by_engine["sglang"] == kv["state_bytes_per_sequence"] > by_engine["vllm"]
    vllm = plan_section(arch, {"bytes": {"experts": 700 * GIB, "tensor_parallel": 40 * GIB}},
                        GpuBudget(count=8, memory_bytes=141 * GIB), context=ContextOptions(engine="vllm"))
    tp8 = {item["name"]: item for item in vllm["layouts"]}["TP8 EP8"]
    assert tp8["state_sequences_per_gpu"] == room // -(-by_engine["vllm"] // 8) and "vllm's state" in vllm["kv_rule"]


def test_sliding_layers_are_named_in_the_rule() -> None:
    arch = _family_arch("gemma-2-9b")
    assert arch["kv_cache"]["sliding_window_cap"] == 4096
    plan = plan_section(arch, {"bytes": {"tensor_parallel": 18 * GIB}}, GpuBudget(count=1, memory_bytes=80 * GIB))
    assert "stop growing past 4096 tokens" in plan["kv_rule"]
    # config.json says float32; the engines serve (and cache) it at bfloat16 (plan_context.py).
    assert arch["kv_cache"]["bytes_per_element"] == 4
    assert plan["layouts"][0]["kv_bytes_per_token_per_gpu"] == arch["kv_cache"]["bytes_per_token"] // 2


def test_probed_gpus_give_the_profile_its_plan(tmp_path: Path) -> None:
    """Raw facts of the 8-shard Kimi-like probe (tests/data/golden/raw) plus eight H200s from nvidia-smi."""
    from introspect.remote.facts.host.gpus import parse_query_csv
    from tests.engines.nvidia_smi_outputs import H200_CSV
    from tests.golden.cases import GOLDEN

    raw = json.loads((GOLDEN / "raw" / "kimi-k25-int4-8shards.json").read_text())
    raw["gpus"] = {"available": True, "count": 8, "devices": parse_query_csv(H200_CSV), "driver_version": "560.35.03",
                   "cuda_version": "12.6", "topology": None, "error": None}
    profile = build_profile(raw)
    plan = profile["plan"]
    assert plan["gpus"] == {"count": 8, "memory_bytes": 143771 * 2**20, "name": "NVIDIA H200", "source": "nvidia-smi"}
    tp8 = {item["name"]: item for item in plan["layouts"]}["TP8"]
    usable = int(143771 * 2**20 * 0.9)
    assert tp8["weight_bytes_per_gpu"] == per_gpu(8)  # 8 shards or 64: the same stored bytes
    assert tp8["kv_tokens_per_gpu"] == (usable - per_gpu(8)) // KV_PER_TOKEN
    saved = tmp_path / "profile.json"
    saved.write_text(json.dumps(profile))
    assert _plan(saved)["layouts"] == plan["layouts"]  # no flags: the probed GPUs
