"""Run the CLI on a real pseudo-terminal of a given width, as a user's tmux would."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from tests.conftest import NEUTRAL_CWD, REPO

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")


def run_in_terminal(*args: str, columns: int, env: dict[str, str] | None = None, timeout: float = 60,
                    cwd: Path | None = None) -> tuple[int, str]:
    """(exit code, what the terminal received with colours stripped and CRLF as LF)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    full_env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TERM="xterm-256color",
                    COLUMNS=str(columns), LINES="50")
    full_env.pop("NO_COLOR", None)
    full_env.update(env or {})
    proc = subprocess.Popen([sys.executable, "-m", "introspect.cli.main", *args], stdin=slave, stdout=slave,
                            stderr=slave, env=full_env, cwd=cwd or NEUTRAL_CWD, close_fds=True)
    os.close(slave)
    code, out = drain(master, proc, timeout)
    text = out.decode("utf-8", "replace").replace("\r\n", "\n")
    return code, ANSI.sub("", text)


def drain(master: int, proc: subprocess.Popen[bytes], timeout: float) -> tuple[int, bytes]:
    """(exit code, every byte the child wrote to the terminal) once the child closed its side or
    exited; past ``timeout`` the child is killed. ``master`` is closed."""
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the child closed its side
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return code, b"".join(chunks)
