"""The plan's context rule: a layout fits only when one request of max_model_len fits beside the weights.

The model is Kimi-K2-Instruct (tests/data/golden/profiles/real-kimi-k2-instruct.json: 61 layers,
layer 0 dense with FFN 18432, 384 routed experts of FFN 2048 + 1 shared, MLA with q_lora 1536,
kv_lora 512, qk_nope 128, qk_rope 64, v 128, 64 heads, vocab 163840, hidden 7168,
max_position_embeddings 131072 with yarn RoPE, block FP8 128 x 128), its stored bytes computed
by hand below: every linear layer of a decoder layer is FP8 (1 byte an element) plus an F32
``weight_scale_inv`` of ceil(rows/128) x ceil(cols/128); embedding, lm_head, norms and the router
are BF16 (the bias F32). That is 1,029,173,249,888 B, the ~1 TB of the published checkpoint.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from introspect.analysis.serving.plan import GpuBudget
from introspect.analysis.serving.plan_context import ContextOptions, rope_default
from introspect.analysis.serving.plan_stages import pp_partition
from tests.conftest import run_cli
from tests.golden.cases import GOLDEN

H, LAYERS = 7168, 61
H200 = 143771 * 2**20  # nvidia-smi's memory.total of an H200 (--gpu H200): 150,754,820,096 B


def fp8(rows: int, cols: int) -> int:
    return rows * cols + math.ceil(rows / 128) * math.ceil(cols / 128) * 4


# One expert: gate and up (2048 x 7168) and down (7168 x 2048): 3 x (14,680,064 + 16 x 56 x 4) = 44,050,944 B.
EXPERTS = 3 * fp8(2048, H) * 384 * 60  # 1,014,933,749,760 B
# Sharded over TP: q_b (64*192 x 1536), kv_b (64*256 x 512), o (7168 x 64*128) in 61 layers; the dense
# MLP of layer 0 (3 x 18432 x 7168); the shared expert of 60 layers (3 x 2048 x 7168).
TENSOR_PARALLEL = ((fp8(64 * 192, 1536) + fp8(64 * 256, 512) + fp8(H, 64 * 128)) * LAYERS
                   + 2 * fp8(18432, H) + fp8(H, 18432) + 3 * fp8(2048, H) * 60)
# Whole on every GPU: 2 norms, q_a (FP8 1536 x 7168), q_a norm, kv_a (FP8 576 x 7168), kv_a norm in 61
# layers; router (384 x 7168 BF16) and its F32 bias in 60.
REPLICATED = (2 * H * 2 + fp8(1536, H) + 1536 * 2 + fp8(576, H) + 512 * 2) * LAYERS + (384 * H * 2 + 384 * 4) * 60
EMBEDDING = LM_HEAD = 163840 * H * 2
WEIGHTS = {"experts": EXPERTS, "tensor_parallel": TENSOR_PARALLEL, "replicated": REPLICATED,
           "embedding": EMBEDDING, "lm_head": LM_HEAD, "final": H * 2, "vision": 0, "mtp": 0}
KV_BF16 = (512 + 64) * 2 * LAYERS  # the MLA latent and rope key, 2 bytes, every layer: 70,272 B a token
KV_FP8 = (512 + 64) * LAYERS  # one byte an element: 35,136 B


@pytest.fixture(scope="module")
def k2_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    profile = json.loads((GOLDEN / "profiles" / "real-kimi-k2-instruct.json").read_text())
    profile["plan"]["weights"] = {"source": "safetensors headers (stored bytes)", "total_bytes": sum(WEIGHTS.values()),
                                  "bytes": WEIGHTS, "shards": 61, "shards_failed": 0}
    path = tmp_path_factory.mktemp("k2") / "profile.json"
    path.write_text(json.dumps(profile))
    return path


def _plan(profile: Path, *args: str) -> tuple[int, dict, str]:
    result = run_cli("plan", str(profile), "--gpu", "H200", *args, "--json")
    assert result.code in (0, 1), result.stderr
    return result.code, result.json(), result.stderr


def _layouts(plan: dict) -> dict[str, dict]:
    return {item["name"]: item for item in plan["layouts"]}


def test_hand_computed_fp8_bytes() -> None:
    assert EXPERTS == 1_014_933_749_760 and TENSOR_PARALLEL == 8_285_772_800 and REPLICATED == 1_256_092_512
    assert sum(WEIGHTS.values()) == 1_029_173_249_888


def test_one_tb_fp8_on_eight_h200_does_not_fit_its_context(k2_profile: Path) -> None:
    code, plan, stderr = _plan(k2_profile, "--gpus", "8")
    tp8 = _layouts(plan)["TP8"]
    # Per GPU at TP8: (EXPERTS + TENSOR_PARALLEL + EMBEDDING + LM_HEAD) / 8 + REPLICATED + final norm
    #   = 1,027,917,143,040 / 8 + 1,256,092,512 + 14,336 = 129,745,749,728 B (120.8 GiB).
    assert tp8["weight_bytes_per_gpu"] == 129_745_749_728
    # Usable: int(150,754,820,096 x 0.9) = 135,679,338,086 B; left for KV: 5,933,588,358 B (5.5 GiB).
    assert tp8["kv_room_bytes_per_gpu"] == 135_679_338_086 - 129_745_749_728 == 5_933_588_358
    # One 131,072-token request: 131,072 x 70,272 B = 9,210,691,584 B (8.6 GiB) > 5.5 GiB: vLLM refuses.
    assert tp8["kv_one_request_bytes_per_gpu"] == 131_072 * KV_BF16 == 9_210_691_584
    assert tp8["max_model_len"] == 131_072 and tp8["kv_dtype"] == "bfloat16" and tp8["kv_bytes_per_token"] == KV_BF16
    # The longest context that fits: 5,933,588,358 // 70,272 = 84,437 tokens (the "84k" of the report).
    assert tp8["max_context_fits"] == 84_437 and tp8["concurrent_requests"] == 0
    assert not tp8["fits"] and tp8["reasons"] == [
        "KV for one 131072-token request needs 8.6 GiB, 5.5 GiB left (fix: --max-model-len 83968 or more GPUs)"]
    assert plan["max_model_len_source"] == "max_position_embeddings, yarn RoPE: already the scaled length"
    # Only pipeline parallelism over all 8 GPUs holds it, by a hair: an 8-layer stage keeps 8/61 of the
    # layers (1,024,475,615,072 B x 8/61 = 134,357,457,714 B, 125.1 GiB), leaving 1,321,880,372 B, and
    # caches 70,272 x 8/61 = 9,216 B a token: 143,433 tokens, one 131,072-token request (1.1 GiB).
    pp8 = _layouts(plan)["TP1 PP8"]
    assert pp8["weight_bytes_per_gpu"] == round((EXPERTS + TENSOR_PARALLEL + REPLICATED) * 8 / 61) == 134_357_457_714
    assert pp8["kv_tokens_per_gpu"] == (135_679_338_086 - 134_357_457_714) // 9_216 == 143_433
    assert pp8["fits"] and pp8["concurrent_requests"] == 1 and plan["best"] == "TP1 PP8" and code == 0
    # With 1% less headroom even that is gone: exit 1, the fix the longest context some layout holds.
    code, plan, stderr = _plan(k2_profile, "--gpus", "8", "--mem-fraction", "0.89")
    held = _layouts(plan)[plan["context_fix"]["layout"]]
    assert plan["best"] is None and held["max_context_fits"] == plan["context_fix"]["max_context_fits"] > 0
    assert max(item.get("max_context_fits") or 0 for item in plan["layouts"]) == held["max_context_fits"]
    assert code == 1 and "error: no candidate layout holds the KV of one 131072-token request" in stderr
    fix = plan["context_fix"]["max_model_len"]
    assert fix == plan["context_fix"]["max_context_fits"] // 1024 * 1024
    assert f"fix: introspect plan {k2_profile} --gpus 8 --gpu H200 --mem-fraction 0.89 --max-model-len {fix}" in stderr


def test_a_shorter_context_fits_and_counts_requests(k2_profile: Path) -> None:
    code, plan, _ = _plan(k2_profile, "--gpus", "8", "--max-model-len", "32768", "--context-len", "8192")
    tp8 = _layouts(plan)["TP8"]
    # 32,768 x 70,272 = 2,302,672,896 B a request: 5,933,588,358 // that = 2 at once;
    # 8,192 x 70,272 = 575,668,224 B: 10 at once.
    assert tp8["fits"] and tp8["concurrent_requests"] == 2 and tp8["concurrent_requests_at_context_len"] == 10
    assert plan["best"] == "TP8" and plan["max_model_len_source"] == "--max-model-len" and code == 0


def test_fp8_kv_doubles_the_tokens(k2_profile: Path) -> None:
    code, plan, _ = _plan(k2_profile, "--gpus", "8", "--kv-dtype", "fp8")
    tp8 = _layouts(plan)["TP8"]
    # One byte an element: 35,136 B a token; 5,933,588,358 // 35,136 = 168,874 tokens (2 x 84,437),
    # so one 131,072-token request (4,605,345,792 B) fits, and only one.
    assert tp8["kv_bytes_per_token_per_gpu"] == KV_FP8 and tp8["kv_tokens_per_gpu"] == 168_874
    assert tp8["kv_one_request_bytes_per_gpu"] == 131_072 * KV_FP8 == 4_605_345_792
    assert tp8["fits"] and tp8["concurrent_requests"] == 1 and tp8["max_context_fits"] == 131_072  # capped
    assert plan["kv_dtype"] == "fp8" and plan["best"] == "TP8" and code == 0


def test_two_nodes_prefer_tp_within_a_node(k2_profile: Path) -> None:
    code, plan, _ = _plan(k2_profile, "--nodes", "2", "--gpus-per-node", "8")
    layouts = _layouts(plan)
    assert plan["gpus"]["count"] == 16 and plan["gpus"]["per_node"] == 8
    pp2, tp16 = layouts["TP8 PP2"], layouts["TP16"]
    # TP8 x PP2: 61 layers split 31 + 30 (vLLM get_pp_indices gives the extra layer to the first stage).
    assert pp_partition(61, 2) == [31, 30]
    layers = EXPERTS + TENSOR_PARALLEL
    first = round(layers / 8 * 31 / 61 + REPLICATED * 31 / 61 + EMBEDDING / 8)
    assert pp2["weight_bytes_per_gpu"] == first and pp2["fits"] and pp2["nodes"] == 2 and not pp2["tp_across_nodes"]
    # The first stage (31 layers + embedding) has the least room per layer: 135,679,338,086 - 65,931,544,195
    # = 69,747,793,891 B; it caches 70,272 x 31/61 = 35,712 B a token: 1,953,063 tokens, 14 requests of 131,072.
    assert first == 65_931_544_195 and pp2["kv_bytes_per_token_per_gpu"] == 35_712
    assert pp2["kv_tokens_per_gpu"] == 1_953_063 and pp2["concurrent_requests"] == 14
    assert tp16["fits"] and tp16["tp_across_nodes"]
    assert plan["best"] == "TP8 PP2" and code == 0  # vLLM's guide: TP within a node, PP across nodes


def test_uneven_partition_matches_vllm() -> None:
    # vllm/distributed/utils.py get_pp_indices: 61 // 4 = 15 each, the 1 left over to the stage before the last.
    assert pp_partition(61, 4) == [15, 15, 16, 15]
    assert pp_partition(28, 8) == [3, 3, 3, 4, 4, 4, 4, 3] and pp_partition(32, 4) == [8, 8, 8, 8]


def test_rope_factor_default_follows_vllm() -> None:
    # yarn keeps max_position_embeddings (already the scaled length); linear multiplies it by the factor.
    yarn = {"rope_scaling": {"type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096}}
    assert rope_default(yarn, [], 131072) == (131072, "max_position_embeddings, yarn RoPE: already the scaled length")
    linear = {"text_config": {"rope_scaling": {"rope_type": "linear", "factor": 4.0}}}
    assert rope_default(linear, ["text_config"], 4096) == (16384, "max_position_embeddings 4096 x linear RoPE factor 4")
    assert rope_default({}, [], None)[0] is None
    # LongRoPE (Phi-3-mini-128k): vLLM serves original_max_position_embeddings unless told otherwise.
    phi3 = {"rope_scaling": {"type": "longrope"}, "original_max_position_embeddings": 4096}
    assert rope_default(phi3, [], 131072)[0] == 4096


def test_sliding_window_layers_stop_growing() -> None:
    """Gemma-2-9B: 21 sliding (window 4096) and 21 global layers, 8 KV heads of 256; float32 in config.json,
    served (and cached) at bfloat16: 2 x 8 x 256 x 2 = 8,192 B a layer and token."""
    from tests.engines.test_plan import _family_arch, plan_section

    arch = _family_arch("gemma-2-9b")
    plan = plan_section(arch, {"bytes": {"tensor_parallel": 18 * 2**30}}, GpuBudget(count=1, memory_bytes=80 * 2**30),
                        context=ContextOptions(max_model_len=8192))
    tp1 = plan["layouts"][0]
    # One 8,192-token request: global layers 21 x 8,192 B x 8,192 tokens + sliding 21 x 8,192 B x 4,096 tokens.
    assert tp1["kv_one_request_bytes_per_gpu"] == 21 * 8192 * 8192 + 21 * 8192 * 4096 == 2_113_929_216
    room = int(80 * 2**30 * 0.9) - 18 * 2**30
    assert tp1["concurrent_requests"] == room // 2_113_929_216 and tp1["fits"]
