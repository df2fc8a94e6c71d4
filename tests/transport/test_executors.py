"""One executor interface, every transport: the same behaviour on every registered scheme.

The executor fixture is parametrized over ``introspect.transport.registry.TRANSPORTS``:
a new transport is tested here as soon as it is registered, and fails until
``SETTINGS`` below says how to reach a target for it on this machine.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from introspect.errors import InterpreterError, ProtocolError
from introspect.transport import shipping
from introspect.transport.base import Executor, Target
from introspect.transport.hostkeys import KnownHosts
from introspect.transport.registry import TRANSPORTS, create_executor
from introspect.transport.settings import ConnectionSettings
from introspect.transport.ssh import SSHExecutor, SSHTarget

PY = os.path.realpath(sys.executable)
HOSTILE = "x$(touch {m})'\"`touch {m}`;\n touch {m} && echo"


def _local(request: pytest.FixtureRequest) -> ConnectionSettings:
    return ConnectionSettings("local")


def _ssh(request: pytest.FixtureRequest) -> ConnectionSettings:
    sshd = request.getfixturevalue("sshd")  # the loopback OpenSSH server
    keys = request.getfixturevalue("client_keys")
    return ConnectionSettings("ssh", host=sshd.address, port=sshd.port, identity=str(keys.key),
                              ssh_config="/dev/null", known_hosts=str(keys.known_hosts))


# scheme -> how to reach a target of that transport from this machine.
SETTINGS = {"local": _local, "ssh": _ssh}


@pytest.fixture(params=sorted(TRANSPORTS))
def executor(request: pytest.FixtureRequest) -> Iterator[Executor]:
    settings = SETTINGS.get(request.param)
    if settings is None:
        pytest.fail(f"transport {request.param!r} is registered but SETTINGS has no target for it")
    ex = create_executor(settings(request))
    with ex:
        yield ex


def test_every_executor_has_a_typed_target(executor):
    assert isinstance(executor.target, Target)
    assert executor.target.scheme in TRANSPORTS
    assert executor.label == executor.target.label
    with pytest.raises(dataclasses.FrozenInstanceError):
        executor.target.host = "elsewhere"  # type: ignore[misc]


def test_megabytes_on_both_streams_do_not_deadlock(executor):
    reply = executor.run_python(PY, "echo", {"pad": 6 * 1024 * 1024}, timeout=60)
    assert len(reply.facts["pad"]) == 6 * 1024 * 1024
    assert reply.errors == []


def test_request_travels_as_data(executor, tmp_path):
    marker = tmp_path / "MARK"
    text = HOSTILE.format(m=marker)
    reply = executor.run_python(PY, "echo", {"text": text}, timeout=30)
    assert reply.facts["request"]["text"] == text
    assert not marker.exists()


def test_isolated_task_is_killed_with_its_group_at_its_deadline(executor):
    reply = executor.run_python(PY, "echo", {"sleep": 60}, timeout=2, isolate=True)
    assert reply.facts is None
    assert reply.errors[0]["type"] == "timeout"
    assert reply.supervisor["temp_dir_removed"] is True


def test_missing_interpreter_is_a_clear_error(executor, tmp_path):
    with pytest.raises(InterpreterError) as info:
        executor.run_python(str(tmp_path / "venv" / "bin" / "python"), "echo", {}, timeout=10)
    assert "venv" in info.value.message and info.value.hint


def test_banner_noise_on_stdout_cannot_corrupt_the_reply(executor, tmp_path):
    noisy = tmp_path / "noisy-python"
    noisy.write_text(f"#!/bin/sh\necho 'Welcome to GPU node 7 <<<INTROSPECT:'\nexec {PY} \"$@\"\n")
    noisy.chmod(0o755)
    reply = executor.run_python(str(noisy), "echo", {"a": 1}, timeout=30)
    assert reply.facts["request"] == {"a": 1}


def test_unknown_task_is_an_error_record(executor):
    reply = executor.run_python(PY, "no-such-task", {}, timeout=10)
    assert reply.errors[0]["type"] == "unknown-task"


@pytest.mark.parametrize("version", ["3.8"])
def test_remote_side_runs_on_old_python(executor, version):
    # pyenv's shims answer for versions that are not selected: take the real binary.
    candidates = sorted(Path(os.path.expanduser("~/.pyenv/versions")).glob(f"{version}.*/bin/python"))
    candidates += [Path(p) for p in (f"/usr/bin/python{version}",) if os.path.exists(p)]
    old = str(candidates[0]) if candidates else None
    if not old:
        pytest.skip(f"no Python {version} on this machine")
    repo = Path(__file__).resolve().parent.parent.parent
    reply = executor.run_python(str(old), "model", {"model_path": str(repo / "tests/data/realconfigs/gpt2")},
                                timeout=60)
    assert reply.python["version"][:2] == [3, 8]
    assert reply.facts["files"]["config"]["model_type"] == "gpt2"


def test_protocol_mismatch_is_refused():
    body = b'\n<<<INTROSPECT:BEGIN>>>\n{"protocol": 999, "facts": {}}\n<<<INTROSPECT:END>>>\n'
    with pytest.raises(ProtocolError):
        shipping.parse_reply(body)


def test_probe_uses_one_connection_and_two_concurrent_channels(sshd, client_keys, kimi_model, venv_full):
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
    assert len(spawned) == 2  # the file probe and the tokenizer probe, one channel each
    assert raw["tokenizer_probe"]["loaded"] is True and raw["files"]["status"] == "ok"
