"""Remote code that leaves the probe's process group (``os.setsid()``) or kills its parent:
nothing of the probe's survives on the host (``ps``), the private temp dir is removed, and a
killed parent is a tokenizer-probe failure (exit 1), never an unreachable host (exit 3)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.conftest import run_cli, ssh_flags
from tests.faults.conftest import introspect_processes, pids_alive, tokenizer_model
from tests.fixtures.venvs import venv_python

pytestmark = pytest.mark.ssh
# The remote code here is the tokenizer's: the model-code witness (another interpreter that
# imports transformers, ~1.4 CPU-s a probe) runs none of it and is not what these cases check.
NO_WITNESS = ("--no-model-code",)

# In the tokenizer's __init__: a double fork whose grandchild starts its own session
# (out of reach of a process-group kill), writes its pid and the private temp dir it was
# given, and sleeps; then the worker either goes on or kills its parent.
DETACH = (
    "pid = os.fork()\n"
    "        if pid == 0:\n"
    "            os.setsid()\n"
    "            if os.fork() == 0:\n"
    "                with open({pidfile!r}, 'a') as fh:\n"
    "                    fh.write('%d\\n' % os.getpid())\n"
    "                with open({tmpfile!r}, 'w') as fh:\n"
    "                    fh.write(os.path.dirname(os.environ['TMPDIR']))\n"
    "                time.sleep(10**6)\n"
    "            os._exit(0)\n"
    "        os.waitpid(pid, 0)\n"
    "        while not os.path.exists({tmpfile!r}):\n"
    "            time.sleep(0.05)\n"
    "        {then}"
)


def _model(kimi_model: Path, tmp_path: Path, then: str) -> tuple[Path, Path, Path]:
    pidfile, tmpfile = tmp_path / "pids", tmp_path / "private-tmp"
    action = DETACH.format(pidfile=str(pidfile), tmpfile=str(tmpfile), then=then)
    return tokenizer_model(kimi_model, tmp_path / "model", action, pidfile), pidfile, tmpfile


def _assert_nothing_left(pidfile: Path, tmpfile: Path, venv: Path) -> None:
    deadline = time.monotonic() + 5
    while pids_alive(pidfile) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pidfile.exists() and len(pidfile.read_text().split()) == 2, "the grandchild never started"
    assert not pids_alive(pidfile), "a detached grandchild of the tokenizer survived the probe"
    assert not introspect_processes(venv_python(venv)), "a shipped probe interpreter is still running"
    private = tmpfile.read_text()
    assert private and not os.path.exists(private), f"the private temp dir {private} was left behind"


@pytest.mark.parametrize("transport", ["local", "ssh"])
def test_detached_grandchild_is_killed(transport, sshd, client_keys, kimi_model, venv_full, tmp_path):
    model, pidfile, tmpfile = _model(kimi_model, tmp_path, "pass")
    flags = ssh_flags(sshd, client_keys) if transport == "ssh" else []
    result = run_cli("probe", *flags, "--model", str(model), "--venv", str(venv_full), "--json", *NO_WITNESS,
                     timeout=120)
    assert "Traceback" not in result.stderr
    assert result.code in (0, 1), result.stderr[-2000:]
    assert result.json()["architecture"]["attention"]["type"] == "MLA"
    _assert_nothing_left(pidfile, tmpfile, venv_full)


def test_worker_that_kills_its_parent_is_a_tokenizer_failure(sshd, client_keys, kimi_model, venv_full, tmp_path):
    model, pidfile, tmpfile = _model(kimi_model, tmp_path, "os.kill(os.getppid(), 9)")
    result = run_cli("probe", *ssh_flags(sshd, client_keys), "--model", str(model), "--venv", str(venv_full),
                     "--json", *NO_WITNESS, timeout=120)
    assert result.code == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    profile = result.json()
    assert any(f["code"] == "tokenizer-killed" and "SIGKILL" in f["message"] for f in profile["findings"]), \
        profile["findings"]
    assert profile["architecture"]["num_layers"] == 61
    _assert_nothing_left(pidfile, tmpfile, venv_full)
