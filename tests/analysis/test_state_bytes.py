"""Recurrent state, indexer keys and attention sublayers priced as SGLang 0.5.23 and vLLM 0.33.0 keep them.

Every expected figure is worked out here from the config's numbers and the engines' rules
(introspect/analysis/architecture/state_dtypes.py cites them), not read back from the code:

* SGLang: conv window at bf16 (environ.py SGLANG_MAMBA_CONV_DTYPE), recurrent matrix at fp32 unless
  the config's ``mamba_ssm_dtype`` says otherwise (configs/mamba_utils.py ``mamba2_state_dtype``);
* vLLM: both at the model dtype on ``auto`` (layers/mamba/mamba_utils.py ``_mamba_state_dtype``), except
  KDA (fp32 matrix), Nemotron-H (``mamba_ssm_cache_dtype``, fp32 default) and Qwen3.5
  (``mamba_ssm_dtype``) (models/config.py);
* the DeepSeek-V3.2 indexer key: 128 fp8 bytes + one 4-byte scale = 132 B per token and layer in both;
* LongCat-Flash: two MLA attention modules per decoder layer, both cached.

The last test checks that each cited engine line still says what the code relies on (slow: it needs the
engines venv of tests/fixtures/engine_venv.py).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from introspect.analysis.architecture.section import analyze_architecture
from tests.fixtures.engine_venv import engines_venv, venv_or_skip

DATA = Path(__file__).resolve().parents[1] / "data"


def _config(where: str) -> dict[str, Any]:
    path = DATA / where
    data = json.loads(path.read_text())
    return data if path.name == "config.json" else data["config"]


def _kv(config: dict[str, Any]) -> dict[str, Any]:
    arch, _ = analyze_architecture(config, config_path="model/config.json")
    return arch["kv_cache"]


def test_qwen3_next_gated_deltanet_state() -> None:
    """Qwen3-Next-80B-A3B: 36 GDN layers, 16 key heads and 32 value heads of 128, conv kernel 4, bf16."""
    kv = _kv(_config("realconfigs/qwen3-next-80b-a3b-thinking/config.json"))
    conv = (2 * 16 * 128 + 32 * 128) * (4 - 1)  # q, k, v channels x 3 past tokens = 24,576
    matrix = 32 * 128 * 128  # (value heads, v dim, k dim) = 524,288
    entry = kv["per_kind"]["gated_deltanet"]
    assert entry["state_elements_per_layer"] == {"conv": 24_576, "recurrent": 524_288} == {"conv": conv,
                                                                                           "recurrent": matrix}
    sglang, vllm = conv * 2 + matrix * 4, conv * 2 + matrix * 2  # 2,146,304 and 1,097,728 B a layer
    assert entry["state_bytes_per_layer_by_engine"] == {"sglang": sglang, "vllm": vllm}
    assert entry["state_dtypes"] == {"sglang": {"conv": "bfloat16", "recurrent": "float32"},
                                     "vllm": {"conv": "bfloat16", "recurrent": "bfloat16"}}
    # Per sequence, over 36 layers: 77,266,944 B (73.7 MiB) in SGLang, 39,518,208 B in vLLM; the profile's
    # one figure is the larger, what a plan that names no engine must hold.
    assert kv["state_bytes_per_sequence_by_engine"] == {"sglang": 36 * sglang, "vllm": 36 * vllm}
    assert kv["state_bytes_per_sequence"] == 36 * sglang == 77_266_944
    # The bf16 figure of old was the vLLM one: SGLang's is 1.96 x it.
    assert round(36 * sglang / (36 * vllm), 2) == 1.96


def test_qwen3_5_reads_mamba_ssm_dtype() -> None:
    """Qwen3.5 configs may state mamba_ssm_dtype; both engines then follow it (vLLM only for Qwen3.5)."""
    config = _config("families/qwen3.5-397b-a17b.json")
    entry = _kv(config)["per_kind"]["gated_deltanet"]
    conv, matrix = entry["state_elements_per_layer"]["conv"], entry["state_elements_per_layer"]["recurrent"]
    assert entry["state_bytes_per_layer_by_engine"] == {"sglang": conv * 2 + matrix * 4, "vllm": conv * 2 + matrix * 2}
    stated = copy.deepcopy(config)
    stated["text_config"]["mamba_ssm_dtype"] = "float32"
    entry = _kv(stated)["per_kind"]["gated_deltanet"]
    assert entry["state_bytes_per_layer_by_engine"] == {"sglang": conv * 2 + matrix * 4, "vllm": conv * 2 + matrix * 4}
    stated["text_config"]["mamba_ssm_dtype"] = "bfloat16"
    entry = _kv(stated)["per_kind"]["gated_deltanet"]
    assert entry["state_bytes_per_layer_by_engine"] == {"sglang": conv * 2 + matrix * 2, "vllm": conv * 2 + matrix * 2}


def test_kimi_linear_kda_state_is_fp32_in_both() -> None:
    """Kimi-Linear-48B-A3B: KDA with 32 heads of 128, short conv 4, in 20 layers."""
    kv = _kv(_config("realconfigs/kimi-linear-48b-a3b-instruct/config.json"))
    per_layer = 3 * 32 * 128 * 3 * 2 + 32 * 128 * 128 * 4  # q/k/v windows at bf16 + state at fp32 = 2,170,880
    assert kv["per_kind"]["kda"]["state_bytes_per_layer_by_engine"] == {"sglang": per_layer, "vllm": per_layer}
    assert kv["state_bytes_per_sequence"] == 20 * per_layer == 43_417_600


def test_nemotron_h_vllm_defaults_to_fp32() -> None:
    """Nemotron-H-8B: Mamba-2 with 128 heads of 64 (d_inner 8192), 8 groups, d_state 128, conv 4, in 24 layers.
    vLLM's NemotronH hook sets mamba_ssm_cache_dtype to the config's or float32; SGLang's default is float32."""
    config = _config("families/nemotron-h-8b.json")
    conv, matrix = (8192 + 2 * 8 * 128) * 3, 8192 * 128
    per_layer = conv * 2 + matrix * 4  # 61,440 + 4,194,304 = 4,255,744 B
    kv = _kv(config)
    assert kv["per_kind"]["mamba2"]["state_bytes_per_layer_by_engine"] == {"sglang": per_layer, "vllm": per_layer}
    assert kv["state_bytes_per_sequence"] == 24 * per_layer == 102_137_856
    stated = dict(config, mamba_ssm_cache_dtype="bfloat16")  # vLLM reads this key, SGLang does not
    figures = _kv(stated)["per_kind"]["mamba2"]["state_bytes_per_layer_by_engine"]
    assert figures == {"sglang": per_layer, "vllm": conv * 2 + matrix * 2}


def test_float32_mamba_is_served_at_bf16_with_an_fp32_state_in_sglang() -> None:
    """state-spaces/mamba-2.8b-hf says float32: vLLM serves bf16 (its conv and state follow), SGLang keeps
    the conv window at bf16 and the state at fp32. d_inner 5120, d_state 16, conv 4, 64 layers."""
    kv = _kv(_config("families/mamba-2.8b.json"))
    conv, matrix = 5120 * 3, 5120 * 16
    assert kv["per_kind"]["mamba"]["state_bytes_per_layer_by_engine"] == {"sglang": conv * 2 + matrix * 4,
                                                                          "vllm": conv * 2 + matrix * 2}
    assert kv["state_bytes_per_sequence"] == 64 * (conv * 2 + matrix * 4) == 22_937_600


def test_rwkv_stays_at_the_model_dtype() -> None:
    """No engine serves RWKV: its state keeps the model's dtype, with no per-engine figure."""
    kv = _kv(_config("realconfigs/rwkv-4-169m-pile/config.json"))
    entry = kv["per_kind"]["rwkv"]
    assert "state_bytes_per_layer_by_engine" not in entry and "state_bytes_per_sequence_by_engine" not in kv
    assert entry["state_bytes_per_layer"] == 5 * 768 * kv["bytes_per_element"]


def test_deepseek_v32_indexer_key_is_fp8_with_a_scale() -> None:
    """DeepSeek-V3.2-Exp: MLA latent 512 + 64 at bf16, plus the indexer's 128-wide key in fp8 and one fp32
    scale per 128 elements, in 61 layers."""
    kv = _kv(_config("realconfigs/deepseek-v3.2-exp/config.json"))
    per_layer = (512 + 64) * 2 + 128 + 128 // 128 * 4  # 1,152 + 132 = 1,284 B
    assert kv["indexer_bytes_per_token_per_layer"] == 132
    assert kv["per_kind"]["full_attention"]["bytes_per_token_per_layer"] == per_layer == 1_284
    assert kv["bytes_per_token"] == 61 * per_layer == 78_324  # was 61 x 1,408 at 2 bytes an indexer element


def test_longcat_flash_caches_both_attention_sublayers() -> None:
    """LongCat-Flash: 28 decoder layers, each with two MLA modules of kv_lora 512 + rope 64 at bf16."""
    kv = _kv(_config("families/longcat-flash-chat.json"))
    entry = kv["per_kind"]["full_attention"]
    assert entry["layers"] == 28 and entry["attention_sublayers"] == 2
    assert entry["bytes_per_token_per_layer"] == 2 * (512 + 64) * 2 == 2_304
    assert kv["bytes_per_token"] == 28 * 2 * (512 + 64) * 2 == 64_512  # 56 attention layers, as SGLang counts


# (engine, file under the package, line, text the line holds): what state_dtypes.py, mixer_math.py,
# families.py and plan_context.py cite.
CITED = [
    ("sglang", "srt/environ.py", 1628, 'SGLANG_MAMBA_CONV_DTYPE = EnvStr("bfloat16")'),
    ("sglang", "srt/configs/mamba_utils.py", 71, "ssm_dtype = torch.float32"),
    ("sglang", "srt/configs/mamba_utils.py", 80, "config_dtype = config.text_config.mamba_ssm_dtype"),
    ("sglang", "srt/configs/mamba_utils.py", 116, "def mamba_cache_per_req(self) -> int:"),
    ("sglang", "srt/mem_cache/index_key_cache.py", 46,
     "pool.index_head_dim + pool.index_head_dim // pool.quant_block_size * 4"),
    ("sglang", "srt/mem_cache/memory_pool.py", 4793, "self.kv_cache_dim = ("),
    ("sglang", "srt/mem_cache/kv_cache_configurator.py", 3469, "return ("),
    ("sglang", "srt/configs/model_config.py", 1584, "self.num_attention_layers = self.num_hidden_layers * 2"),
    ("vllm", "config/cache.py", 296, 'mamba_cache_dtype: MambaDType = "auto"'),
    ("vllm", "model_executor/layers/mamba/mamba_utils.py", 104,
     "conv_state_dtype = get_kv_cache_torch_dtype(mamba_cache_dtype, model_dtype)"),
    ("vllm", "model_executor/layers/mamba/mamba_utils.py", 106, "temporal_state_dtype = conv_state_dtype"),
    ("vllm", "model_executor/layers/mamba/mamba_utils.py", 141, "recurrent_state_dtype = torch.float32"),
    ("vllm", "model_executor/layers/mamba/mamba_utils.py", 186, "def mamba2_state_shape("),
    ("vllm", "model_executor/models/config.py", 813, 'DEFAULT_MAMBA_SSM_CACHE_DTYPE: "MambaDType" = "float32"'),
    ("vllm", "model_executor/models/config.py", 963, 'getattr(hf_text_config, "mamba_ssm_dtype", None)'),
    ("vllm", "model_executor/models/config.py", 1251, '"NemotronHForCausalLM": NemotronHForCausalLMConfig'),
    ("vllm", "model_executor/models/config.py", 1259, '"Qwen3_5ForCausalLM": Qwen3_5ForCausalLMConfig'),
    ("vllm", "model_executor/models/deepseek_v2.py", 732,
     "head_dim=self.head_dim + self.head_dim // self.quant_block_size * 4"),
    ("vllm", "model_executor/models/longcat_flash.py", 286, "for i in range(2)"),
    ("vllm", "model_executor/models/qwen3_next.py", 197, "self.shared_expert_gate = ReplicatedLinear("),
    ("vllm", "model_executor/layers/attention/mla_attention.py", 480,
     "self.head_size = kv_lora_rank + qk_rope_head_dim"),
    ("vllm", "model_executor/layers/attention/mla_attention.py", 1386, '"fp8_ds_mla": 656'),
    ("vllm", "config/model.py", 2423, "def _resolve_auto_dtype("),
]


@pytest.mark.slow
def test_cited_engine_lines_say_what_the_rules_rely_on() -> None:
    venv = venv_or_skip(engines_venv, "the pinned engines")
    site = next(venv.glob("lib/python*/site-packages"))
    wrong = []
    for engine, file, line, text in CITED:
        lines = (site / engine / file).read_text(encoding="utf-8").splitlines()
        if text not in lines[line - 1]:
            wrong.append(f"{engine}/{file}#L{line}: {lines[line - 1].strip()!r} lacks {text!r}")
    assert not wrong, wrong
