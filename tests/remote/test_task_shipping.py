"""Per-task shipping: each task runs on a Python without introspect given exactly its module set."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from introspect.remote.runner import TASKS
from introspect.transport import shipping
from tests.fixtures.shards import write_shard
from tests.remote.test_shipping import _bare_python

MISSING = "No module named 'introspect"


def _model_dir(root: Path) -> Path:
    model = root / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"],
                                                   "num_hidden_layers": 2, "hidden_size": 8}))
    (model / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 16}))
    write_shard(model / "model.safetensors", [("model.layers.0.mlp.weight", "BF16", (8, 8)),
                                              ("model.layers.1.mlp.weight", "BF16", (8, 8))])
    return model


def _request(root: Path, model: Path) -> dict[str, Any]:
    """One request every task can read (each takes the keys it knows)."""
    return {"model_path": str(model), "roots": [str(root)], "model_dirs": [str(model)], "spec": "org/name",
            "imports": ["json"], "nvidia_smi": False, "hf_cache": str(root / "hf"), "cache_dir": str(root / "hf"),
            "use_hf_scanner": False, "deadline": 20, "sample": True}


def _run(python: str, envelope: bytes, cwd: Path) -> tuple[dict[str, Any] | None, str]:
    argv = shipping.command_argv(python)
    argv.insert(1, "-I")  # isolated: neither PYTHONPATH, the cwd nor user site-packages
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    timer = threading.Timer(60, proc.kill)  # bounded even if a task hung
    timer.start()
    try:
        proc.stdin.write(envelope)
        proc.stdin.flush()  # stdin stays open while the task runs: its EOF means the controller is gone
        out = proc.stdout.read()
        proc.stdin.close()
        err = proc.stderr.read()
        proc.wait()
    finally:
        timer.cancel()
        proc.kill()
    return shipping.parse_reply(out), err.decode("utf-8", "replace")


@pytest.fixture(scope="module")
def bare_python() -> str:
    return _bare_python()


@pytest.mark.parametrize("task,isolate", [(t, False) for t in TASKS] + [("tokenizer", True), ("model", True)])
def test_each_task_runs_with_exactly_its_shipped_modules(task: str, isolate: bool, bare_python: str,
                                                         tmp_path: Path) -> None:
    model = _model_dir(tmp_path)
    envelope = shipping.envelope(task, _request(tmp_path, model), isolate=isolate, timeout=30)
    shipped = json.loads(envelope)
    assert sorted(shipped["sources"]) == list(shipping.task_modules(task, isolate))
    reply, stderr = _run(bare_python, envelope, tmp_path)
    assert reply is not None, stderr
    assert MISSING not in json.dumps(reply) and MISSING not in stderr, (reply, stderr)
    assert not [e for e in reply["errors"] if e.get("probe") == task and e.get("type") in ("ImportError",
                                                                                             "ModuleNotFoundError")]


def test_a_module_left_out_is_caught(bare_python: str, tmp_path: Path) -> None:
    """The check above can fail: the model task without one of its modules reports the import error."""
    model = _model_dir(tmp_path)
    body = json.loads(shipping.envelope("model", _request(tmp_path, model), timeout=30))
    del body["sources"]["introspect.remote.facts.header_scan"]
    reply, stderr = _run(bare_python, json.dumps(body).encode() + b"\n", tmp_path)
    assert MISSING in json.dumps(reply) + stderr


def test_the_set_is_smaller_than_the_package_and_grows_with_isolation() -> None:
    everything = set(shipping.remote_sources())
    # What isolation adds: the supervisor and what it imports, nothing else.
    supervision = set(shipping.task_modules("no-such-task", True)) - set(shipping.task_modules("no-such-task"))
    assert shipping.SUPERVISOR in supervision
    for task in TASKS:
        plain, isolated = set(shipping.task_modules(task)), set(shipping.task_modules(task, True))
        assert {shipping.RUNNER, TASKS[task][0], "introspect", "introspect.remote"} <= plain < everything
        assert isolated == plain | supervision
    assert set(shipping.task_modules("no-such-task")) == {"introspect", "introspect.remote",
                                                          "introspect.remote.contract", "introspect.remote.readers",
                                                          "introspect.remote.runner", "introspect.remote.sections",
                                                          "introspect.remote.wire"}
