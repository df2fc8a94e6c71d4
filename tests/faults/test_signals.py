"""SIGTERM (systemd stop, timeout(1)) and SIGHUP (a closed terminal) are handled like Ctrl-C.

On every transport: the exit code is 128 + the signal's number (143, 129; Ctrl-C's 130), one
``error:`` line naming the signal and a ``fix:`` line, ``--json`` still prints one valid
document, and nothing is left behind: no ControlMaster ``ssh -N`` (re-parented to init, it
would live on), no ControlPath temp dir, no remote tokenizer process. Also here: a connection
that the host resets right after authentication is "unreachable" (exit 3) for ``health`` as
it is for ``probe``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from introspect import interrupts
from introspect.errors import ConnectionLost
from tests.conftest import NEUTRAL_CWD, REPO, SESSION_TMP, assert_clean_error, run_cli, ssh_flags
from tests.faults.conftest import kill_group_quietly, pids_alive, tokenizer_model
from tests.sshd_server import ClientKeys, SSHServer, start_sshd, trust

pytestmark = pytest.mark.ssh

_STARTED: list[subprocess.Popen[str]] = []
SIGNALS = {"SIGTERM": (signal.SIGTERM, 143), "SIGHUP": (signal.SIGHUP, 129)}


def _openssh_config(tmp: Path, keys: ClientKeys, extra: str = "") -> Path:
    config = tmp / "ssh_config"
    config.write_text(f"Host *\n  IdentityFile {keys.key}\n  IdentitiesOnly yes\n  IdentityAgent none\n"
                      f"  UserKnownHostsFile {keys.known_hosts}\n{extra}")
    return config


def _target(transport: str, server: SSHServer, keys: ClientKeys, tmp: Path) -> list[str]:
    if transport == "local":
        return []
    if transport == "ssh":
        return ssh_flags(server, keys)
    return ["--host", f"openssh://{server.address}:{server.port}", "--ssh-config", str(_openssh_config(tmp, keys))]


@pytest.fixture()
def run_tmp() -> Iterator[Path]:
    """The run's TMPDIR: short, as introspect puts ControlPath dirs only under a TMPDIR that leaves
    room for a socket name (else under /tmp, where this test could not tell them from others')."""
    path = Path(tempfile.mkdtemp(prefix="sig-", dir="/tmp"))
    yield path
    for proc in _STARTED:
        if proc.poll() is None:  # a failed test's CLI: it must not outlive the test
            proc.kill()
            proc.communicate()
    _STARTED.clear()
    for line in _processes_under(path):  # what a failing run left: not for the next test to find
        kill_group_quietly(int(line.split()[0]))
    shutil.rmtree(path, ignore_errors=True)


def _start(args: list[str], tmpdir: Path) -> subprocess.Popen[str]:
    """The CLI in the background, its temp files (ControlPath dirs) under its own ``tmpdir``."""
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TMPDIR=str(tmpdir),
               INTROSPECT_CACHE_DIR=str(SESSION_TMP / f"cache-signals-{tmpdir.name}"))
    proc = subprocess.Popen([sys.executable, "-m", "introspect.cli.main", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=NEUTRAL_CWD, env=env)
    _STARTED.append(proc)
    return proc


def _wait_for(condition, what: str, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the CLI ended (exit {proc.returncode}) before {what}: {err[-2000:]} {out[-500:]}")
        assert time.monotonic() < deadline, f"{what} never happened"
        time.sleep(0.1)


def _started(pidfile: Path, count: int = 1) -> bool:
    return pidfile.exists() and len(pidfile.read_text().split()) >= count


def _processes_under(tmpdir: Path) -> list[str]:
    """Processes whose command line names ``tmpdir`` (a ControlMaster's ControlPath is in it)."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid,stat,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines()
            if str(tmpdir) in line and "ps -ww" not in line and line.split()[1][:1] not in ("Z", "X")]


def _assert_nothing_left(tmpdir: Path, pidfile: Path | None) -> None:
    deadline = time.monotonic() + 5  # a process killed a moment ago may still be exiting
    while time.monotonic() < deadline and (_processes_under(tmpdir) or pidfile and pids_alive(pidfile)):
        time.sleep(0.1)
    assert not _processes_under(tmpdir), "processes left running (ControlMaster?)"
    # ControlPath dirs; for a local run also the probe's own temp dirs (its TMPDIR is ours).
    assert not list(tmpdir.iterdir()), f"temp files left behind: {list(tmpdir.iterdir())}"
    if pidfile is not None:
        assert not pids_alive(pidfile), "the remote tokenizer process survived the signal"


def _assert_signal_error(proc: subprocess.Popen[str], name: str, code: int) -> tuple[str, str]:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, (proc.returncode, out[-1000:], err[-2000:])
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and name in errors[0], err
    assert any(line.startswith("fix: ") for line in err.splitlines()), err
    return out, err


@pytest.fixture(scope="module")
def slow_model(kimi_model: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A model whose tokenizer writes its pid to the pidfile, then sleeps until killed."""
    base = tmp_path_factory.mktemp("slow")
    pidfile = base / "pids"
    return tokenizer_model(kimi_model, base / "slow-model", "time.sleep(10**6)", pidfile), pidfile


@pytest.mark.parametrize("name", sorted(SIGNALS))
@pytest.mark.parametrize("transport", ["openssh", "ssh", "local"])
def test_signal_while_the_tokenizer_loads_stops_everything(transport, name, sshd, client_keys, slow_model,
                                                           venv_full, tmp_path, run_tmp):
    model, pidfile = slow_model
    pidfile.unlink(missing_ok=True)
    signum, code = SIGNALS[name]
    proc = _start(["probe", *_target(transport, sshd, client_keys, tmp_path), "--model", str(model),
                   "--venv", str(venv_full), "--timeout", "90", "--no-model-code", "--json"], run_tmp)
    _wait_for(lambda: _started(pidfile), "the tokenizer started", proc)
    if transport == "openssh":
        assert _processes_under(run_tmp), "no ControlMaster under the run's TMPDIR: the check is blind"
    proc.send_signal(signum)
    out, _err = _assert_signal_error(proc, name, code)
    document = json.loads(out)  # one valid document, as for Ctrl-C
    assert document["error"]["exit_code"] == code and name in document["error"]["message"]
    _assert_nothing_left(run_tmp, pidfile)


@pytest.mark.parametrize("command", ["probe", "health"])
def test_sigterm_during_the_openssh_login_leaves_no_master(command, client_keys, kimi_model, venv_full, tmp_path,
                                                          run_tmp):
    """The signal lands while the ControlMasters are still logging in (a ProxyCommand that never
    connects; for health, in the fleet's worker threads, which a signal never interrupts): every
    master and its ProxyCommand are stopped and the ControlPath dirs removed all the same, at once."""
    config = _openssh_config(tmp_path, client_keys, f"  ProxyCommand /bin/sh -c 'sleep 120; : {run_tmp}'\n")
    if command == "probe":
        args = ["probe", "--host", "openssh://127.0.0.2:22", "--model", str(kimi_model), "--venv", str(venv_full)]
        masters = 1
    else:
        inventory = tmp_path / "hosts.yaml"
        inventory.write_text(yaml.safe_dump({"hosts": {f"gpu{i}": {"url": f"openssh://127.0.0.{20 + i}:22",
                                                                   "venvs": [{"path": str(venv_full)}]}
                                                       for i in range(3)}}))
        args = ["health", "--hosts", str(inventory), "--db", str(tmp_path / "h.sqlite3")]
        masters = 3
    proc = _start([*args, "--ssh-config", str(config), "--connect-timeout", "60"], run_tmp)
    _wait_for(lambda: sum(" -N " in line for line in _processes_under(run_tmp)) >= masters,
              "the masters started", proc)
    time.sleep(0.3)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _assert_signal_error(proc, "SIGTERM", 143)
    assert time.monotonic() - sent < 15, "the run did not stop promptly"
    _assert_nothing_left(run_tmp, None)  # the masters, and their ProxyCommands (named with run_tmp)


@pytest.mark.parametrize("name", sorted(SIGNALS))
def test_signal_during_health_over_three_openssh_hosts(name, sshd, client_keys, slow_model, venv_full, tmp_path, run_tmp):
    model, pidfile = slow_model
    pidfile.unlink(missing_ok=True)
    signum, code = SIGNALS[name]
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text(yaml.safe_dump({"hosts": {
        f"gpu{i}": {"url": f"openssh://{sshd.address}:{sshd.port}",
                    "venvs": [{"path": str(venv_full), "models": [str(model)]}]} for i in range(3)}}))
    proc = _start(["health", "--hosts", str(inventory), "--db", str(tmp_path / "h.sqlite3"), "--ssh-config",
                   str(_openssh_config(tmp_path, client_keys)), "--timeout", "90", "--json"], run_tmp)
    _wait_for(lambda: _started(pidfile, 3), "three tokenizers started", proc)
    assert len(_processes_under(run_tmp)) >= 3, "fewer ControlMasters than hosts: the check is blind"
    proc.send_signal(signum)
    out, _err = _assert_signal_error(proc, name, code)
    assert json.loads(out)["error"]["exit_code"] == code
    _assert_nothing_left(run_tmp, pidfile)


# -- the handler itself ----------------------------------------------------------------------------

def test_a_signal_while_a_child_is_being_recorded_is_raised_after_it():
    before = signal.getsignal(signal.SIGTERM)
    reached = False
    with interrupts.handling():
        with pytest.raises(interrupts.Terminated) as caught, interrupts.deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)  # delivered here, and held back
            reached = True
        assert reached and caught.value.exit_code == 143 and caught.value.name == "SIGTERM"
        assert interrupts.stopping()
    assert signal.getsignal(signal.SIGTERM) is before  # an in-process caller gets its handlers back


def test_only_the_first_signal_raises_and_no_new_connection_follows_it():
    with interrupts.handling():
        with pytest.raises(interrupts.Terminated):
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(5)
        os.kill(os.getpid(), signal.SIGTERM)  # while the cleanup runs: ignored, not raised
        time.sleep(0.2)
        with pytest.raises(ConnectionLost, match="stopped by SIGHUP"):
            interrupts.refuse_new_work("gpu1")
    assert not interrupts.stopping()  # an API call after a stopped main() may connect again
    interrupts.refuse_new_work("gpu1")
    with interrupts.handling():  # the next run starts afresh
        assert not interrupts.stopping()
        interrupts.refuse_new_work("gpu1")


# -- a connection reset right after authentication ------------------------------------------------

@pytest.fixture()
def resetting_sshd(tmp_path: Path, client_keys: ClientKeys):
    """Accepts the key, then every session kills its own sshd session process: the connection drops."""
    server = start_sshd(tmp_path / "sshd", client_keys, address="127.0.0.11",
                        extra_config="ForceCommand kill -9 $PPID\n")
    trust(server, client_keys)
    yield server
    server.stop()


@pytest.mark.parametrize("transport", ["ssh", "openssh"])
def test_reset_after_auth_is_unreachable_for_health_as_for_probe(transport, resetting_sshd, client_keys,
                                                                 venv_full, kimi_model, tmp_path):
    target = _target(transport, resetting_sshd, client_keys, tmp_path)
    probe = run_cli("probe", *target, "--model", str(kimi_model), "--venv", str(venv_full), "--no-tokenizer",
                    timeout=120)
    assert_clean_error(probe, 3)
    host = target[1] if transport == "openssh" else f"ssh://{resetting_sshd.address}:{resetting_sshd.port}"
    entry = {"url": host, "venvs": [{"path": str(venv_full)}]}
    if transport == "ssh":
        entry["identity"] = str(client_keys.key)  # health takes no --identity flag
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text(yaml.safe_dump({"hosts": {"resets": entry}}))
    config = target[-1] if transport == "openssh" else "/dev/null"
    args = ["health", "--hosts", str(inventory), "--db", str(tmp_path / "h.sqlite3"), "--ssh-config", config,
            "--known-hosts", str(client_keys.known_hosts)]
    result = run_cli(*args, "--json", timeout=120)
    assert result.code == 3, (result.code, result.stdout[-2000:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    (report,) = result.json()["hosts"]
    assert report["reachable"] is False, report
    (reach,) = [c for c in report["checks"] if c["check"] == "reachable"]
    assert reach["status"] == "fail" and "after login" in reach["message"], reach
    assert f"ssh -p {resetting_sshd.port} {resetting_sshd.address} true" in reach["fix"], reach
    assert report["venvs"][0]["checks"] == []  # unknown, not failed
