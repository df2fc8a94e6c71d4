"""The executor contract over the new transports (testinfra-style: one suite, every backend).

- ``openssh``: the system ssh client against the loopback sshd fixture;
- ``podman``: a real container (tests/podman_host.py), skipped with podman's own words where
  containers cannot run;
- ``docker``: the real docker CLI on the same container, through podman's Docker-compatible API;
- ``lxc-attach``: a real LXC container (tests/lxc_host.py) entered with the real lxc-attach;
- ``kubectl-standin``, ``pct-standin``, ``lxc-attach-standin``, ``pct-via-openssh-standin``:
  the executors' real argv, run by a stand-in client that execs the command here
  (tests/transport/standins.py), because no cluster or Proxmox node can exist on a test machine.

Each case puts its files under ``shared``, which the target sees at the same path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from introspect.errors import InterpreterError
from introspect.transport import shipping
from introspect.transport.base import Executor
from introspect.transport.containers import (
    DockerExecutor,
    KubectlExecutor,
    LxcExecutor,
    PctExecutor,
    PodmanExecutor,
)
from introspect.transport.openssh import OpenSSHExecutor
from tests import podman_host
from tests.transport.standins import make_standin, seen

HERE_PY = os.path.realpath(sys.executable)
OLD_PYTHON = podman_host.OLD_PYTHON_TREE / "bin" / "python"
HOSTILE = "x$(touch {m})'\"`touch {m}`;\n touch {m} && echo"
REPO = Path(__file__).resolve().parent.parent.parent


@dataclass
class Remote:
    name: str
    executor: Executor
    python: str
    shared: Path
    #: Files the run left behind on the target, when the transport can list them.
    changed: Callable[[], set[str]] = field(default=lambda: set())
    argv_log: Path | None = None

    def dir(self) -> Path:
        path = self.shared / uuid.uuid4().hex[:10]
        path.mkdir()
        return path


def openssh_config(tmp: Path, sshd, keys) -> Path:
    config = tmp / "ssh_config"
    config.write_text(f"Host *\n  IdentityFile {keys.key}\n  IdentitiesOnly yes\n  IdentityAgent none\n"
                      f"  UserKnownHostsFile {keys.known_hosts}\n")
    return config


def _openssh(request, tmp: Path) -> OpenSSHExecutor:
    sshd, keys = request.getfixturevalue("sshd"), request.getfixturevalue("client_keys")
    return OpenSSHExecutor(sshd.address, port=sshd.port, ssh_config=str(openssh_config(tmp, sshd, keys)))


def _make(kind: str, request, tmp: Path, shared: Path) -> tuple[Executor, str, Path | None]:
    if kind == "openssh":
        return _openssh(request, tmp), HERE_PY, None
    if kind == "kubectl-standin":
        program, log = make_standin(tmp, "kubectl")
        return KubectlExecutor("vllm-0", namespace="serving", container="engine", context="gpu-east",
                               binary=str(program)), HERE_PY, log
    if kind == "pct-standin":
        program, log = make_standin(tmp, "pct")
        return PctExecutor(200, binary=str(program)), HERE_PY, log
    if kind == "lxc-attach-standin":
        program, log = make_standin(tmp, "lxc-attach")
        make_standin(tmp, "lxc-info")  # the state query goes to lxc-attach's sibling
        return LxcExecutor("ct200", client="lxc-attach", binary=str(program)), HERE_PY, log
    # pct on a Proxmox host reached over ssh: the stand-in runs on the "Proxmox host" (loopback sshd).
    program, log = make_standin(tmp, "pct")
    return PctExecutor(200, via=_openssh(request, tmp), binary=str(program)), HERE_PY, log


KINDS = ["openssh", "podman", "docker", "lxc-attach", "kubectl-standin", "pct-standin", "lxc-attach-standin", "pct-via-openssh-standin"]


@pytest.fixture(params=KINDS)
def remote(request, tmp_path: Path, shared_dir: Path, monkeypatch) -> Iterator[Remote]:
    if request.param in ("podman", "docker"):
        container = request.getfixturevalue("podman_container")
        executor: Executor = PodmanExecutor(container.name)
        if request.param == "docker":
            # The real docker CLI, talking to podman's Docker-compatible API about the same container.
            monkeypatch.setenv("DOCKER_HOST", request.getfixturevalue("docker_host"))
            executor = DockerExecutor(container.name)
        python, log = container.python, None
        changed = container.diff
    elif request.param == "lxc-attach":
        lxc = request.getfixturevalue("lxc_container")
        executor = LxcExecutor(lxc.name, client="lxc-attach", lxcpath=str(lxc.lxcpath))
        python, log, changed = lxc.python, None, lxc.files
    else:
        executor, python, log = _make(request.param, request, tmp_path, shared_dir)
        changed = set
    with executor:
        yield Remote(request.param, executor, python, shared_dir, changed, log)


def test_megabytes_on_both_streams_do_not_deadlock(remote: Remote) -> None:
    reply = remote.executor.run_python(remote.python, "echo", {"pad": 6 * 1024 * 1024}, timeout=90)
    assert len(reply.facts["pad"]) == 6 * 1024 * 1024
    assert reply.errors == []
    assert "e" * 1000 in reply.stderr_tail  # the MiB on stderr came through too


def test_request_travels_as_data(remote: Remote) -> None:
    marker = remote.dir() / "MARK"
    text = HOSTILE.format(m=marker)
    reply = remote.executor.run_python(remote.python, "echo", {"text": text}, timeout=30)
    assert reply.facts["request"]["text"] == text
    assert not marker.exists()


def test_isolated_task_is_killed_with_its_group_at_its_deadline(remote: Remote) -> None:
    reply = remote.executor.run_python(remote.python, "echo", {"sleep": 60}, timeout=2, isolate=True)
    assert reply.facts is None
    assert reply.errors[0]["type"] == "timeout"
    assert reply.supervisor["temp_dir_removed"] is True


def _probe_processes(token: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if token in line and "ps -eo" not in line]


def test_remote_probe_exits_when_the_client_is_killed(remote: Remote) -> None:
    """The controller gives up (its deadline), kills the local client's group: the probe on the
    target only loses its stdin, and its watchdog must end it."""
    token = f"py-{uuid.uuid4().hex[:12]}"
    python = remote.dir() / token
    python.symlink_to(remote.python)  # a unique argv[0], so ps finds this probe and no other
    payload = shipping.envelope("echo", {"sleep": 120})
    result = remote.executor.execute(shipping.command_argv(str(python)), payload, timeout=4)
    assert result.timed_out
    deadline = time.monotonic() + 20
    while _probe_processes(token) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _probe_processes(token) == [], "the probe outlived its client"


def test_missing_interpreter_is_a_clear_error(remote: Remote) -> None:
    with pytest.raises(InterpreterError) as info:
        remote.executor.run_python(str(remote.dir() / "venv" / "bin" / "python"), "echo", {}, timeout=10)
    assert "venv" in info.value.message and info.value.hint


def test_banner_noise_on_stdout_cannot_corrupt_the_reply(remote: Remote) -> None:
    noisy = remote.dir() / "noisy-python"
    noisy.write_text(f"#!/bin/sh\necho 'Welcome to GPU node 7 <<<INTROSPECT:'\nexec {remote.python} \"$@\"\n")
    noisy.chmod(0o755)
    reply = remote.executor.run_python(str(noisy), "echo", {"a": 1}, timeout=30)
    assert reply.facts["request"] == {"a": 1}


def test_unknown_task_is_an_error_record(remote: Remote) -> None:
    reply = remote.executor.run_python(remote.python, "no-such-task", {}, timeout=10)
    assert reply.errors[0]["type"] == "unknown-task"


def test_remote_side_runs_on_python_3_8(remote: Remote) -> None:
    if not OLD_PYTHON.exists():
        pytest.skip(f"no Python 3.8 at {OLD_PYTHON} on this machine")
    model = remote.dir() / "gpt2"
    shutil.copytree(REPO / "tests/data/realconfigs/gpt2", model)
    reply = remote.executor.run_python(str(OLD_PYTHON), "model", {"model_path": str(model)}, timeout=60)
    assert reply.python["version"][:2] == [3, 8]
    assert reply.facts["files"]["config"]["model_type"] == "gpt2"


def test_no_trace_left_on_the_target(remote: Remote) -> None:
    before = remote.changed()
    remote.executor.run_python(remote.python, "echo", {"a": 1}, timeout=30)
    reply = remote.executor.run_python(remote.python, "echo", {"a": 1}, timeout=30, isolate=True)
    assert reply.supervisor["temp_dir_removed"] is True
    assert remote.changed() == before


def test_the_client_argv_is_the_documented_one(remote: Remote) -> None:
    remote.executor.run_python(remote.python, "echo", {}, timeout=30)
    target = getattr(remote.executor, "target")  # noqa: B009 - the registry's Target is not on the base yet
    assert target.scheme == remote.name.split("-")[0]
    if remote.argv_log is None:
        return
    expected = {
        "kubectl-standin": ["--context", "gpu-east", "exec", "-i", "-n", "serving", "-c", "engine", "vllm-0"],
        "pct-standin": ["exec", "200"],
        "pct-via-openssh-standin": ["exec", "200"],
        "lxc-attach-standin": ["-n", "ct200"],
    }[remote.name]
    assert seen(remote.argv_log)[-1] == expected
    queries = {
        "kubectl-standin": ["--context", "gpu-east", "get", "pod", "vllm-0", "-o", "jsonpath={.status.phase}",
                            "--request-timeout=10s", "-n", "serving"],
        "pct-standin": ["status", "200"],
        "pct-via-openssh-standin": ["status", "200"],
        "lxc-attach-standin": ["-n", "ct200", "-s", "-H"],
    }
    log = remote.argv_log.with_name("lxc-info.argv.jsonl") if remote.name == "lxc-attach-standin" else remote.argv_log
    assert seen(log, queries=True) == [queries[remote.name]]  # once, at connect


def test_interpreter_path_travels_as_data(remote: Remote) -> None:
    base = remote.dir()
    marker = base / "PWNED"
    odd = base / f"venv $(touch {marker}) `touch {marker}`; touch {marker}" / "bin"
    odd.mkdir(parents=True)
    (odd / "python").symlink_to(remote.python)
    reply = remote.executor.run_python(str(odd / "python"), "echo", {"a": 1}, timeout=30)
    assert reply.facts["request"] == {"a": 1}
    assert reply.python["executable"] == str(odd / "python")
    assert not marker.exists()
