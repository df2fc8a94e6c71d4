"""The model_code task's failures, run for real through the supervisor (isolated, own process group).

- no torch in the venv (the project's interpreter has none): a classified error, nothing built,
  and no child interpreter started (the runner's precheck finds no torch on sys.path);
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
HANGING_CONFIG = {"model_type": "hanging_lm", "num_hidden_layers": 2, "hidden_size": 64,
                  "auto_map": {"AutoConfig": "configuration_hanging.HangingConfig"}}


def test_without_torch_the_witness_says_which_package(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}), encoding="utf-8")
    with LocalExecutor() as executor:
        reply = executor.run_python(sys.executable, "model_code", {"model_path": str(tmp_path)}, timeout=60,
                                    isolate=True)
    facts = reply.facts
    assert facts["built"] is False and facts["params"] is None
    assert (facts["error"]["stage"], facts["error"]["cause"]) == ("import", "missing-package")
    assert facts["error"]["missing_packages"] == ["torch"]
    assert reply.supervisor is None  # answered before any child interpreter was started


def test_a_torch_that_fails_to_import_is_classified_by_the_isolated_child(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}), encoding="utf-8")
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("import torch_native_core\n", encoding="utf-8")
    (site / "transformers").mkdir()
    (site / "transformers" / "__init__.py").write_text("", encoding="utf-8")
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
