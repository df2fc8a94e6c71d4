"""A run stopped by Ctrl-C, SIGTERM or SIGHUP still prints what it had gathered.

``probe``: the facts that finished before the signal (the file probe: the architecture) are
profiled and printed, text or ``--json`` (a profile document with an ``interrupted`` finding
and an ``error`` member naming the signal), and the exit code is 128 + the signal. The
partial profile is never cached: the next run probes again. ``health``: the hosts that finished
are reported, the others marked as not checked, and the run is not stored in the history.
Cleanup (no process, ControlMaster or temp dir left) is tests/faults/test_signals.py's.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import SESSION_TMP
from tests.faults import test_signals
from tests.faults.conftest import pids_alive, tokenizer_model
from tests.faults.test_signals import (
    _assert_nothing_left,
    _assert_signal_error,
    _openssh_config,
    _start,
    _started,
    _target,
    _wait_for,
)

# The signal tests' fixture, shared: the run's TMPDIR (its cache dir is named after it), and what
# a failed run left (its CLI, a ControlMaster) killed afterwards.
run_tmp = test_signals.run_tmp

pytestmark = pytest.mark.ssh

# signal -> (its number, exit code, what the error line says, the --json error code, the transport)
CASES = {"SIGTERM": (signal.SIGTERM, 143, "terminated by SIGTERM", "terminated", "ssh"),
         "SIGINT": (signal.SIGINT, 130, "interrupted", "interrupted", "openssh"),
         "SIGHUP": (signal.SIGHUP, 129, "terminated by SIGHUP", "terminated", "local")}


@pytest.fixture(scope="module")
def slow_model(kimi_model: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A model whose tokenizer writes its pid to the pidfile, then sleeps until killed."""
    base = tmp_path_factory.mktemp("slow")
    pidfile = base / "pids"
    return tokenizer_model(kimi_model, base / "slow-model", "time.sleep(10**6)", pidfile), pidfile


def _probe(target: list[str], model: Path, venv: Path, *extra: str) -> list[str]:
    return ["probe", *target, "--model", str(model), "--venv", str(venv), "--timeout", "90", "--no-model-code",
            *extra]


def _stop_while_the_tokenizer_loads(args: list[str], pidfile: Path, run_tmp: Path, signum: int,
                                    loads: int = 1) -> subprocess.Popen[str]:
    proc = _start(args, run_tmp)
    _wait_for(lambda: _started(pidfile, loads), "the tokenizer started", proc)
    proc.send_signal(signum)
    return proc


def _cache_entries(run_tmp: Path) -> list[Path]:
    root = SESSION_TMP / f"cache-signals-{run_tmp.name}"  # the cache dir _start gives the run
    return sorted(root.rglob("*.json")) if root.exists() else []


@pytest.mark.parametrize("name", sorted(CASES))
def test_probe_json_keeps_the_file_facts(name, sshd, client_keys, slow_model, venv_full, tmp_path, run_tmp):
    model, pidfile = slow_model
    pidfile.unlink(missing_ok=True)
    signum, code, said, error_code, transport = CASES[name]
    args = _probe(_target(transport, sshd, client_keys, tmp_path), model, venv_full, "--json")
    proc = _stop_while_the_tokenizer_loads(args, pidfile, run_tmp, signum)
    out, _err = _assert_signal_error(proc, said, code)
    document = json.loads(out)  # one document: the profile, not an error document
    assert document["schema"] == "introspect.profile/v1", document.get("schema")
    assert document["architecture"]["num_layers"] == 61  # the file probe had finished: kept
    assert document["error"]["code"] == error_code and document["error"]["exit_code"] == code
    message = document["error"]["message"]
    assert message.startswith(said) and message.endswith("; remote probes were stopped"), message
    (finding,) = [f for f in document["findings"] if f["code"] == "interrupted"]
    assert finding["severity"] == "error" and "remote probes were stopped" in finding["message"]
    stopped = [f for f in document["findings"] if f["code"].startswith("tokenizer-")]
    assert stopped and "did not finish" in stopped[0]["message"], document["findings"]
    assert _cache_entries(run_tmp) == [], "the partial profile was written to the result cache"
    _assert_nothing_left(run_tmp, pidfile)


def test_a_stopped_probe_is_never_served_from_the_cache(sshd, client_keys, slow_model, kimi_model, venv_full,
                                                         tmp_path, run_tmp):
    model, pidfile = slow_model
    pidfile.unlink(missing_ok=True)
    args = _probe(_target("ssh", sshd, client_keys, tmp_path), model, venv_full, "--json")
    _assert_signal_error(_stop_while_the_tokenizer_loads(args, pidfile, run_tmp, signal.SIGTERM), "SIGTERM", 143)
    # The control: in this cache dir, a run that completes is stored.
    done = _start(_probe(_target("ssh", sshd, client_keys, tmp_path), kimi_model, venv_full, "--no-tokenizer"),
                  run_tmp)
    _out, err = done.communicate(timeout=120)
    assert done.returncode == 0 and len(_cache_entries(run_tmp)) == 1, (done.returncode, err[-2000:])
    # The same probe again: a miss (its tokenizer loads again), not the partial profile served as a hit.
    again = _stop_while_the_tokenizer_loads(args, pidfile, run_tmp, signal.SIGTERM, loads=2)
    out, _err = _assert_signal_error(again, "SIGTERM", 143)
    assert json.loads(out)["architecture"]["num_layers"] == 61
    assert len(_cache_entries(run_tmp)) == 1
    _assert_nothing_left(run_tmp, pidfile)


def test_probe_text_prints_the_report_then_the_error(sshd, client_keys, slow_model, venv_full, tmp_path, run_tmp):
    model, pidfile = slow_model
    pidfile.unlink(missing_ok=True)
    args = _probe(_target("ssh", sshd, client_keys, tmp_path), model, venv_full)
    proc = _stop_while_the_tokenizer_loads(args, pidfile, run_tmp, signal.SIGINT)
    out, err = _assert_signal_error(proc, "interrupted", 130)
    assert "kimi_k25" in out and "61" in out, out[-3000:]  # the report of the file facts
    assert "remote probes were stopped" in out, out[-3000:]  # its finding
    assert not out.lstrip().startswith("{")
    _assert_nothing_left(run_tmp, pidfile)


def _lines(stream, sink: list[str]) -> threading.Thread:
    def read() -> None:
        for line in stream:
            sink.append(line)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def test_health_reports_the_hosts_that_finished(sshd, client_keys, slow_model, kimi_model, venv_full, tmp_path,
                                                run_tmp):
    model, pidfile = slow_model
    pidfile.unlink(missing_ok=True)
    url = f"openssh://{sshd.address}:{sshd.port}"
    hosts = {"fast0": {"url": url, "venvs": [{"path": str(venv_full), "models": [str(kimi_model)]}]},
             "fast1": {"url": url, "venvs": [{"path": str(venv_full), "models": [str(kimi_model)]}]},
             "slow": {"url": url, "venvs": [{"path": str(venv_full), "models": [str(model)]}]}}
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text(yaml.safe_dump({"hosts": hosts}))
    db = tmp_path / "h.sqlite3"
    proc = _start(["health", "--hosts", str(inventory), "--db", str(db), "--ssh-config",
                   str(_openssh_config(tmp_path, client_keys)), "--timeout", "90", "--json"], run_tmp)
    progress: list[str] = []
    reader = _lines(proc.stderr, progress)  # one plain line per finished host (stderr is no terminal)
    _wait_for(lambda: _started(pidfile) and sum("] fast" in line for line in progress) == 2,
              "the fast hosts finished while the slow one loads", proc, timeout=180)
    printed: list[str] = []
    writer = _lines(proc.stdout, printed)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 143, ("".join(printed)[-1000:], "".join(progress)[-2000:])
    reader.join(10)
    writer.join(10)
    out = "".join(printed)
    err = "".join(progress)
    assert "Traceback" not in err and [line for line in err.splitlines() if line.startswith("error: ")] == [
        "error: terminated by SIGTERM; remote probes were stopped"], err
    assert any(line.startswith("warning: history not recorded") for line in err.splitlines()), err
    document = json.loads(out)
    assert document["schema"] == "introspect.health/v1" and document["error"]["exit_code"] == 143
    by_name = {h["name"]: h for h in document["hosts"]}
    for name in ("fast0", "fast1"):  # finished before the signal: their full results
        assert by_name[name]["reachable"] is True
        (venv,) = by_name[name]["venvs"]
        assert any(c["check"].startswith("tokenizer:") and c["status"] == "pass" for c in venv["checks"]), venv["checks"]
    slow = by_name["slow"]
    assert slow["reachable"] is None and slow["venvs"][0]["checks"] == []  # not checked: unknown
    (check,) = slow["checks"]
    assert check["check"] == "interrupted" and "SIGTERM" in check["message"], check
    assert document["run_id"] is None and document["history"]["recorded"] is False
    if db.exists():
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT COUNT(*) FROM runs").fetchone() == (0,)
    time.sleep(0.2)
    _assert_nothing_left(run_tmp, pidfile)


def test_fleet_probe_prints_the_hosts_that_finished(sshd, client_keys, kimi_model, venv_full, tmp_path, run_tmp):
    """``probe --all-hosts``: a signal keeps the profiles of the hosts that finished; the host still
    being probed is 'not probed' (no profile), and the run exits 128 + the signal."""
    pidfile, finished = tmp_path / "slow-pids", tmp_path / "finished"

    def venv(name: str, body: str) -> str:  # a venv whose python is a wrapper (the probe sees it as the venv's)
        path = tmp_path / name
        (path / "bin").mkdir(parents=True)
        (path / "bin" / "python").write_text(f"#!/bin/sh\n{body}\n")
        (path / "bin" / "python").chmod(0o755)
        return str(path)

    # One session per host (its tasks are one batch): a fast host's wrapper notes when its probe
    # has answered; the slow one never answers.
    fast = [venv(f"fast{i}", f'{venv_full}/bin/python "$@"; s=$?; echo fast{i} >> {finished}; exit $s')
            for i in range(2)]
    slow = venv("slow", f"echo $$ >> {pidfile}\nexec sleep 600")
    url = f"openssh://{sshd.address}:{sshd.port}"
    hosts = {"fast0": {"url": url, "venvs": [{"path": fast[0]}]},
             "fast1": {"url": url, "venvs": [{"path": fast[1]}]},
             "slow": {"url": url, "venvs": [{"path": slow}]}}
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text(yaml.safe_dump({"hosts": hosts}))
    proc = _start(["probe", "--all-hosts", "--hosts", str(inventory), "--model", str(kimi_model), "--no-tokenizer",
                   "--no-model-code", "--ssh-config", str(_openssh_config(tmp_path, client_keys)), "--timeout", "90",
                   "--json"], run_tmp)
    progress: list[str] = []
    reader = _lines(proc.stderr, progress)
    printed: list[str] = []
    writer = _lines(proc.stdout, printed)
    _wait_for(lambda: _started(pidfile) and finished.exists() and len(finished.read_text().split()) == 2,
              "the fast hosts answered while the slow one hangs", proc, timeout=120)
    time.sleep(2)  # their replies profiled on the controller
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 143, ("".join(printed)[-1000:], "".join(progress)[-2000:])
    reader.join(10)
    writer.join(10)
    err = "".join(progress)
    assert "Traceback" not in err and [line for line in err.splitlines() if line.startswith("error: ")] == [
        "error: terminated by SIGTERM; remote probes were stopped"], err
    document = json.loads("".join(printed))
    assert document["schema"] == "introspect.fleet-profiles/v1" and document["error"]["exit_code"] == 143
    by_name = {h["host"]: h for h in document["hosts"]}
    for name in ("fast0", "fast1"):
        assert by_name[name]["profile"]["architecture"]["num_layers"] == 61, by_name[name]["error"]
    slow = by_name["slow"]
    assert slow["profile"] is None and slow["exit_code"] == 143
    assert slow["error"]["message"] == "not probed: the run was terminated by SIGTERM before this host finished"
    time.sleep(0.2)
    # No master, ControlPath dir or temp file of this run is left. The slow host's stand-in
    # interpreter is a bare `sleep`, which (unlike the probe) does not watch its stdin: ending it
    # is this test's cleanup, not the CLI's.
    _assert_nothing_left(run_tmp, None)
    for pid in pids_alive(pidfile):
        os.kill(pid, signal.SIGKILL)
