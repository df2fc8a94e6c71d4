"""One executor contract, every transport (testinfra-style: one suite, every backend).

The ``remote`` fixture is parametrized over ``introspect.transport.registry.TRANSPORTS``:
a new transport is tested here as soon as it is registered, and fails until ``CASES``
says how to reach a target for it on this machine. Every executor is built the way the
CLI builds it, through ``create_executor(ConnectionSettings)``.

- ``local``; ``ssh`` (paramiko) and ``openssh`` (the system ssh client) against the
  loopback sshd fixture;
- ``podman``: a real container (tests/podman_host.py), skipped with podman's own words
  where containers cannot run; ``docker``: the real docker CLI on the same container,
  through podman's Docker-compatible API;
- ``lxc``: a real LXC container (tests/lxc_host.py) entered with the real lxc-attach;
- ``kubectl-standin``, ``pct-standin``, ``lxc-standin``, ``pct-via-openssh-standin``: the
  executors' real argv, run by a stand-in client that execs the command here
  (tests/transport/standins.py), because no cluster or Proxmox node can exist on a test
  machine. Error cases run the real clients (test_exec_clients.py).

Each case puts its files under ``shared``, which the target sees at the same path.

Sampled by default (``INTROSPECT_FULL_MATRIX=1`` runs every test on every case): the whole
contract runs on each transport whose process code differs (local, ssh, openssh, podman,
docker, lxc). A stand-in case shares its process code with one of those (a local client in
its own process group, ``exec_cli.ClientProcess``, as podman, docker and lxc-attach; or the
openssh process of its ``via`` hop), so it runs what its own code decides, ``STANDIN_TESTS``:
its typed target, its client argv and state query, a request and an odd interpreter path
through its argv prefix end to end, and a missing interpreter's error through its rules.
"""

from __future__ import annotations

import dataclasses
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

from introspect.errors import InterpreterError, ProtocolError
from introspect.transport import shipping
from introspect.transport.base import Executor, Target
from introspect.transport.hostkeys import KnownHosts
from introspect.transport.hostspec import parse_host
from introspect.transport.registry import TRANSPORTS, create_executor, settings_for_spec
from introspect.transport.settings import ConnectionSettings
from introspect.transport.ssh import SSHExecutor, SSHTarget
from tests import podman_host
from tests.transport.standins import make_standin, seen

PY = os.path.realpath(sys.executable)
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


def openssh_config(tmp: Path, keys) -> Path:
    config = tmp / "ssh_config"
    config.write_text(f"Host *\n  IdentityFile {keys.key}\n  IdentitiesOnly yes\n  IdentityAgent none\n"
                      f"  UserKnownHostsFile {keys.known_hosts}\n")
    return config


def _url(text: str, **over: object) -> ConnectionSettings:
    return settings_for_spec(parse_host(text), ConnectionSettings(), **over)


def _build(case: str, request: pytest.FixtureRequest, tmp: Path, monkeypatch: pytest.MonkeyPatch
           ) -> tuple[Executor, str, Callable[[], set[str]], Path | None]:
    """(executor, the target's python, what lists the target's files, the stand-in's argv log)."""
    nothing: Callable[[], set[str]] = set
    if case == "local":
        return create_executor(ConnectionSettings("local")), PY, nothing, None
    if case in ("ssh", "openssh", "pct-via-openssh-standin"):
        sshd, keys = request.getfixturevalue("sshd"), request.getfixturevalue("client_keys")
        if case == "ssh":
            return create_executor(_url(f"ssh://{sshd.address}:{sshd.port}", identity=str(keys.key),
                                        ssh_config="/dev/null", known_hosts=str(keys.known_hosts))), PY, nothing, None
        config = str(openssh_config(tmp, keys))
        if case == "openssh":
            return create_executor(_url(f"openssh://{sshd.address}:{sshd.port}", ssh_config=config)), PY, nothing, None
        # pct on a Proxmox host reached over ssh: the stand-in runs on the "Proxmox host" (loopback sshd).
        program, log = make_standin(tmp, "pct")
        pct = create_executor(_url(f"pct://200?via=openssh://{sshd.address}:{sshd.port}", ssh_config=config))
        pct.binary = str(program)  # type: ignore[attr-defined]  # the Proxmox host's pct
        return pct, PY, nothing, log
    if case in ("podman", "docker"):
        container = request.getfixturevalue("podman_container")
        if case == "docker":
            # The real docker CLI, talking to podman's Docker-compatible API about the same container.
            monkeypatch.setenv("DOCKER_HOST", request.getfixturevalue("docker_host"))
        return create_executor(_url(f"{case}://{container.name}")), container.python, container.diff, None
    if case == "lxc":
        lxc = request.getfixturevalue("lxc_container")
        executor = create_executor(_url(f"lxc://{lxc.name}?client=lxc-attach"))
        executor.lxcpath = str(lxc.lxcpath)  # type: ignore[attr-defined]  # the fixture's private LXC path
        return executor, lxc.python, lxc.files, None
    # Stand-ins, found first on PATH as the real client would be.
    client = {"kubectl-standin": "kubectl", "pct-standin": "pct", "lxc-standin": "lxc-attach"}[case]
    program, log = make_standin(tmp / "bin", client)
    if client == "lxc-attach":
        make_standin(tmp / "bin", "lxc-info")  # the state query goes to lxc-attach's sibling
    monkeypatch.setenv("PATH", f"{program.parent}{os.pathsep}{os.environ['PATH']}")
    url = {"kubectl": "kubectl://serving/vllm-0/engine?context=gpu-east", "pct": "pct://200",
           "lxc-attach": "lxc://ct200?client=lxc-attach"}[client]
    return create_executor(_url(url)), PY, nothing, log


# scheme -> the cases that reach a target of that transport from this machine.
CASES = {
    "local": ["local"], "ssh": ["ssh"], "openssh": ["openssh"], "podman": ["podman"], "docker": ["docker"],
    "lxc": ["lxc", "lxc-standin"], "kubectl": ["kubectl-standin"],
    "pct": ["pct-standin", "pct-via-openssh-standin"],
}
PARAMS = [pytest.param((scheme, case), id=case) for scheme in sorted(TRANSPORTS)
          for case in CASES.get(scheme, [f"{scheme}-has-no-case"])]
STANDINS = {"kubectl-standin", "pct-standin", "lxc-standin", "pct-via-openssh-standin"}
# What a stand-in's own code decides (the module docstring says why the rest is not run on them).
STANDIN_TESTS = {"test_every_executor_has_a_typed_target", "test_the_client_argv_is_the_documented_one",
                 "test_request_travels_as_data", "test_interpreter_path_travels_as_data",
                 "test_missing_interpreter_is_a_clear_error"}
FULL_MATRIX = os.environ.get("INTROSPECT_FULL_MATRIX") == "1"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The ``remote`` cases of one test: all of them, less the stand-ins where it is not sampled."""
    if "remote" not in metafunc.fixturenames:
        return
    sampled = FULL_MATRIX or metafunc.function.__name__ in STANDIN_TESTS
    metafunc.parametrize("remote", [p for p in PARAMS if sampled or p.values[0][1] not in STANDINS],
                         indirect=True)


@pytest.fixture()
def remote(request: pytest.FixtureRequest, tmp_path: Path, shared_dir: Path,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[Remote]:
    scheme, case = request.param
    if scheme not in CASES:
        pytest.fail(f"transport {scheme!r} is registered but CASES has no target for it")
    executor, python, changed, log = _build(case, request, tmp_path, monkeypatch)
    # local and ssh targets are this machine: any directory is shared with them.
    shared = shared_dir if case not in ("local", "ssh") else tmp_path
    with executor:
        yield Remote(case, executor, python, shared, changed, log)


def test_every_executor_has_a_typed_target(remote: Remote) -> None:
    target = remote.executor.target
    assert isinstance(target, Target)
    assert target.scheme in TRANSPORTS and remote.name.startswith(target.scheme)
    assert remote.executor.label == target.label
    with pytest.raises(dataclasses.FrozenInstanceError):
        target.host = "elsewhere"  # type: ignore[misc]


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
    result = remote.executor.execute(shipping.command_argv(str(python)), payload, timeout=2)
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
    if remote.argv_log is None:
        return
    expected = {
        "kubectl-standin": ["--context", "gpu-east", "exec", "-i", "-n", "serving", "-c", "engine", "vllm-0"],
        "pct-standin": ["exec", "200"],
        "pct-via-openssh-standin": ["exec", "200"],
        "lxc-standin": ["-n", "ct200"],
    }[remote.name]
    assert seen(remote.argv_log)[-1] == expected
    queries = {
        "kubectl-standin": ["--context", "gpu-east", "get", "pod", "vllm-0", "-o", "jsonpath={.status.phase}",
                            "--request-timeout=10s", "-n", "serving"],
        "pct-standin": ["status", "200"],
        "pct-via-openssh-standin": ["status", "200"],
        "lxc-standin": ["-n", "ct200", "-s", "-H"],
    }
    log = remote.argv_log.with_name("lxc-info.argv.jsonl") if remote.name == "lxc-standin" else remote.argv_log
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


def test_protocol_mismatch_is_refused() -> None:
    body = b'\n<<<INTROSPECT:BEGIN>>>\n{"protocol": 999, "facts": {}}\n<<<INTROSPECT:END>>>\n'
    with pytest.raises(ProtocolError):
        shipping.parse_reply(body)


def test_probe_uses_one_connection_and_one_session(sshd, client_keys, kimi_model, venv_full):
    from introspect.client.model import ProbeOptions, gather

    ex = SSHExecutor(SSHTarget(host=sshd.address, port=sshd.port, identity=str(client_keys.key),
                               ssh_config="/dev/null"), KnownHosts(client_keys.known_hosts))
    spawned: list[list[str]] = []
    original = ex._spawn

    def counting_spawn(argv):
        spawned.append(argv)
        return original(argv)

    ex._spawn = counting_spawn
    with ex:
        raw = gather(ex, ProbeOptions(model_path=str(kimi_model), venv=str(venv_full)),
                     {"host": sshd.address, "model_path": str(kimi_model)})
    assert ex.connections_opened == 1
    # The file probe, the tokenizer probe and the model-code witness share one interpreter,
    # so they go in one batch: one exec, one run of the login shell's rc files.
    assert len(spawned) == 1
    assert raw["model_code_probe"] is not None
    assert raw["tokenizer_probe"]["loaded"] is True and raw["files"]["status"] == "ok"


def test_the_ssh_socket_sends_small_packets_at_once(sshd, client_keys):
    """TCP_NODELAY: without it each channel-open or exec request waits for the peer's delayed ACK."""
    import socket

    ex = SSHExecutor(SSHTarget(host=sshd.address, port=sshd.port, identity=str(client_keys.key),
                               ssh_config="/dev/null"), KnownHosts(client_keys.known_hosts))
    with ex:
        sock = ex._conn.get_transport().sock
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
