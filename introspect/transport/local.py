"""Local executor: the same shipped probe, run as a subprocess (no ``--host``)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

from introspect.errors import InterpreterError
from introspect.transport.base import LOCAL_TARGET, Executor, RemoteProcess, interpreter_hint

if TYPE_CHECKING:
    from introspect.transport.settings import ConnectionSettings


class LocalProcess(RemoteProcess):
    def __init__(self, argv: list[str]) -> None:
        try:
            # Own session: Ctrl-C in the terminal must not kill the probe before
            # we get to kill its whole group ourselves.
            self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, start_new_session=True)
        except FileNotFoundError as exc:
            raise InterpreterError(f"cannot run {argv[0]}: no such file",
                                   hint=interpreter_hint(argv[0]),
                                   host="local", stage="python") from exc
        except PermissionError as exc:
            raise InterpreterError(f"cannot execute {argv[0]}: permission denied",
                                   hint=interpreter_hint(argv[0], "permission"), host="local",
                                   stage="python") from exc
        self._adopt_streams()

    def _adopt_streams(self) -> None:
        # Popen with PIPE always sets the three streams.
        assert self._proc.stdin and self._proc.stdout and self._proc.stderr
        self._stdin, self._stdout, self._stderr = self._proc.stdin, self._proc.stdout, self._proc.stderr

    def write_stdin(self, data: bytes) -> None:
        try:
            self._stdin.write(data)
            self._stdin.flush()
        except BrokenPipeError:
            pass  # it died at once; its stderr says why

    def read_stdout(self) -> bytes:
        return os.read(self._stdout.fileno(), 65536)

    def read_stderr(self) -> bytes:
        return os.read(self._stderr.fileno(), 65536)

    def wait(self, timeout: float) -> int | None:
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self._stdin.close()
        if self._proc.poll() is None:
            try:
                self._proc.wait(0.5)  # closing stdin lets the probe clean up first
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()


class LocalExecutor(Executor):
    """This machine: the probe runs as a subprocess of the CLI."""

    # The interpreter introspect itself runs in (so `pip install '.[local]'` or pipx
    # is what a local probe sees), not whichever python3 comes first on PATH.
    default_python = sys.executable or "python3"

    def __init__(self) -> None:
        super().__init__(LOCAL_TARGET)

    @classmethod
    def from_settings(cls, settings: ConnectionSettings) -> LocalExecutor:
        return cls()

    def _spawn(self, argv: list[str]) -> RemoteProcess:
        return LocalProcess(argv)
