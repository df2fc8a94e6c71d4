"""The worked examples of docs/plan.md, recomputed by hand from the real configs.

Each number the page shows is worked out here from config.json values (tests/data/realconfigs) and the
engines' rules, independently of the code under test; then the test checks that the page shows it and that
``introspect plan --json`` (run in-process) gives the same. The checkpoints' stored bytes are computed
from the configs' shapes, split as the engines shard them (plan_weights.py), and put in the profile the
way a probe of the safetensors headers would.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from introspect.analysis.profile import build_profile
from introspect.cli.main import cli
from tests.golden.cases import DATA, config_raw

# The page's words with its line breaks and indents folded to single spaces.
DOCS = " ".join((Path(__file__).resolve().parents[2] / "docs" / "plan.md").read_text(encoding="utf-8").split())
H200 = 143_771 * 2**20  # nvidia-smi's memory.total of an H200, what --gpu H200 takes
USABLE = int(H200 * 0.9)  # the default memory fraction


def _config(name: str) -> dict[str, Any]:
    return json.loads((DATA / "realconfigs" / name / "config.json").read_text())


def _fp8(rows: int, cols: int) -> int:
    """Block FP8: one byte an element plus an F32 scale per 128 x 128 block."""
    return rows * cols + math.ceil(rows / 128) * math.ceil(cols / 128) * 4


def _gib(value: int) -> str:
    return f"{value / 2**30:.1f} GiB"


def _shown(*values: int | str) -> None:
    """Every value appears on the page, integers with thousands separators as the page writes them."""
    missing = [v for v in values if (f"{v:,}" if isinstance(v, int) else v) not in DOCS]
    assert not missing, f"docs/plan.md does not show {missing}"


def _profile(tmp: Path, name: str, weights: dict[str, int]) -> Path:
    profile = build_profile(config_raw(name, _config(name)))
    profile["plan"]["weights"] = {"source": "safetensors headers (stored bytes)", "total_bytes": sum(weights.values()),
                                  "bytes": weights, "shards": 1, "shards_failed": 0}
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(profile))
    return path


def _plan(profile: Path, *args: str) -> tuple[int, dict[str, Any], dict[str, dict[str, Any]]]:
    result = CliRunner().invoke(cli, ["plan", str(profile), "--gpu", "H200", *args, "--json"], prog_name="introspect")
    plan = json.loads(result.output)
    return result.exit_code, plan, {item["name"]: item for item in plan["layouts"]}


def _kimi_weights(c: dict[str, Any]) -> dict[str, int]:
    """Kimi-K2-Instruct's stored bytes by how the engines shard them: FP8 matrices, BF16 norms, embedding,
    lm_head and router (its bias F32)."""
    h, layers, moe = c["hidden_size"], c["num_hidden_layers"], c["num_hidden_layers"] - c["first_k_dense_replace"]
    heads, q_lora, kv_lora = c["num_attention_heads"], c["q_lora_rank"], c["kv_lora_rank"]
    nope, rope, v = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    experts, ffn, dense_ffn = c["n_routed_experts"], c["moe_intermediate_size"], c["intermediate_size"]
    attention = _fp8(heads * (nope + rope), q_lora) + _fp8(heads * (nope + v), kv_lora) + _fp8(h, heads * v)
    dense = c["first_k_dense_replace"] * (2 * _fp8(dense_ffn, h) + _fp8(h, dense_ffn))
    shared = c["n_shared_experts"] * 3 * _fp8(ffn, h) * moe
    replicated = (2 * h * 2 + _fp8(q_lora, h) + q_lora * 2 + _fp8(kv_lora + rope, h) + kv_lora * 2) * layers
    embedding = c["vocab_size"] * h * 2
    return {"experts": 3 * _fp8(ffn, h) * experts * moe, "tensor_parallel": attention * layers + dense + shared,
            "replicated": replicated + (experts * h * 2 + experts * 4) * moe, "embedding": embedding,
            "lm_head": embedding, "final": h * 2, "vision": 0, "mtp": 0}


def test_kimi_k2_worked_example(tmp_path: Path) -> None:
    c = _config("kimi-k2-instruct")
    weights = _kimi_weights(c)
    total = sum(weights.values())
    layers = c["num_hidden_layers"]
    sharded = weights["experts"] + weights["tensor_parallel"] + weights["embedding"] + weights["lm_head"]
    tp8 = sharded // 8 + weights["replicated"] + weights["final"]  # the sharded sum divides by 8 exactly
    kv_token = layers * (c["kv_lora_rank"] + c["qk_rope_head_dim"]) * 2
    room = USABLE - tp8
    length = c["max_position_embeddings"]  # yarn: already the scaled length
    request = length * kv_token
    assert sharded % 8 == 0 and request > room
    # TP1 PP8: 61 layers over 8 stages, 8 in the heaviest; its share of the layers and of the token.
    stage = round((weights["experts"] + weights["tensor_parallel"] + weights["replicated"]) * 8 / layers)
    stage_token, stage_room = kv_token * 8 // layers, USABLE - stage
    fp8_token = layers * (c["kv_lora_rank"] + c["qk_rope_head_dim"])
    _shown(total, tp8, _gib(tp8), kv_token, USABLE, room, _gib(room), room // kv_token, request, _gib(request),
           stage, _gib(stage), stage_token, stage_room, stage_room // stage_token, fp8_token, room // fp8_token,
           length * fp8_token, "--max-model-len 83968", f"{layers} x ({c['kv_lora_rank']} + {c['qk_rope_head_dim']}) x 2 B")
    assert (room // kv_token) // 1024 * 1024 == 83968

    code, plan, by_name = _plan(_profile(tmp_path, "kimi-k2-instruct", weights), "--gpus", "8")
    assert by_name["TP8"]["weight_bytes_per_gpu"] == tp8 and by_name["TP8"]["kv_room_bytes_per_gpu"] == room
    assert by_name["TP8"]["kv_bytes_per_token_per_gpu"] == kv_token and plan["kv_bytes_per_token"] == kv_token
    assert by_name["TP8"]["max_context_fits"] == room // kv_token and not by_name["TP8"]["fits"]
    assert by_name["TP8"]["kv_one_request_bytes_per_gpu"] == request and plan["max_model_len"] == length
    pp8 = by_name["TP1 PP8"]
    assert (pp8["weight_bytes_per_gpu"], pp8["kv_room_bytes_per_gpu"]) == (stage, stage_room)
    assert pp8["kv_bytes_per_token_per_gpu"] == stage_token and pp8["kv_tokens_per_gpu"] == stage_room // stage_token
    assert pp8["fits"] and pp8["concurrent_requests"] == 1 and plan["best"] == "TP1 PP8" and code == 0

    _, fp8_plan, fp8_layouts = _plan(tmp_path / "kimi-k2-instruct.json", "--gpus", "8", "--kv-dtype", "fp8")
    assert fp8_layouts["TP8"]["kv_bytes_per_token_per_gpu"] == fp8_token
    assert fp8_layouts["TP8"]["kv_tokens_per_gpu"] == room // fp8_token and fp8_layouts["TP8"]["fits"]
    assert fp8_layouts["TP8"]["kv_one_request_bytes_per_gpu"] == length * fp8_token


def test_kimi_k2_on_two_nodes(tmp_path: Path) -> None:
    c = _config("kimi-k2-instruct")
    weights = _kimi_weights(c)
    layers = c["num_hidden_layers"]
    first = 31  # vLLM get_pp_indices: 61 over 2 gives the extra layer to the first stage
    per_layer = (weights["experts"] + weights["tensor_parallel"]) / 8 + weights["replicated"]
    stage = round(per_layer * first / layers + weights["embedding"] / 8)
    kv_token = layers * (c["kv_lora_rank"] + c["qk_rope_head_dim"]) * 2
    stage_token = -(-kv_token * first // layers)
    stage_room = USABLE - stage
    tokens = stage_room // stage_token
    requests = stage_room // (c["max_position_embeddings"] * stage_token)
    tp16 = (weights["experts"] + weights["tensor_parallel"] + weights["embedding"] + weights["lm_head"]) // 16 \
        + weights["replicated"] + weights["final"]
    tp16_room = USABLE - tp16
    tp16_tokens, tp16_requests = tp16_room // kv_token, tp16_room // (c["max_position_embeddings"] * kv_token)
    _shown(stage, _gib(stage), stage_token, stage_room, tokens, tp16_tokens, "31 + 30",
           f"{tokens:,} tokens: {requests} requests", f"TP16 fits too ({tp16_tokens:,} tokens, {tp16_requests} requests)")

    code, plan, by_name = _plan(_profile(tmp_path, "kimi-k2-instruct", weights), "--nodes", "2", "--gpus-per-node", "8")
    pp2 = by_name["TP8 PP2"]
    assert (pp2["weight_bytes_per_gpu"], pp2["kv_bytes_per_token_per_gpu"]) == (stage, stage_token)
    assert (pp2["kv_tokens_per_gpu"], pp2["concurrent_requests"]) == (tokens, requests)
    assert (by_name["TP16"]["kv_tokens_per_gpu"], by_name["TP16"]["concurrent_requests"]) == (tp16_tokens, tp16_requests)
    assert by_name["TP16"]["fits"] and plan["best"] == "TP8 PP2" and code == 0


def _qwen_next_weights(c: dict[str, Any]) -> dict[str, int]:
    """Qwen3-Next-80B-A3B's bf16 bytes by how vLLM's qwen3_next.py shards them: attention (gated q: 2 x heads x
    head_dim), the GDN projections, conv1d, dt_bias and A_log split over TP; norms, the router and the shared
    expert's 1-wide gate whole on every GPU."""
    h, layers, vocab = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"]
    full = layers // c["full_attention_interval"]
    heads, kv_heads, head_dim = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    nk, nv = c["linear_num_key_heads"], c["linear_num_value_heads"]
    dk, dv, kernel = c["linear_key_head_dim"], c["linear_value_head_dim"], c["linear_conv_kernel_dim"]
    experts, ffn, shared = c["num_experts"], c["moe_intermediate_size"], c["shared_expert_intermediate_size"]
    attention = h * heads * head_dim * 2 + 2 * h * kv_heads * head_dim + heads * head_dim * h
    gdn = (h * (2 * nk * dk + 2 * nv * dv) + h * 2 * nv + (2 * nk * dk + nv * dv) * kernel + 2 * nv
           + nv * dv * h)
    replicated = 2 * h * layers + experts * h * layers + h * layers + 2 * head_dim * full + dv * (layers - full)
    return {"experts": 3 * ffn * h * experts * layers * 2,
            "tensor_parallel": (attention * full + gdn * (layers - full) + 3 * shared * h * layers) * 2,
            "replicated": replicated * 2, "embedding": vocab * h * 2, "lm_head": vocab * h * 2, "final": h * 2,
            "vision": 0, "mtp": 0}


def test_qwen3_next_worked_example(tmp_path: Path) -> None:
    c = _config("qwen3-next-80b-a3b-thinking")
    weights = _qwen_next_weights(c)
    layers, full = c["num_hidden_layers"], c["num_hidden_layers"] // c["full_attention_interval"]
    kv_heads, head_dim = c["num_key_value_heads"], c["head_dim"]
    kv_token = full * kv_heads * (head_dim + head_dim) * 2
    kv_gpu = kv_token // kv_heads  # TP2 / TP4: one of the two KV heads a GPU
    nk, nv, dk, dv = (c["linear_num_key_heads"], c["linear_num_value_heads"], c["linear_key_head_dim"],
                      c["linear_value_head_dim"])
    conv = (2 * nk * dk + nv * dv) * (c["linear_conv_kernel_dim"] - 1)
    matrix = nv * dv * dk
    layer_sglang, layer_vllm = conv * 2 + matrix * 4, conv * 2 + matrix * 2
    state = (layers - full) * layer_sglang
    state_vllm = (layers - full) * layer_vllm
    sharded = weights["experts"] + weights["tensor_parallel"] + weights["embedding"] + weights["lm_head"]
    tp2 = sharded // 2 + weights["replicated"] + weights["final"]
    tp4 = sharded // 4 + weights["replicated"] + weights["final"]
    room2, room4 = USABLE - tp2, USABLE - tp4
    length, chosen = c["max_position_embeddings"], 32_768
    full_request = length * kv_gpu + state // 2
    at2, at4 = chosen * kv_gpu + state // 2, chosen * kv_gpu + state // 4
    assert sharded % 4 == 0 and state % 4 == 0
    _shown(sum(weights.values()), kv_token, kv_gpu, conv, matrix, layer_sglang, state, f"{state / 2**20:.1f} MiB",
           state_vllm, state // 2, tp2, _gib(tp2), room2, _gib(room2), full_request, room2 // full_request,
           at2, room2 // at2, tp4, room4, at4, room4 // at4, f"{room2 // kv_gpu:,} (x2")

    code, plan, by_name = _plan(_profile(tmp_path, "qwen3-next-80b-a3b-thinking", weights), "--gpus", "4",
                                "--context-len", str(chosen))
    assert plan["kv_bytes_per_token"] == kv_token and plan["max_model_len"] == length and plan["best"] == "TP2"
    assert f"recurrent layers keep {state} B per sequence" in plan["kv_rule"]
    two, four = by_name["TP2"], by_name["TP4"]
    assert (two["weight_bytes_per_gpu"], two["kv_room_bytes_per_gpu"], two["kv_bytes_per_token_per_gpu"]) == \
        (tp2, room2, kv_gpu)
    assert two["kv_one_request_bytes_per_gpu"] == full_request and two["concurrent_requests"] == room2 // full_request
    assert two["concurrent_requests_at_context_len"] == room2 // at2 and two["replicas"] == 2
    assert two["state_sequences_per_gpu"] == room2 // (state // 2) and two["kv_tokens_per_gpu"] == room2 // kv_gpu
    assert (four["weight_bytes_per_gpu"], four["kv_room_bytes_per_gpu"]) == (tp4, room4)
    assert four["concurrent_requests_at_context_len"] == room4 // at4 and code == 0


@pytest.mark.parametrize("name, by_engine", [("qwen3-next-80b-a3b-thinking", (77_266_944, 39_518_208))])
def test_the_profile_states_both_engines_figures(name: str, by_engine: tuple[int, int]) -> None:
    """The docs' "vLLM keeps it at bf16" figure is the profile's own per-engine entry."""
    kv = build_profile(config_raw(name, _config(name)))["architecture"]["kv_cache"]
    assert kv["state_bytes_per_sequence_by_engine"] == dict(zip(("sglang", "vllm"), by_engine, strict=True))
