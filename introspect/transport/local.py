"""Local executor: the same shipped probe, run as a subprocess (no ``--host``)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

from introspect.errors import InterpreterError
from introspect.transport.base import Executor, RemoteProcess


class LocalProcess(RemoteProcess):
    def __init__(self, argv: list[str]) -> None:
        try:
            # Own session: Ctrl-C in the terminal must not kill the probe before
            # we get to kill its whole group ourselves.
            self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, start_new_session=True)
        except FileNotFoundError as exc:
            raise InterpreterError(f"cannot run {argv[0]}: no such file",
                                   hint="check --venv DIR (it must contain bin/python) or pass --python EXE",
                                   host="local", stage="python") from exc
        except PermissionError as exc:
            raise InterpreterError(f"cannot execute {argv[0]}: permission denied",
                                   hint="check the interpreter's permissions", host="local",
                                   stage="python") from exc

    def write_stdin(self, data: bytes) -> None:
        try:
            self._proc.stdin.write(data)
            self._proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died at once; its stderr says why

    def read_stdout(self) -> bytes:
        return os.read(self._proc.stdout.fileno(), 65536)

    def read_stderr(self) -> bytes:
        return os.read(self._proc.stderr.fileno(), 65536)

    def wait(self, timeout: float) -> int | None:
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self._proc.stdin.close()
        if self._proc.poll() is None:
            try:
                self._proc.wait(0.5)  # closing stdin lets the probe clean up first
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()


class LocalExecutor(Executor):
    label = "local"

    def _spawn(self, argv: list[str]) -> RemoteProcess:
        return LocalProcess(argv)
