"""Witness 2 over every family case and real config in tests/data: built on the meta device, counted exactly.

All builds run in ONE interpreter of the torch test venv (tests/witnesses/meta_driver.py),
through the model_code task's own build-and-count code. For each case:

- transformers 5.24 builds it, or fails for the documented reason in NOT_BUILT;
- the task's count equals the meta model's ``state_dict`` count, and its components sum to it;
- the witnesses agree (the config rules within 1% of the code), or disagree exactly as DISAGREE
  documents: which quantity, and the two values.

The remote-code cases ride along in the same process: the Kimi-like fixture under
``trust_remote_code=False`` (refused, the reason kept) and a model whose own code needs CUDA at
import (classified ``cuda-only``).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from introspect.analysis.profile import build_profile
from tests.conftest import REPO
from tests.fixtures.engine_venv import venv_or_skip
from tests.fixtures.kimi_model import build_kimi_model
from tests.fixtures.torch_venv import torch_venv
from tests.golden.cases import config_cases

# name -> (cause, why), from transformers 5.24 (models/auto/configuration_auto.py CONFIG_MAPPING).
NOT_BUILT = {
    "family-falcon-40b-refinedweb": ("remote-code-refused", "model_type RefinedWeb names auto_map code "
                                     "(configuration_RW.py) the case does not ship; built only with remote code"),
    "family-falcon-7b-refinedwebmodel": ("remote-code-refused", "model_type RefinedWebModel: as above"),
    "family-mamba2-2.7b-ssm-format": ("unknown-architecture", "state-spaces/mamba_ssm format: no model_type"),
    "family-phi-3-mini-128k": ("exception", "the case keeps a subset of keys: its longrope short_factor "
                               "list has 1 entry where Phi3Config's validator wants head_dim/2 = 48"),
    "family-unknown-family": ("unknown-architecture", "acme_lm is made up: transformers knows no such family"),
    "real-kimi-k2-instruct": ("remote-code-refused", "model_type kimi_k2 exists only in the model's own code"),
    "real-hunyuan-large": ("unknown-architecture", "model_type hunyuan is not in CONFIG_MAPPING (transformers has "
                           "hunyuan_v1_dense/hunyuan_v1_moe); the checkpoint's own code is not in the case"),
    "real-minimax-text-01": ("remote-code-refused", "auto_map names configuration_minimax_text_01.py, which the "
                             "case does not ship"),
    "real-minimax-m1-80k": ("remote-code-refused", "as MiniMax-Text-01: its auto_map code is not in the case"),
    "real-rwkv7-goose-world3-1.5b": ("unknown-architecture", "model_type rwkv7 is not in CONFIG_MAPPING "
                                     "(transformers' rwkv is RWKV-4); RWKV-7 ships as flash-linear-attention code"),
    "real-gemma-3n-e4b": ("missing-package", "Gemma3nForConditionalGeneration's vision tower is a "
                          "TimmWrapperModel (models/timm_wrapper), which needs timm and pillow; the torch "
                          "test venv has neither"),
}
# Where a documented failure happens after the config was built (default: at the config).
NOT_BUILT_STAGE = {"real-gemma-3n-e4b": "build"}
# name -> {quantity: (config rules, model code)}: where the rules and the code disagree, and why.
DISAGREE = {
    # transformers' Qwen2_5_VisionTransformerPretrainedModel holds 677M parameters (the HF hub's
    # 8.29B total is the code's number); the rules' generic ViT estimate gives the tower 536M.
    "family-qwen2.5-vl-7b": {"total": (8152045952, 8292166656)},
    # transformers configuration_longcat_flash.py: num_hidden_layers is 2 x num_layers (the two attention
    # sublayers of each decoder layer), so the task looks for a list of 56 decoder layers where the model
    # holds 28: the code witness finds no layer list (LAYER_LIST_NOT_FOUND).
    "family-longcat-flash-chat": {"layers": (28, 0), "moe_layers": (28, 0)},
}
# Built cases whose decoder-layer list the task cannot find, and why.
LAYER_LIST_NOT_FOUND = {"family-longcat-flash-chat": "num_hidden_layers counts attention sublayers (2 x num_layers)"}
KIMI_REFUSED = "kimi-k2-instruct-no-remote-code"
KIMI_SMALL = "kimi-k2-small-expert-list"
KIMI_SMALL_CONFIG = {"num_hidden_layers": 4, "n_routed_experts": 16}
CUDA_ONLY = "cuda-only-code"

CUDA_CONFIG = {"model_type": "cuda_only_lm", "architectures": ["CudaOnlyForCausalLM"], "hidden_size": 64,
               "num_hidden_layers": 2, "auto_map": {"AutoConfig": "configuration_cuda_only.CudaOnlyConfig",
                                                    "AutoModelForCausalLM": "modeling_cuda_only.CudaOnlyForCausalLM"}}
CUDA_CONFIGURATION = '''\
from transformers.configuration_utils import PretrainedConfig


class CudaOnlyConfig(PretrainedConfig):
    model_type = "cuda_only_lm"
'''
# As code built on CUDA-only kernels does at import (a custom op loaded for the current device).
CUDA_MODELING = '''\
import torch

from .configuration_cuda_only import CudaOnlyConfig

DEVICE = torch.cuda.current_device()


class CudaOnlyForCausalLM(torch.nn.Module):
    config_class = CudaOnlyConfig
'''


def _write_cases(root: Path) -> list[dict[str, Any]]:
    cases = []
    for name, raw in config_cases().items():
        folder = root / name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(raw["files"]["config"]), encoding="utf-8")
        cases.append({"name": name, "dir": str(folder), "trust_remote_code": False})
    kimi = build_kimi_model(root / KIMI_REFUSED, variant="k2-instruct", model_code="expert-list")
    cases.append({"name": KIMI_REFUSED, "dir": str(kimi), "trust_remote_code": False})
    # Kimi's own expert layout (a ModuleList of MLPs) on a cut-down K2 config: 4 layers, 16 experts.
    small = build_kimi_model(root / KIMI_SMALL, variant="k2-instruct", model_code="expert-list")
    config = json.loads((small / "config.json").read_text())
    config.update(KIMI_SMALL_CONFIG)
    (small / "config.json").write_text(json.dumps(config), encoding="utf-8")
    cases.append({"name": KIMI_SMALL, "dir": str(small), "trust_remote_code": True})
    cuda = root / CUDA_ONLY
    cuda.mkdir()
    (cuda / "config.json").write_text(json.dumps(CUDA_CONFIG), encoding="utf-8")
    (cuda / "configuration_cuda_only.py").write_text(CUDA_CONFIGURATION, encoding="utf-8")
    (cuda / "modeling_cuda_only.py").write_text(CUDA_MODELING, encoding="utf-8")
    cases.append({"name": CUDA_ONLY, "dir": str(cuda), "trust_remote_code": True})
    return cases


@pytest.fixture(scope="module")
def torch_python() -> Path:
    return venv_or_skip(torch_venv, "torch") / "bin" / "python"


@pytest.fixture(scope="module")
def built(torch_python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("meta")
    (root / "models").mkdir()
    cases = _write_cases(root / "models")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONPATH=str(REPO),
               HF_HOME=str(root / "hf"), HF_MODULES_CACHE=str(root / "hf" / "modules"), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([str(torch_python), "-B", "-m", "tests.witnesses.meta_driver"],
                          input=json.dumps({"cases": cases}), capture_output=True, text=True, env=env,
                          cwd=str(REPO), timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return {r["name"]: r for r in results}


def test_every_case_was_tried(built: dict[str, dict[str, Any]]) -> None:
    assert set(built) == set(config_cases()) | {KIMI_REFUSED, KIMI_SMALL, CUDA_ONLY}


def test_builds_or_documented_failures(built: dict[str, dict[str, Any]]) -> None:
    for name in config_cases():
        result = built[name]["result"]
        if name in NOT_BUILT:
            assert not result["built"], name
            assert result["error"]["cause"] == NOT_BUILT[name][0], (name, result["error"])
            assert result["error"]["stage"] == NOT_BUILT_STAGE.get(name, "config"), name
        else:
            assert result["built"], (name, result["error"], result["attempts"])
            assert result["transformers_version"] == "5.24.0" and result["torch_version"].startswith("2.13.0")


def test_counts_are_exact(built: dict[str, dict[str, Any]]) -> None:
    for name, item in built.items():
        params = item["result"]["params"]
        if params is None:
            continue
        assert params["total"] == item["state_dict_total"], name
        assert params["parameters"] + params["buffers"] == params["total"], name
        assert sum(params["components"].values()) == params["total"], name
        expected = 0 if name in LAYER_LIST_NOT_FOUND else item["result"]["config"]["num_hidden_layers"]
        assert item["result"]["layers"]["count"] == expected, name


def _profile(name: str, result: dict[str, Any]) -> dict[str, Any]:
    raw = config_cases()[name]
    raw["options"]["load_model_code"] = True
    raw["model_code_probe"] = result
    return build_profile(raw)


def test_witnesses_agree_or_disagree_as_documented(built: dict[str, dict[str, Any]]) -> None:
    wrong = {}
    for name in config_cases():
        if name in NOT_BUILT:
            continue
        profile = _profile(name, built[name]["result"])
        found = {f["quantity"]: tuple(f["values"]) for f in profile["findings"] if f["code"] == "witnesses-disagree"}
        found.update(("failed", f["message"]) for f in profile["findings"] if f["code"] == "witnesses-failed")
        if found != DISAGREE.get(name, {}):
            wrong[name] = found
    assert not wrong, wrong


def test_active_parameters_of_published_models(built: dict[str, dict[str, Any]]) -> None:
    """Exact counts against the published totals the cases cite."""
    dsv3 = built["family-deepseek-v3"]["result"]["params"]
    assert (dsv3["total"], dsv3["active"]) == (671026419200, 36625618432)  # README: 671B, 36.6B (0.9B head)
    assert (dsv3["experts_per_token"], dsv3["moe_layers"], dsv3["routed_experts"]) == (8, 58, [256])
    qwen_vl = built["family-qwen2.5-vl-7b"]["result"]["params"]
    assert round(qwen_vl["total"] / 1e9, 2) == 8.29  # HF hub: 8.29B
    assert qwen_vl["components"]["vision"] > 0


def test_layer_classes_as_the_code_sees_them(built: dict[str, dict[str, Any]]) -> None:
    runs = built["real-kimi-linear-48b-a3b-instruct"]["result"]["layers"]["runs"]
    mixers = {(r["mixer"], tuple(r["mixer_kinds"])) for r in runs}
    # Kimi-Linear: KDA (a delta rule with A_log) in 20 layers, full MLA in 7.
    assert mixers == {("KimiLinearDeltaAttention", ("recurrent",)), ("KimiLinearAttention", ("attention",))}
    assert sum(r["count"] for r in runs if r["mixer_kinds"] == ["recurrent"]) == 20
    gemma = built["family-gemma-2-9b"]["result"]["config"]
    assert {run["value"] for run in gemma["layer_types"]} == {"sliding_attention", "full_attention"}


def test_remote_code_refused_and_cuda_only_are_classified(built: dict[str, dict[str, Any]]) -> None:
    refused = built[KIMI_REFUSED]["result"]
    assert not refused["built"] and refused["error"]["cause"] == "remote-code-refused"
    assert "trust_remote_code" in refused["error"]["message"]
    cuda = built[CUDA_ONLY]["result"]
    assert not cuda["built"] and cuda["error"]["cause"] == "cuda-only", cuda["error"]
    assert cuda["error"]["stage"] in ("config", "build")


def test_refusal_reaches_the_profile(built: dict[str, dict[str, Any]]) -> None:
    """--no-remote-code on a model that only its own code describes: the reason, in the profile."""
    raw = config_cases()["real-kimi-k2-instruct"]
    raw["options"].update({"remote_code": False, "load_model_code": True})
    raw["model_code_probe"] = built[KIMI_REFUSED]["result"]
    profile = build_profile(raw)
    code = profile["architecture"]["params"]["sources"]["model_code"]
    assert (code["status"], code["cause"], code["stage"]) == ("failed", "remote-code-refused", "config")
    assert "custom code" in code["reason"]
    [info] = [f for f in profile["findings"] if f["code"] == "model-code-unavailable"]
    assert "drop --no-remote-code" in info["fix"]
    assert profile["architecture"]["params"]["source"] == "config"


def test_kimi_expert_list_layout_counts_one_expert(built: dict[str, dict[str, Any]]) -> None:
    """Kimi's own code keeps each routed expert as an MLP module in a ModuleList."""
    result = built[KIMI_SMALL]["result"]
    assert result["built"] and result["remote_code"] and result["class"] == "DeepseekV3ForCausalLM"
    params = result["params"]
    assert params["total"] == built[KIMI_SMALL]["state_dict_total"]
    one = 3 * 7168 * 2048  # gate, up and down projections of moe_intermediate_size 2048
    assert (params["routed_experts"], params["one_expert"], params["moe_layers"]) == ([16], one, 3)
    assert params["components"]["experts_routed"] == 3 * 16 * one
    assert params["components"]["router"] == 3 * 16 * (7168 + 1)  # weight + e_score_correction_bias
    raw = config_cases()["real-kimi-k2-instruct"]
    raw["files"]["config"].update(KIMI_SMALL_CONFIG)
    raw["options"]["load_model_code"] = True
    raw["model_code_probe"] = result
    profile = build_profile(raw)
    assert not [f for f in profile["findings"] if f["code"] == "witnesses-disagree"]
    assert profile["architecture"]["params"]["sources"]["config"]["active"] == params["active"]
