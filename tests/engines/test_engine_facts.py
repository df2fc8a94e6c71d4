"""Engine facts read from the real SGLang 0.5.23 and vLLM 0.33.0 sources, never imported.

The engines venv (tests/fixtures/engine_venv.py) holds both distributions from the
registry without any dependency: no torch, so an import of either engine would
fail there. Expected values were read in those versions' sources:

* sglang/srt/models/kimi_k25.py: ``EntryClass = [KimiK25ForConditionalGeneration]``;
  srt/models/deepseek_v2.py: ``EntryClass = [DeepseekV2ForCausalLM, DeepseekV3ForCausalLM, ...]``;
  srt/models/kimi_k25_eagle3.py: ``EntryClass = [Eagle3DeepseekV2ForCausalLM]``;
  srt/models/deepseek_nextn.py: ``EntryClass = [DeepseekV3ForCausalLMNextN]``;
  srt/speculative/spec_info.py: ``class SpeculativeAlgorithm`` with DFLASH, EAGLE, EAGLE3, ...;
  srt/layers/quantization/__init__.py: ``"compressed-tensors": CompressedTensorsConfig``;
* vllm/model_executor/models/registry.py: ``"KimiK25ForConditionalGeneration": ("kimi_k25", ...)``
  in ``_MULTIMODAL_MODELS``; vllm/config/speculative.py: ``SpeculativeMethod`` holds
  "eagle3", "dflash", "deepseek_mtp"; quantization/__init__.py ``QuantizationMethods``
  holds "compressed-tensors".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli
from tests.fixtures.engine_venv import SGLANG_VERSION, VLLM_VERSION, engines_venv, venv_or_skip

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def engines_python() -> Path:
    return venv_or_skip(engines_venv, "the pinned engines") / "bin" / "python"


@pytest.fixture(scope="module")
def engines_profile(engines_python: Path, kimi_model: Path) -> dict:
    result = run_cli("probe", "--model", str(kimi_model), "--python", str(engines_python), "--no-tokenizer",
                     "--json")
    assert "Traceback" not in result.stderr, result.stderr
    return result.json()


def _engine(profile: dict, name: str) -> dict:
    found = [e for e in profile["engines"]["engines"] if e["name"] == name]
    assert len(found) == 1, profile["engines"]
    return found[0]


def test_facts_are_read_without_importing_the_engines(engines_python: Path) -> None:
    script = ("import importlib.util, json, sys\n"
              "from introspect.remote.facts.host.engines import collect_engines\n"
              "facts, errors = collect_engines()\n"
              "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('sglang', 'vllm', 'torch'))\n"
              "print(json.dumps({'engines': [e['name'] for e in facts['engines']], 'errors': errors,\n"
              "                  'imported': heavy, 'torch': importlib.util.find_spec('torch') is not None}))\n")
    proc = subprocess.run([str(engines_python), "-c", script], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out == {"engines": ["sglang", "vllm"], "errors": [], "imported": [], "torch": False}


def test_sglang_registers_kimi_and_defines_dflash(engines_profile: dict) -> None:
    sglang = _engine(engines_profile, "sglang")
    assert sglang["version"] == SGLANG_VERSION and sglang["layout"] == "read"
    assert sglang["architecture"] == {"architecture": "KimiK25ForConditionalGeneration", "registered": True,
                                      "module": "sglang.srt.models.kimi_k25",
                                      "class": "KimiK25ForConditionalGeneration",
                                      "source": "srt/models/kimi_k25.py"}
    assert sglang["text_architecture"]["registered"] is True
    assert sglang["text_architecture"]["module"] == "sglang.srt.models.deepseek_v2"
    spec = sglang["speculative"]
    assert spec["source"] == "srt/speculative/spec_info.py"
    assert spec["dflash"] is True and spec["eagle3"] is True
    assert {"DFLASH", "EAGLE", "EAGLE3", "STANDALONE", "NGRAM"} <= set(spec["algorithms"])
    assert "NONE" not in spec["algorithms"]
    drafters = {d["class"]: d for d in sglang["drafters"]}
    assert drafters["Eagle3DeepseekV2ForCausalLM"]["file"] == "srt/models/kimi_k25_eagle3.py"
    assert drafters["Eagle3DeepseekV2ForCausalLM"]["kind"] == "eagle3"
    assert drafters["Eagle3DeepseekV2ForCausalLM"]["match"] == "model"  # kimi_k25_eagle3.py names the model
    assert drafters["DeepseekV3ForCausalLMNextN"]["kind"] == "mtp"
    assert drafters["DeepseekV3ForCausalLMNextN"]["match"] == "model"
    assert drafters["DeepseekV4ForCausalLMNextN"]["match"] == "family"  # another DeepSeek generation's head
    assert "LlamaForCausalLMEagle3" not in drafters  # another family's head
    assert "DFlashDraftModel" in sglang["generic_drafters"]
    quant = sglang["quantization"]
    assert quant["checkpoint_method"] == "compressed-tensors" and quant["supported"] is True
    assert quant["source"] == "srt/layers/quantization/__init__.py"


def test_vllm_registers_kimi_with_its_module(engines_profile: dict) -> None:
    vllm = _engine(engines_profile, "vllm")
    assert vllm["version"] == VLLM_VERSION and vllm["layout"] == "read"
    assert vllm["architecture"]["registered"] is True
    assert vllm["architecture"]["module"] == "vllm.model_executor.models.kimi_k25"
    assert vllm["architecture"]["source"] == "model_executor/models/registry.py"
    assert vllm["text_architecture"]["module"] == "vllm.model_executor.models.deepseek_v2"
    assert vllm["speculative"]["dflash"] is True and vllm["speculative"]["eagle3"] is True
    assert {"eagle3", "dflash", "deepseek_mtp", "ngram"} <= set(vllm["speculative"]["algorithms"])
    assert vllm["quantization"]["supported"] is True
    assert {"compressed-tensors", "fp8", "mxfp4"} <= set(vllm["quantization"]["methods"])


def test_unregistered_architecture_is_a_finding(engines_python: Path, kimi_model: Path, tmp_path: Path) -> None:
    model = tmp_path / "renamed"
    model.mkdir()
    config = json.loads((kimi_model / "config.json").read_text())
    config["architectures"] = ["NoSuchModelForCausalLM"]
    (model / "config.json").write_text(json.dumps(config))
    result = run_cli("probe", "--model", str(model), "--python", str(engines_python), "--no-tokenizer", "--json")
    profile = result.json()
    assert _engine(profile, "sglang")["architecture"]["registered"] is False
    codes = [(f["code"], f["severity"]) for f in profile["findings"]]
    assert ("engine-architecture", "warning") in codes


def test_report_has_engine_gpu_and_plan_sections(engines_python: Path, kimi_model: Path, tmp_path: Path) -> None:
    # PATH is an empty dir: no nvidia-smi on any host (the interpreter is named by its path).
    result = run_cli("probe", "--model", str(kimi_model), "--python", str(engines_python), "--no-tokenizer",
                     env={"COLUMNS": "200", "PATH": str(tmp_path)})
    engines = result.stdout.split("Engines", 1)[1].split("GPUs", 1)[0]
    assert f"sglang {SGLANG_VERSION}" in engines and f"vllm {VLLM_VERSION}" in engines
    assert "KimiK25ForConditionalGeneration: yes (sglang.srt.models.kimi_k25)" in engines
    assert "DFlash yes, EAGLE-3 yes" in engines
    assert "compressed-tensors: yes" in engines
    gpus, plan = result.stdout.split("GPUs", 1)[1].split("Plan", 1)
    assert "none (nvidia-smi is not on PATH)" in gpus
    # 5 taps over 61 layers, the published drafters' count (tests/engines/test_drafter_plan.py).
    assert "target_layer_ids [1, 15, 30, 44, 58]" in plan.split("Findings", 1)[0]


def test_no_engine_installed_is_a_fact(kimi_model: Path) -> None:
    result = run_cli("probe", "--model", str(kimi_model), "--python", sys.executable, "--no-tokenizer",
                     "--no-model-code", "--json")  # the engines section is the files task's
    profile = result.json()
    assert profile["engines"]["probed"] is True and profile["engines"]["engines"] == []
    assert profile["engines"]["searched"] == ["sglang", "vllm", "tensorrt_llm", "lmdeploy"]
    assert any(f["code"] == "engines-none" and f["severity"] == "info" for f in profile["findings"])


def test_unknown_layout_degrades_to_version_only(tmp_path: Path) -> None:
    """A future SGLang without srt/models etc.: the version, notes, an info finding; no crash."""
    site = tmp_path / "site"
    (site / "sglang").mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text("raise ImportError('must never be imported')\n")
    dist = site / "sglang-9.0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 9.0.0\n")
    script = ("import json\nfrom introspect.remote.facts.host.engines import collect_engines\n"
              "from introspect.analysis.serving.engines import analyze_engines\n"
              "facts, errors = collect_engines()\n"
              "from tests.engines.targets import target\n"
              "section, findings = analyze_engines(facts, target('DeepseekV3ForCausalLM'))\n"
              "print(json.dumps({'section': section.to_dict(), 'findings': [f.to_json() for f in findings], 'errors': errors}))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False,
                          env=dict(os.environ, PYTHONPATH=f"{site}{os.pathsep}{REPO}"))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    engine = out["section"]["engines"][0]
    assert (engine["name"], engine["version"], engine["layout"]) == ("sglang", "9.0.0", "version-only")
    assert engine["architecture"] is None and engine["speculative"] is None
    assert any("srt/models" in note for note in engine["notes"])
    assert [f["code"] for f in out["findings"]] == ["engine-version-only"]
    assert out["findings"][0]["severity"] == "info" and out["errors"] == []


def test_same_facts_under_python38(engines_python: Path) -> None:
    """The remote floor is Python 3.8: its ast reads the engines' sources the same way."""
    from tests.remote.test_files_probe import _python38

    exe = _python38()
    if exe is None:
        pytest.skip("no Python 3.8 interpreter here (set INTROSPECT_PY38)")
    site = next((engines_python.parent.parent / "lib").glob("python3*/site-packages"))
    script = ("import json, sys\nfrom introspect.remote.facts.host.engines import collect_engines\n"
              "facts, errors = collect_engines()\nprint(json.dumps([list(sys.version_info[:2]), facts, errors]))\n")
    runs = []
    for python in (exe, str(engines_python)):
        proc = subprocess.run([python, "-B", "-c", script], capture_output=True, text=True, timeout=120, check=False,
                              env=dict(os.environ, PYTHONPATH=f"{site}{os.pathsep}{REPO}"))
        assert proc.returncode == 0, proc.stderr
        runs.append(json.loads(proc.stdout))
    (v38, facts38, errors38), (_, facts, _) = runs
    assert v38 == [3, 8] and errors38 == []
    assert facts38 == facts and len(facts["engines"]) == 2
