"""Fault injection: every case asserts the exit code, a one-line error naming cause and fix,
no traceback, and the partial facts kept. The matrix is published in tests/README.md."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import NEUTRAL_CWD, REPO, assert_clean_error, run_cli, ssh_flags
from tests.faults.conftest import introspect_processes, pids_alive, tokenizer_model
from tests.fixtures.engine_venv import cache_root
from tests.fixtures.venvs import venv_python
from tests.sshd_server import free_port, start_sshd, trust

pytestmark = pytest.mark.ssh
# Where a case's subject is not the model-code witness (a tokenizer that hangs or dies, a broken
# file, a signal), the probe skips it: ~2 CPU-s of importing transformers and building the config
# class per probe. The default probe, witness included, runs in the no-trace, secrets and
# --no-remote-code cases and in two of the hostile-path cases.
NO_WITNESS = ("--no-model-code",)


def probe_args(server, client, model, venv, *extra: str, known_hosts: Path | None = None) -> list[str]:
    return ["probe", *ssh_flags(server, client, known_hosts=known_hosts), "--model", str(model),
            "--venv", str(venv), *extra]


def start_while_tokenizer_hangs(args: list[str], pidfile: Path) -> subprocess.Popen:
    """Start the CLI in the background and return once the remote tokenizer is hanging."""
    proc = subprocess.Popen([sys.executable, "-m", "introspect.cli.main", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=NEUTRAL_CWD,
                            env=dict(os.environ, PYTHONPATH=str(REPO)))
    deadline = time.monotonic() + 30
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pidfile.exists(), "the tokenizer never started"
    return proc


# -- network and authentication ------------------------------------------------------------------

def test_port_closed(client_keys, kimi_model, venv_full):
    port = free_port("127.0.0.6")
    result = run_cli("probe", "--host", "127.0.0.6", "--port", str(port), "--identity", str(client_keys.key),
                     "--known-hosts", str(client_keys.known_hosts), "--ssh-config", "/dev/null",
                     "--model", str(kimi_model), "--venv", str(venv_full), timeout=30)
    assert_clean_error(result, 3, "connection refused", "sshd")


def test_address_that_drops_packets_times_out_at_connect_deadline(dropping_address, client_keys, kimi_model):
    address, port = dropping_address
    result = run_cli("probe", "--host", address, "--port", str(port), "--identity", str(client_keys.key),
                     "--known-hosts", str(client_keys.known_hosts), "--ssh-config", "/dev/null",
                     "--connect-timeout", "2", "--model", str(kimi_model), timeout=30)
    assert_clean_error(result, 3, "timed out after 2 s")


def test_auth_refused(tmp_path, client_keys, kimi_model, venv_full):
    server = start_sshd(tmp_path / "sshd", client_keys, address="127.0.0.7", authorized=False)
    try:
        trust(server, client_keys)
        result = run_cli(*probe_args(server, client_keys, kimi_model, venv_full), timeout=60)
        assert_clean_error(result, 3, "authentication refused", "--identity")
    finally:
        server.stop()


def test_unknown_host_key(own_sshd, client_keys, kimi_model, venv_full, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    result = run_cli(*probe_args(own_sshd, client_keys, kimi_model, venv_full, known_hosts=empty))
    assert_clean_error(result, 3, "unknown host key", "SHA256:", "ssh-keyscan")


def test_changed_host_key_always_refused(tmp_path, client_keys, kimi_model, venv_full):
    first = start_sshd(tmp_path / "a", client_keys, address="127.0.0.8")
    port = first.port
    known = tmp_path / "known_hosts"
    known.write_text(first.known_hosts_line)
    first.stop()
    second = start_sshd(tmp_path / "b", client_keys, address="127.0.0.8", port=port)  # new host key
    try:
        for extra in ([], ["--accept-new"]):
            result = run_cli(*probe_args(second, client_keys, kimi_model, venv_full, *extra, known_hosts=known))
            assert_clean_error(result, 3, "HOST KEY CHANGED", "ssh-keygen -R")
        assert known.read_text() == first.known_hosts_line  # never overwritten
    finally:
        second.stop()


# -- the remote side misbehaving -------------------------------------------------------------------

def test_hung_tokenizer_is_killed_at_its_timeout(sshd, client_keys, kimi_model, venv_full, tmp_path):
    pidfile = tmp_path / "pids"
    model = tokenizer_model(kimi_model, tmp_path / "slow-model", "time.sleep(10**6)", pidfile)
    result = run_cli(*probe_args(sshd, client_keys, model, venv_full, "--timeout", "12", "--json", *NO_WITNESS),
                     timeout=60)
    assert result.code == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    profile = result.json()
    assert any(f["code"] == "probe-timeout" and "tokenizer" in f["message"] for f in profile["findings"])
    # Partial facts: architecture and the file-based tokenizer facts are all there.
    assert profile["architecture"]["num_layers"] == 61
    assert profile["tokenizer"]["source"] == "files" and profile["tokenizer"]["vocab_size"] == 163840
    time.sleep(0.5)
    assert pidfile.exists() and not pids_alive(pidfile), "the hung tokenizer process survived"
    assert not introspect_processes(venv_python(venv_full))


def test_tokenizer_process_killed_by_signal(sshd, client_keys, kimi_model, venv_full, tmp_path):
    pidfile = tmp_path / "pids"
    model = tokenizer_model(kimi_model, tmp_path / "crash-model", "os.kill(os.getpid(), 9)", pidfile)
    result = run_cli(*probe_args(sshd, client_keys, model, venv_full, "--json", *NO_WITNESS))
    assert result.code == 1
    profile = result.json()
    assert any("killed by signal SIGKILL" in f["message"] for f in profile["findings"]), profile["findings"]
    assert profile["architecture"]["attention"]["type"] == "MLA"


def test_sshd_killed_mid_probe(own_sshd, client_keys, kimi_model, venv_full, tmp_path):
    pidfile = tmp_path / "pids"
    model = tokenizer_model(kimi_model, tmp_path / "slow-model", "time.sleep(10**6)", pidfile)
    proc = start_while_tokenizer_hangs(probe_args(own_sshd, client_keys, model, venv_full, "--timeout", "60",
                                                 "--json", *NO_WITNESS), pidfile)
    own_sshd.kill()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, (out[-1000:], err[-2000:])
    assert "Traceback" not in err
    assert any(line.startswith("error: ") for line in err.splitlines())
    profile = json.loads(out)
    assert profile["architecture"]["num_layers"] == 61  # the file probe had finished: kept
    time.sleep(1)
    assert not pids_alive(pidfile), "the tokenizer kept running after its sshd died"


def test_interrupt_stops_remote_work(sshd, client_keys, kimi_model, venv_full, tmp_path):
    pidfile = tmp_path / "pids"
    model = tokenizer_model(kimi_model, tmp_path / "slow-model", "time.sleep(10**6)", pidfile)
    proc = start_while_tokenizer_hangs(probe_args(sshd, client_keys, model, venv_full, "--timeout", "60",
                                                  *NO_WITNESS), pidfile)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err and "interrupted" in err
    time.sleep(1)
    assert not pids_alive(pidfile), "Ctrl-C left the tokenizer running on the host"


def test_interpreter_too_old(sshd, client_keys, kimi_model, fake_old_python):
    result = run_cli("probe", *ssh_flags(sshd, client_keys), "--model", str(kimi_model),
                     "--python", str(fake_old_python))
    assert_clean_error(result, 2, "Python 3.6.9", "newer interpreter")


def test_dangling_venv_python(sshd, client_keys, kimi_model, tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(tmp_path / "gone" / "python3.11")
    result = run_cli("probe", *ssh_flags(sshd, client_keys), "--model", str(kimi_model), "--venv", str(venv))
    assert_clean_error(result, 2, "bin/python")


# -- bad model directories -----------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["missing", "file"])
def test_model_path_not_a_model_dir(sshd, client_keys, venv_full, tmp_path, kind):
    path = tmp_path / "model"
    if kind == "file":
        path.write_text("not a dir")
    result = run_cli("probe", *ssh_flags(sshd, client_keys), "--model", str(path), "--venv", str(venv_full),
                     "--no-tokenizer")
    assert_clean_error(result, 2, "model path")


def test_unreadable_model_dir(tmp_path, venv_full, kimi_model):
    if os.geteuid() == 0:
        pytest.skip("root reads any file; unreadable dirs are covered by the remote unit tests")
    model = tmp_path / "m"
    model.mkdir(mode=0o000)
    result = run_cli("probe", "--model", str(model), "--venv", str(venv_full), "--no-tokenizer")
    assert_clean_error(result, 2, "permission")


CONFIG_CASES = {
    "empty": b"",
    "truncated": b'{"model_type": "llama", "num_hidden_layers": 3',
    "a-list": b"[1, 2, 3]",
    "non-utf8": b'{"model_type": "\xff\xfe"}',
    # transformers reads NaN (configuration_utils.py _dict_from_json_file uses json.loads); a layer count
    # that is not a number still leaves no model to describe.
    "nan": b'{"model_type": "llama", "num_hidden_layers": NaN}',
}


@pytest.mark.parametrize("case", sorted(CONFIG_CASES) + ["64MiB"])
def test_broken_config_json_keeps_other_facts(kimi_model, venv_full, tmp_path, case):
    import shutil

    model = tmp_path / "model"
    shutil.copytree(kimi_model, model)
    if case == "64MiB":
        with open(model / "config.json", "wb") as fh:
            fh.write(b'{"pad": "' + b"x" * (64 * 1024 * 1024) + b'"}')
    else:
        (model / "config.json").write_bytes(CONFIG_CASES[case])
    result = run_cli("probe", "--model", str(model), "--venv", str(venv_full), "--json", "--no-tokenizer",
                     *NO_WITNESS)
    assert result.code == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    profile = result.json()
    assert any("config.json" in f["message"] for f in profile["findings"] if f["severity"] == "error")
    # The tokenizer files still give their facts.
    assert profile["tokenizer"]["vocab_size"] == 163840
    assert profile["tokenizer"]["bos"] == {"token": "[BOS]", "id": 163584}


@pytest.mark.parametrize("case", ["truncated-header", "absurd-length"])
def test_broken_safetensors(kimi_model, venv_full, tmp_path, case):
    import shutil
    import struct

    model = tmp_path / "model"
    shutil.copytree(kimi_model, model)
    shard = model / "model-00001-of-000001.safetensors"
    if case == "truncated-header":
        shard.write_bytes(struct.pack("<Q", 5000) + b'{"a": {"dtype": "BF16", "shape": [2, 2], "data')
    else:
        shard.write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    result = run_cli("probe", "--model", str(model), "--venv", str(venv_full), "--json", "--no-tokenizer",
                     *NO_WITNESS)
    assert result.code == 1, result.stderr[-2000:]
    profile = result.json()
    assert any("model-00001-of-000001.safetensors" in f["message"] for f in profile["findings"])
    assert profile["architecture"]["num_layers"] == 61


def test_symlink_loop_in_model_dir(kimi_model, venv_full, tmp_path):
    import shutil

    model = tmp_path / "model"
    shutil.copytree(kimi_model, model)
    (model / "loop").symlink_to(model / "loop")
    (model / "sub").mkdir()
    (model / "sub" / "up").symlink_to(model)
    result = run_cli("probe", "--model", str(model), "--venv", str(venv_full), "--json", "--no-tokenizer",
                     *NO_WITNESS, timeout=60)
    assert result.code in (0, 1), result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    profile = result.json()
    assert profile["architecture"]["num_layers"] == 61
    loop = [e for e in profile["files"]["listing"] if e["name"] == "loop"]
    assert loop and loop[0].get("link_error") == "symlink-loop"


# -- injection, secrets, traces ------------------------------------------------------------------

HOSTILE_NAMES = ["with space", "quote'single", 'quote"double', "dollar$(touch {m})", "tick`touch {m}`",
                 "semi;touch {m}", "new\nline"]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_paths_are_plain_paths(sshd, client_keys, kimi_model, tmp_path, name):
    import shutil

    marker = tmp_path / "MARKER"
    base = tmp_path / name.format(m=marker)
    model = base / "model"
    venv_dir = base / "venv"
    shutil.copytree(kimi_model, model)
    from tests.fixtures.venvs import make_venv

    make_venv(venv_dir)
    # Two names take the whole default probe (the model-code witness gets the same paths as data);
    # the others skip the witness, whose request travels exactly as the tokenizer's.
    witness = () if name in ("dollar$(touch {m})", "new\nline") else NO_WITNESS
    result = run_cli("probe", *ssh_flags(sshd, client_keys), "--model", str(model), "--venv", str(venv_dir),
                     "--json", *witness)
    assert result.code == 0, result.stderr[-2000:]
    profile = result.json()
    assert profile["target"]["model_path"] == str(model)
    assert profile["tokenizer"]["loaded"] is True
    assert not marker.exists(), "a path was interpreted by a shell"


def _snapshot(root: Path, depth: int) -> set[str]:
    found: set[str] = set()
    if not root.is_dir():
        return found
    # The suite's own venv cache (built behind a lock by a parallel worker, maybe during this
    # test on a fresh machine) is not the probe's doing.
    cache = cache_root().resolve()
    for dirpath, dirnames, filenames in os.walk(root):
        rel = Path(dirpath).relative_to(root)
        if Path(dirpath).resolve() == cache:
            dirnames[:] = []
            continue
        if len(rel.parts) >= depth:
            dirnames[:] = []
        found.update(str(rel / name) for name in dirnames + filenames)
    return found


def _left_behind(home: Path, before: set[str], wait_s: float = 5.0) -> set[str]:
    """Entries of HOME that appeared since ``before`` and are still there after ``wait_s``.

    Other sessions on this machine share HOME, and their login shells make short-lived files
    in it (pyenv's rehash lock, ``.pyenv/shims/.pyenv-shim``, while a parallel test's ssh session
    runs ``pyenv init``): a file that goes away by itself was not left by the probe.
    """
    deadline = time.monotonic() + wait_s
    new = _snapshot(home, 4) - before
    while new and time.monotonic() < deadline:
        time.sleep(0.1)
        new = _snapshot(home, 4) - before
    return new


def test_no_trace_left_on_the_host(tmp_path, client_keys, kimi_model, venv_full):
    """The probe's sessions get a private TMPDIR (sshd SetEnv), so its temp files are told
    apart from those of other processes on a shared machine: that dir must end empty, and
    HOME and the model dir unchanged."""
    private_tmp = tmp_path / "remote-tmp"
    private_tmp.mkdir()
    server = start_sshd(tmp_path / "sshd", client_keys, address="127.0.0.11",
                        extra_config=f"SetEnv TMPDIR={private_tmp}")
    try:
        trust(server, client_keys)
        home = Path(os.path.expanduser("~"))
        before_home = _snapshot(home, 4)
        before_model = sorted(str(p) for p in kimi_model.rglob("*"))
        raw_file = tmp_path / "raw.json"
        result = run_cli(*probe_args(server, client_keys, kimi_model, venv_full, "--json", "--no-cache",
                                     "--save-raw", str(raw_file)))
        assert result.code == 0, result.stderr[-2000:]
        assert result.json()["tokenizer"]["loaded"] is True
        env_vars = json.loads(raw_file.read_text())["environment"]["env_vars"]
        assert env_vars.get("TMPDIR") == str(private_tmp), "the probe's session did not get the private TMPDIR"
        assert list(private_tmp.iterdir()) == [], "the probe left files in its TMPDIR"
        assert _left_behind(home, before_home) == set()
        assert sorted(str(p) for p in kimi_model.rglob("*")) == before_model
    finally:
        server.stop()


def test_secrets_never_reach_the_profile(tmp_path, client_keys, kimi_model, venv_full):
    secret = "hf_SuperSecretValue123"
    server = start_sshd(tmp_path / "sshd", client_keys, address="127.0.0.10",
                        extra_config=f"SetEnv HF_TOKEN={secret} MY_ACCESS_KEY={secret}")
    try:
        trust(server, client_keys)
        result = run_cli("--debug", *probe_args(server, client_keys, kimi_model, venv_full, "--json"))
        assert result.code == 0, result.stderr[-2000:]
        assert secret not in result.stdout and secret not in result.stderr
    finally:
        server.stop()


def test_whole_run_deadline_stops_everything(sshd, client_keys, kimi_model, venv_full, tmp_path):
    pidfile = tmp_path / "pids"
    model = tokenizer_model(kimi_model, tmp_path / "slow-model", "time.sleep(10**6)", pidfile)
    result = run_cli(*probe_args(sshd, client_keys, model, venv_full, "--timeout", "100", "--deadline", "8",
                                 "--json", *NO_WITNESS), timeout=60)
    assert_clean_error(result, 1, "8 s deadline", "--deadline")
    profile = json.loads(result.stdout)
    assert profile["architecture"]["num_layers"] == 61  # the file facts finished first: kept
    time.sleep(1)
    assert not pids_alive(pidfile)


def test_banner_timeout_is_its_own_deadline(client_keys, kimi_model):
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.11", 0))
    listener.listen(5)  # accepts TCP, never speaks SSH
    port = listener.getsockname()[1]
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        result = run_cli("probe", "--host", "127.0.0.11", "--port", str(port), "--identity", str(client_keys.key),
                         "--known-hosts", str(client_keys.known_hosts), "--ssh-config", "/dev/null",
                         "--banner-timeout", "2", "--model", str(kimi_model), timeout=30)
        assert_clean_error(result, 3, "no SSH banner", "within 2 s")
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


def test_no_remote_code_never_runs_the_models_code(sshd, client_keys, kimi_model, venv_full, tmp_path):
    pidfile = tmp_path / "pids"
    model = tokenizer_model(kimi_model, tmp_path / "coded-model", "pass", pidfile)
    result = run_cli(*probe_args(sshd, client_keys, model, venv_full, "--no-remote-code", "--json"))
    assert "Traceback" not in result.stderr
    profile = result.json()
    assert not pidfile.exists(), "--no-remote-code ran the model's tokenizer code"
    assert any(f["code"] == "remote-code-disabled" for f in profile["findings"])
    # The code it would have run is listed, pinned by sha256.
    code_files = {c["file"]: c["sha256"] for c in profile["files"]["custom_code"]}
    assert len(code_files["fault_tokenizer.py"]) == 64
    # With remote code allowed, the same model's code does run (the marker proves the test can fail).
    allowed = run_cli(*probe_args(sshd, client_keys, model, venv_full, "--json", *NO_WITNESS))
    assert allowed.code in (0, 1) and pidfile.exists()
