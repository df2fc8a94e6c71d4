"""The model_code task's failures, run for real through the supervisor (isolated, own process group).

- no transformers in the venv: a classified error, nothing built, and no child interpreter
  started (the runner's precheck finds no transformers on sys.path);
- transformers without torch (the project's interpreter): the config class speaks (witness 2a),
  the meta build says which package it lacks;
- a torch that is there but fails to import: the child runs and classifies the failure;
- model code that hangs (a configuration class that never returns): killed at the task's
  timeout, the profile says so and keeps everything else.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from introspect.analysis.profile import build_profile
from introspect.transport.local import LocalExecutor
from tests.fixtures.engine_venv import venv_or_skip
from tests.fixtures.torch_venv import torch_venv
from tests.golden.cases import config_raw

HANGING_CONFIGURATION = '''\
import time

from transformers.configuration_utils import PretrainedConfig


class HangingConfig(PretrainedConfig):
    model_type = "hanging_lm"

    def __init__(self, **kwargs):
        time.sleep(3600)  # model code stuck at load (a lock, a network call): the timeout must end it
'''
# Just enough transformers for the config stage to pass, so the torch import is what fails.
FAKE_TRANSFORMERS = '''\
class AutoConfig:
    @classmethod
    def from_pretrained(cls, path, trust_remote_code=False):
        return cls()

    def to_dict(self):
        return {"model_type": "llama"}
'''
HANGING_CONFIG = {"model_type": "hanging_lm", "num_hidden_layers": 2, "hidden_size": 64,
                  "auto_map": {"AutoConfig": "configuration_hanging.HangingConfig"}}


def test_without_transformers_no_child_is_started(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}), encoding="utf-8")
    bare = Path(sys.base_prefix) / "bin" / "python3"  # the interpreter the project venv was made from
    with LocalExecutor() as executor:
        reply = executor.run_python(str(bare), "model_code", {"model_path": str(tmp_path)}, timeout=60,
                                    isolate=True)
    facts = reply.facts
    if facts["error"]["missing_packages"] != ["transformers"]:
        pytest.skip(f"{bare} has transformers installed")
    assert facts["built"] is False and facts["params"] is None and facts["config"] is None
    assert (facts["error"]["stage"], facts["error"]["cause"]) == ("import", "missing-package")
    assert reply.supervisor is None  # answered before any child interpreter was started


def test_without_torch_the_config_class_still_speaks(tmp_path: Path) -> None:
    """transformers 5.24 configuration_gemma2.py Gemma2Config derives layer_types (sliding every
    other layer) and defaults tie_word_embeddings to True: neither is in this config.json."""
    config = {"model_type": "gemma2", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4,
              "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128, "vocab_size": 256,
              "sliding_window": 32}
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    with LocalExecutor() as executor:
        reply = executor.run_python(sys.executable, "model_code", {"model_path": str(tmp_path)}, timeout=60,
                                    isolate=True)
    facts = reply.facts
    assert facts["built"] is False and facts["params"] is None
    assert (facts["error"]["stage"], facts["error"]["cause"]) == ("import", "missing-package")
    assert facts["error"]["missing_packages"] == ["torch"]
    assert facts["config"]["class"] == "Gemma2Config"
    assert facts["config_dict"]["layer_types"] == ["sliding_attention", "full_attention"] * 2
    assert facts["config_dict"]["tie_word_embeddings"] is True
    assert reply.supervisor is not None  # the child ran: importing transformers is isolated too
    raw = config_raw("gemma2", config) | {"model_code_probe": facts}
    layers = build_profile(raw)["architecture"]["layers"]
    assert layers["kinds"] == {"sliding_attention": 2, "full_attention": 2}
    # Both readings agree here (the gemma2 row knows the alternation): no disagreement, the file's stays.
    assert not [f for f in build_profile(raw)["findings"] if f["code"] == "witnesses-disagree"]


def test_the_config_class_settles_a_layout_the_file_alone_does_not_show() -> None:
    """A family whose class derives layer_types from a key the rules cannot read: config.json read alone
    is "unknown" (exit 1), the class's to_dict() settles it and the error goes away."""
    config = {"model_type": "acme_lm", "num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4,
              "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000, "acme_block_pattern": "LGLG",
              "sliding_window": 128, "torch_dtype": "bfloat16"}
    derived = config | {"layer_types": ["sliding_attention", "full_attention"] * 2, "tie_word_embeddings": False}
    alone = build_profile(config_raw("acme", config))
    assert alone["architecture"]["layers"]["kinds"] is None
    assert "layout-unknown" in {f["code"] for f in alone["findings"] if f["severity"] == "error"}
    probe = {"built": False, "config": {"class": "AcmeConfig"}, "config_dict": derived,
             "error": {"type": "ModuleNotFoundError", "message": "No module named 'torch'", "stage": "import",
                       "cause": "missing-package", "missing_packages": ["torch"]}}
    settled = build_profile(config_raw("acme", config) | {"model_code_probe": probe})
    layers = settled["architecture"]["layers"]
    assert (layers["kinds"], layers["settled_by"]) == ({"sliding_attention": 2, "full_attention": 2}, "config_class")
    codes = {f["code"] for f in settled["findings"]}
    assert "layout-unknown" not in codes
    # Sliding and full layers in a family without a row: their head geometry could differ (modeling_gemma4.py)
    # and no witness read it, so the KV cache per token stays unknown until the model's code speaks.
    assert settled["architecture"]["kv_cache"] is None and "kv-geometry-unknown" in codes


def test_a_torch_that_fails_to_import_is_classified_by_the_isolated_child(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}), encoding="utf-8")
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("import torch_native_core\n", encoding="utf-8")
    (site / "transformers").mkdir()
    (site / "transformers" / "__init__.py").write_text(FAKE_TRANSFORMERS, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(site))
    with LocalExecutor() as executor:
        reply = executor.run_python(sys.executable, "model_code", {"model_path": str(tmp_path)}, timeout=60,
                                    isolate=True)
    facts = reply.facts
    assert facts["built"] is False
    assert (facts["error"]["stage"], facts["error"]["cause"]) == ("import", "missing-package")
    assert facts["error"]["missing_packages"] == ["torch_native_core"]
    assert reply.supervisor["temp_dir_removed"] is True


def test_hanging_model_code_is_killed_at_its_timeout(tmp_path: Path) -> None:
    python = venv_or_skip(torch_venv, "torch") / "bin" / "python"
    (tmp_path / "config.json").write_text(json.dumps(HANGING_CONFIG), encoding="utf-8")
    (tmp_path / "configuration_hanging.py").write_text(HANGING_CONFIGURATION, encoding="utf-8")
    with LocalExecutor() as executor:
        reply = executor.run_python(str(python), "model_code",
                                    {"model_path": str(tmp_path), "trust_remote_code": True}, timeout=5,
                                    isolate=True)
    assert reply.facts is None
    [error] = reply.errors
    assert (error["probe"], error["type"]) == ("model_code", "timeout")
    assert reply.supervisor["temp_dir_removed"] is True
    raw = config_raw("hanging", HANGING_CONFIG)
    raw["options"]["load_model_code"] = True
    raw["errors"] = reply.errors
    profile = build_profile(raw)
    code = profile["architecture"]["params"]["sources"]["model_code"]
    assert (code["status"], code["cause"]) == ("failed", "timeout")
    assert [f["code"] for f in profile["findings"] if f["severity"] == "error"] == ["probe-timeout"]


def test_auto_map_files_missing_falls_back_to_the_native_class(tmp_path: Path) -> None:
    """A trimmed checkpoint whose auto_map names code files it lacks: transformers 5.24's
    AutoConfig.from_pretrained(trust_remote_code=True) raises OSError for the missing
    configuration_x.py; the installed Qwen2Config knows model_type qwen2 and reads it, and the
    profile says so."""
    config = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 64,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
              "vocab_size": 1000, "auto_map": {"AutoConfig": "configuration_x.XConfig",
                                               "AutoModelForCausalLM": "modeling_x.XForCausalLM"}}
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    with LocalExecutor() as executor:
        reply = executor.run_python(sys.executable, "model_code",
                                    {"model_path": str(tmp_path), "trust_remote_code": True}, timeout=60, isolate=True)
    facts = reply.facts
    assert facts["config"]["class"] == "Qwen2Config"
    assert facts["config_fallback"]["model_type"] == "qwen2"
    assert "configuration_x.py" in facts["config_fallback"]["reason"]
    assert "auto_map" not in facts["config_dict"]
    profile = build_profile(config_raw("trimmed", config) | {"model_code_probe": facts})
    [native] = [f for f in profile["findings"] if f["code"] == "config-class-native"]
    assert native["severity"] == "warning" and "Qwen2Config" in native["message"]
    assert profile["architecture"]["config_class"]["fallback"]["class"] == "Qwen2Config"
