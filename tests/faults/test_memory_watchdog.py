"""The probe's memory bounds where no address-space limit can be set, and runaway templates in preflight.

- The model-code task runs without ``RLIMIT_AS`` (CUDA's driver reserves address space); model
  code that allocates and touches memory without end (here its config class, as remote code)
  is killed by the supervisor's resident-memory watch at ``--memory-limit``, with a finding that
  names the limit and the measure, the fix a probe command, and nothing left running; a worker
  it detaches with ``setsid`` counts and dies too.
- ``introspect preflight`` on a template that doubles a string fails its chat-template check,
  naming the file the template comes from, with a paste-able fix, exit 1 (not ready).
- A render that meets the task's own limit before its budget says which limit it met.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from introspect.remote.memwatch import MemoryWatch, tree_rss
from introspect.transport.local import LocalExecutor
from tests.conftest import REPO, run_cli, ssh_flags
from tests.faults.conftest import pids_alive
from tests.preflight.fixtures import build_generation_marker_model

MIB = 1 << 20
LIMIT = 300 * MIB
# Touched memory (bytes of 0x01, not calloc's lazy zeros), 10 MiB at a time at ~500 MiB/s, up to
# 1.5 GiB: far past the limit, and then it waits, so only a kill ends it before the timeout.
HOG = ("import time\nhoard = []\nfor _ in range(150):\n    hoard.append(b'\\x01' * (10 << 20))\n"
       "    time.sleep(0.02)\ntime.sleep(3600)\n")
HOG_CONFIGURATION = '''\
import os
import subprocess
import sys

from transformers.configuration_utils import PretrainedConfig

HOG = {hog!r}


class HogConfig(PretrainedConfig):
    model_type = "hog_lm"

    def __init__(self, **kwargs):
        with open({pidfile!r}, "a") as fh:
            fh.write("%d\\n" % os.getpid())
        if {detached!r}:  # a worker out of the task's process group, holding the memory
            worker = subprocess.Popen([sys.executable, "-c", HOG], start_new_session=True)
            with open({pidfile!r}, "a") as fh:
                fh.write("%d\\n" % worker.pid)
            worker.wait()
        exec(HOG)
'''
HOG_CONFIG = {"model_type": "hog_lm", "architectures": ["HogForCausalLM"], "num_hidden_layers": 2,
              "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 256,
              "auto_map": {"AutoConfig": "configuration_hog.HogConfig"}}
DOUBLING = ("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
            "{% endfor %}{{ ns.s }}")


def hog_model(dest: Path, pidfile: Path, *, detached: bool = False) -> Path:
    dest.mkdir(parents=True)
    (dest / "config.json").write_text(json.dumps(HOG_CONFIG), encoding="utf-8")
    (dest / "configuration_hog.py").write_text(
        HOG_CONFIGURATION.format(hog=HOG, pidfile=str(pidfile), detached=detached), encoding="utf-8")
    return dest


def wait_all_dead(pidfile: Path, seconds: float = 10) -> list[int]:
    deadline = time.monotonic() + seconds
    while pids_alive(pidfile) and time.monotonic() < deadline:
        time.sleep(0.1)
    return pids_alive(pidfile)


# -- the model-code task, through the real supervisor ------------------------------------------

@pytest.mark.parametrize("detached", [False, True], ids=["in-group", "setsid-worker"])
def test_model_code_past_its_memory_limit_is_killed(tmp_path, detached):
    pidfile = tmp_path / "pids"
    model = hog_model(tmp_path / "model", pidfile, detached=detached)
    started = time.monotonic()
    with LocalExecutor() as executor:
        reply = executor.run_python(sys.executable, "model_code",
                                    {"model_path": str(model), "trust_remote_code": True, "memory_limit": LIMIT},
                                    timeout=120, isolate=True)
    assert time.monotonic() - started < 60  # the watch, not the timeout
    assert reply.facts is None
    [error] = reply.errors
    assert (error["probe"], error["type"]) == ("model_code", "memory-limit"), error
    assert "passed its 300 MiB memory limit (resident memory: " in error["message"], error
    assert error["message"].endswith("its process group was killed")
    supervisor = reply.supervisor
    assert "memory" not in supervisor["limits"]  # no address-space limit: the watch is its only bound
    assert supervisor["memory_limit"] == LIMIT and supervisor["temp_dir_removed"] is True
    # Killed soon after the limit (the watch looks faster once past half of it); the largest process
    # held most of what the watch summed.
    assert LIMIT - 64 * MIB < supervisor["peak_rss"] < LIMIT + 200 * MIB, supervisor
    assert len(pidfile.read_text().split()) == (2 if detached else 1)
    assert wait_all_dead(pidfile) == []


def test_model_code_within_its_limit_is_untouched(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 2}))
    with LocalExecutor() as executor:
        reply = executor.run_python(sys.executable, "model_code",
                                    {"model_path": str(tmp_path), "memory_limit": LIMIT}, timeout=60, isolate=True)
    assert reply.facts["config"]["class"] == "LlamaConfig", reply.facts  # torch missing is the only failure
    assert [e for e in reply.errors if e.get("type") == "memory-limit"] == []


@pytest.mark.ssh
def test_probe_names_the_model_code_memory_limit(tmp_path, sshd, client_keys):
    pidfile = tmp_path / "pids"
    model = hog_model(tmp_path / "model", pidfile)
    raw_file = tmp_path / "raw.json"
    result = run_cli("probe", *ssh_flags(sshd, client_keys), "--model", str(model), "--python", sys.executable,
                     "--no-tokenizer", "--memory-limit", "300MiB", "--json", "--save-raw", str(raw_file),
                     timeout=180)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.code == 1, (result.code, result.stdout[-2000:], result.stderr[-2000:])
    findings = {f["code"]: f for f in result.json()["findings"]}
    found = findings["model-code-memory-limit"]
    assert found["severity"] == "error"
    assert "300 MiB memory limit (resident memory: " in found["message"], found
    assert found["fix"] == (f"introspect probe --host {sshd.address} --model {model} --memory-limit 64GiB  "
                            "# only if the host has that much free; or pass --no-model-code to skip this build")
    assert "model_code-memory-limit" not in findings and "model-code-failed" not in findings  # said once
    assert result.json()["architecture"]["num_layers"] == 2  # config.json's facts stand
    assert json.loads(raw_file.read_text())["resources"]["model_code"]["memory_limit"] == LIMIT
    assert wait_all_dead(pidfile) == []


# -- the watch itself --------------------------------------------------------------------------

def test_watch_sums_the_tree_and_fires_past_the_limit():
    code = "import sys, time\nx = b'\\x01' * (64 << 20)\nsys.stdout.write('ok\\n'); sys.stdout.flush()\ntime.sleep(60)\n"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ok\n"
        held, count = tree_rss(os.getpid()) or (0, 0)
        assert held >= 64 * MIB and count >= 1
        assert MemoryWatch(32 * MIB).over() and not MemoryWatch(0).over() and not MemoryWatch(0).on
        assert not MemoryWatch(64 << 30).over()
    finally:
        proc.kill()
        proc.wait()


# -- preflight on a runaway template ------------------------------------------------------------

@pytest.mark.parametrize("source", ["chat_template.jinja", "tokenizer_config.json"])
def test_preflight_names_a_runaway_template(tmp_path, source):
    model = build_generation_marker_model(tmp_path / "tiny")
    (model / "chat_template.jinja").unlink()
    if source == "chat_template.jinja":
        (model / source).write_text(DOUBLING, encoding="utf-8")
    else:
        config = json.loads((model / source).read_text())
        (model / source).write_text(json.dumps(dict(config, chat_template=DOUBLING)), encoding="utf-8")
    started = time.monotonic()
    result = run_cli("preflight", "--model", str(model), "--python", sys.executable, "--min-free-gb", "0.001",
                     "--json", timeout=180)
    assert time.monotonic() - started < 90  # one render to the budget, not one per check
    assert "Traceback" not in result.stderr, result.stderr
    assert result.code == 1, (result.code, result.stdout[-2000:], result.stderr[-2000:])
    checks = {c["name"]: c for c in result.json()["checks"]}
    template = checks["chat-template"]
    assert template["status"] == "fail", template
    assert template["message"].startswith(f"the chat template in {source} does not finish rendering "
                                           "'conversation': the chat template's render exceeded its 512 MiB "
                                           "memory budget"), template
    assert "LimitExceeded" not in json.dumps(result.json())
    assert template["fix"].startswith(f"sha256sum {model / source}  # compare with the model repository's file")
    assert checks["loss-masks"]["status"] == "skipped"
    assert checks["tokenizer"]["status"] == "pass"  # the rest of the evidence stands


# -- which limit a render met -----------------------------------------------------------------

def test_render_past_the_tasks_own_limit_names_that_limit():
    code = ("from introspect.remote.limits import apply, budget, LimitExceeded, _address_space\n"
            "apply({'memory': _address_space() + (256 << 20)})\n"
            "try:\n    with budget('the render', memory=1 << 30):\n        x = b'x' * (768 << 20)\n"
            "except LimitExceeded as exc:\n    print(exc.cause, '|', exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=str(REPO)))
    cause, message = out.stdout.strip().split(" | ")
    assert cause == "memory-limit"
    assert message.startswith("the render exceeded the task's ") and message.endswith(
        " memory limit (address space)"), out
    assert "budget" not in message
