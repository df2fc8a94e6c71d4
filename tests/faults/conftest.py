"""Fixtures for the fault-injection suite: broken hosts, hostile paths, misbehaving tokenizers."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sshd_server import ClientKeys, SSHServer, free_port, start_sshd, trust

SLOW_TOKENIZER = '''\
import os
import time

from transformers import PreTrainedTokenizer


class {cls}(PreTrainedTokenizer):
    num_reserved_special_tokens = 256  # as Kimi's class: the fallback reads it from here

    def __init__(self, **kwargs):
        with open({pidfile!r}, "a") as fh:
            fh.write("%d\\n" % os.getpid())
        {action}
'''


def tokenizer_model(base: Path, dest: Path, action: str, pidfile: Path, cls: str = "FaultTokenizer") -> Path:
    """A copy of ``base`` whose remote-code tokenizer runs ``action`` in ``__init__``."""
    shutil.copytree(base, dest)
    (dest / "fault_tokenizer.py").write_text(
        SLOW_TOKENIZER.format(cls=cls, pidfile=str(pidfile), action=action))
    import json

    cfg_path = dest / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["auto_map"] = {"AutoTokenizer": [f"fault_tokenizer.{cls}", None]}
    cfg["tokenizer_class"] = cls
    cfg_path.write_text(json.dumps(cfg))
    return dest


def pids_alive(pidfile: Path) -> list[int]:
    if not pidfile.exists():
        return []
    alive = []
    for line in pidfile.read_text().split():
        pid = int(line)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        # A zombie is already dead; only count processes still running.
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] if Path(
            f"/proc/{pid}/stat").exists() else "X"
        if state not in ("Z", "X"):
            alive.append(pid)
    return alive


def introspect_processes(interpreter: Path | None = None) -> list[str]:
    """Command lines of shipped-probe interpreters still running on this machine; with
    ``interpreter``, only those it runs (a test's own venv), so that probes of other
    sessions on a shared machine do not count."""
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    lines = [line for line in out.splitlines() if "_BOOT = " in line and "ps -eo" not in line]
    if interpreter is not None:
        lines = [line for line in lines if f" {interpreter} -B -c " in f" {line.split(None, 1)[-1]}"]
    return lines


@pytest.fixture()
def own_sshd(tmp_path: Path, client_keys: ClientKeys) -> Iterator[SSHServer]:
    """A private sshd (127.0.0.5) a test may kill or restart."""
    server = start_sshd(tmp_path / "sshd", client_keys, address="127.0.0.5")
    trust(server, client_keys)
    yield server
    server.stop()


@pytest.fixture()
def dropping_address() -> Iterator[tuple[str, int]]:
    """127.0.0.9:PORT where every SYN is dropped (iptables, loopback only)."""
    if os.geteuid() != 0 or not shutil.which("iptables"):
        pytest.skip("needs root and iptables to drop packets on a loopback address")
    port = free_port("127.0.0.9")
    rule = ["INPUT", "-d", "127.0.0.9", "-p", "tcp", "--dport", str(port), "-j", "DROP"]
    if subprocess.run(["iptables", "-A", *rule], capture_output=True).returncode != 0:
        pytest.skip("iptables refused to add a rule here")
    try:
        yield "127.0.0.9", port
    finally:
        subprocess.run(["iptables", "-D", *rule], capture_output=True)


@pytest.fixture()
def fake_old_python(tmp_path: Path) -> Path:
    """An interpreter that reports Python 3.6 (a real one with version_info patched)."""
    import sys

    fake = tmp_path / "old-venv" / "bin" / "python"
    fake.parent.mkdir(parents=True)
    real = os.path.realpath(sys.executable)
    fake.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        # argv: -B -c CODE
        exec {real} -c 'import sys; sys.version_info = (3, 6, 9, "final", 0); exec(sys.argv[1])' "$3"
        """))
    fake.chmod(0o755)
    return fake


def kill_group_quietly(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
