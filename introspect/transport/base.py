"""One executor interface, many transports (testinfra's backend idea).

A transport supplies one primitive, ``_spawn(argv) -> RemoteProcess``, and a
``from_settings`` constructor (see :mod:`introspect.transport.registry`). The base
does the stream plumbing once for all of them: stdout and stderr are drained
concurrently under one deadline (reading them one after the other deadlocks
once a stream passes the channel window), the reply frame is parsed, and
every way a run can fail becomes one of introspect's errors.
"""

from __future__ import annotations

import abc
import dataclasses
import shlex
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from introspect.errors import (
    ConnectionLost,
    InterpreterError,
    ProbeTimeout,
    ProtocolError,
    RemoteError,
)
from introspect.interrupts import refuse_new_work
from introspect.remote import contract
from introspect.transport import shipping

if TYPE_CHECKING:
    from introspect.transport.settings import ConnectionSettings

# Extra seconds the controller waits past a task's own deadline, so that the
# remote supervisor can report its timeout itself (with partial facts).
GRACE_S = 10.0


def interpreter_hint(python: str, cause: str = "missing") -> str:
    """The fix when ``python`` cannot be started, whichever transport noticed it: a command to run
    where the interpreter lives; ``cause`` "missing" (no such file) or "permission" (not executable)."""
    look = f"ls -l {shlex.quote(python)}" if "/" in python else f"command -v {shlex.quote(python)}"
    if cause == "permission":
        return f"{look}  # it must be executable by the login user (chmod a+x), or pass another --python EXE"
    return f"{look}  # --venv DIR must hold bin/python (python3 -m venv DIR), or pass --python EXE"


@dataclass(frozen=True)
class Target:
    """Where an executor runs its tasks; the same typed value on every transport.

    ``host``/``port``/``user`` are what the transport was asked for (``None`` when the
    transport or ssh_config decides; for container schemes ``host`` is the machine or
    context that runs the container); ``container`` is the container, pod or VM inside
    it; ``label`` names the target in error messages.
    """

    scheme: str
    host: str | None = None
    port: int | None = None
    user: str | None = None
    label: str = "local"
    container: str | None = None

    def as_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


LOCAL_TARGET = Target("local")


class RemoteProcess(abc.ABC):
    """A started remote (or local) process: the small primitives a transport provides."""

    @abc.abstractmethod
    def write_stdin(self, data: bytes) -> None: ...

    @abc.abstractmethod
    def read_stdout(self) -> bytes:
        """Block until some bytes arrive; b"" at EOF."""

    @abc.abstractmethod
    def read_stderr(self) -> bytes:
        """Block until some bytes arrive; b"" at EOF."""

    @abc.abstractmethod
    def wait(self, timeout: float) -> int | None:
        """Exit status, or None if not known within ``timeout``. Raises ConnectionLost."""

    @abc.abstractmethod
    def kill(self) -> None:
        """Stop the process (closing stdin makes the remote side kill its task group)."""

    # Whether :meth:`drain` reads both streams in the calling thread; else :meth:`Executor.execute`
    # reads each stream in a thread of its own (started before stdin is written).
    drains_in_caller: ClassVar[bool] = False

    def drain(self, out: list[bytes], err: list[bytes], deadline: float) -> bool:
        """Read both streams to their end in the calling thread, by ``deadline`` (monotonic):
        True when both ended, False when the deadline came first. Only where ``drains_in_caller``."""
        raise NotImplementedError(f"{type(self).__name__} reads its streams in threads")


@dataclass
class ExecResult:
    stdout: bytes
    stderr: bytes
    exit_status: int | None
    timed_out: bool
    seconds: float


@dataclass
class ProbeReply:
    """A parsed reply: the task's facts and the error records it reported."""

    task: str
    facts: Any
    errors: list[contract.ErrorRecord] = field(default_factory=list)
    seconds: float = 0.0
    python: contract.PythonFacts | None = None
    supervisor: contract.SupervisorFacts | None = None  # isolated tasks only
    stderr_tail: str = ""


@dataclass(frozen=True)
class BatchItem:
    """One task of a batch (see :meth:`Executor.run_batch`)."""

    task: str
    request: contract.TaskRequest
    timeout: float
    isolate: bool = False
    stop_if_digest: str | None = None  # see client.runner.Channel.stop_if_digest


class Executor(abc.ABC):
    """Runs the shipped probe under a Python interpreter on one target."""

    # The interpreter when neither --python nor --venv names one: the target's python3.
    default_python = "python3"

    def __init__(self, target: Target) -> None:
        self.target = target
        self._live: set[RemoteProcess] = set()
        self._live_lock = threading.Lock()

    @property
    def label(self) -> str:
        """The target's name in error messages ("local" for the local executor)."""
        return self.target.label

    @property
    def connections_opened(self) -> int:
        """Connections this executor really opened (transports without one report 0)."""
        return 0

    # -- transport primitives -------------------------------------------------
    @classmethod
    @abc.abstractmethod
    def from_settings(cls, settings: ConnectionSettings) -> Executor:
        """Build the executor from transport-neutral settings (the registry's factory)."""

    @abc.abstractmethod
    def _spawn(self, argv: list[str]) -> RemoteProcess: ...

    def connect(self) -> None:  # noqa: B027 - an optional hook: local needs no connection
        """Open the connection (no-op for local)."""

    def close(self) -> None:
        """Kill whatever still runs and close the connection."""
        with self._live_lock:
            live = list(self._live)
        for proc in live:
            proc.kill()

    def __enter__(self) -> Executor:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing, once for every transport ------------------------------------
    def execute(self, argv: list[str], stdin: bytes, timeout: float, *,
                keep_stdin_open: bool = True, stdout_sink: list[bytes] | None = None) -> ExecResult:
        """Run ``argv``, feed ``stdin``, drain both streams concurrently, bounded by ``timeout``.

        ``stdout_sink`` receives stdout as it comes, so a caller keeps what arrived even when
        the run ends in an exception (a batch's finished tasks when the connection drops).
        """
        started = time.monotonic()
        proc = self._spawn(argv)
        with self._live_lock:
            self._live.add(proc)
        out: list[bytes] = stdout_sink if stdout_sink is not None else []
        err: list[bytes] = []

        def drain(read: Callable[[], bytes], sink: list[bytes]) -> None:
            try:
                while chunk := read():
                    sink.append(chunk)
            except (OSError, EOFError):
                pass

        readers: list[threading.Thread] = []
        if not proc.drains_in_caller:
            readers = [threading.Thread(target=drain, args=(proc.read_stdout, out), daemon=True),
                       threading.Thread(target=drain, args=(proc.read_stderr, err), daemon=True)]
        for reader in readers:
            reader.start()
        try:
            # After registering: a signal's cancel that closed this executor before the
            # registration still stops it here (the flag is set before anything is closed).
            refuse_new_work(self.label)
            proc.write_stdin(stdin)
            deadline = started + timeout
            for reader in readers:
                reader.join(max(0.0, deadline - time.monotonic()))
            timed_out = any(reader.is_alive() for reader in readers) if readers else \
                not proc.drain(out, err, deadline)
            status = None
            if not timed_out:
                status = proc.wait(max(0.5, min(5.0, deadline - time.monotonic())))
        finally:
            # Closing stdin is the remote's signal to stop: its watchdog kills the task group.
            proc.kill()
            with self._live_lock:
                self._live.discard(proc)
        for reader in readers:
            reader.join(1.0)
        return ExecResult(b"".join(out), b"".join(err), status, timed_out,
                          time.monotonic() - started)

    def run_python(self, python: str, task: str, request: contract.TaskRequest, *, timeout: float,
                   isolate: bool = False) -> ProbeReply:
        """Run one remote task under ``python`` and return its parsed reply."""
        payload = shipping.envelope(task, request, isolate=isolate, timeout=timeout)
        result = self.execute(shipping.command_argv(python), payload, timeout + GRACE_S)
        return self._interpret(python, task, result, timeout)

    def run_batch(self, python: str, items: list[BatchItem]) -> list[ProbeReply | Exception]:
        """Several tasks under one interpreter in one session; a reply or an error per item, in order."""
        from introspect.transport.batching import run_batch

        return run_batch(self, python, items)

    def _interpret(self, python: str, task: str, result: ExecResult, timeout: float) -> ProbeReply:
        stderr = result.stderr.decode("utf-8", "replace")
        reply = shipping.parse_reply(result.stdout)
        if reply is None:
            raise self._no_reply_error(python, task, result, stderr, timeout)
        self._check_fatal(python, reply)
        return self._probe_reply(task, reply, result.seconds, stderr)

    def _check_fatal(self, python: str, reply: contract.Reply) -> None:
        fatal = reply.get("fatal")
        if fatal:
            raise InterpreterError(
                f"{python} is Python {fatal.get('version')}; the probe needs Python "
                f"{'.'.join(map(str, shipping.MIN_PYTHON))}+",
                hint=f"ls /usr/bin/python3* /usr/local/bin/python3*  # the probe needs Python "
                     f"{'.'.join(map(str, shipping.MIN_PYTHON))}+: point --venv/--python at a newer interpreter",
                host=self.label, stage="python")

    @staticmethod
    def _probe_reply(task: str, reply: contract.Reply, seconds: float, stderr: str) -> ProbeReply:
        return ProbeReply(task=task, facts=reply.get("facts"), errors=list(reply.get("errors") or []),
                          seconds=float(reply.get("seconds") or seconds),
                          python=reply.get("python"), supervisor=reply.get("supervisor"),
                          stderr_tail=stderr[-2000:])

    def _no_reply_error(self, python: str, task: str, result: ExecResult, stderr: str,
                        timeout: float) -> Exception:
        last = next((line for line in reversed(stderr.strip().splitlines()) if line.strip()), "")
        if result.timed_out:
            return ProbeTimeout(f"the {task} probe did not answer within {timeout:.0f} s",
                                hint="# raise --timeout, or check the host's load", host=self.label,
                                stage=task)
        lowered = stderr.lower()
        if result.exit_status in (126, 127) or "no such file" in lowered or "not found" in lowered:
            return InterpreterError(
                f"cannot run {python}: {last or 'not found'}",
                hint=interpreter_hint(python),
                host=self.label, stage="python")
        if "permission denied" in lowered:
            return InterpreterError(f"cannot execute {python}: {last}",
                                    hint=interpreter_hint(python, "permission"), host=self.label,
                                    stage="python")
        if result.exit_status is None:
            return ConnectionLost(f"the {task} probe ended without an exit status: {last or 'no output'}",
                                  hint="# check that the host is up and sshd is running", host=self.label,
                                  stage=task)
        if result.exit_status < 0 or result.exit_status >= 128:
            return RemoteError(f"the {task} probe was killed (exit status {result.exit_status})"
                               + (f": {last}" if last else ""),
                               hint="# check the host's logs (OOM killer?) and rerun", host=self.label,
                               stage=task)
        if result.stdout.find(contract.BEGIN) >= 0:
            return ProtocolError(f"the {task} probe's reply was truncated",
                                 hint="# rerun; if it persists, report it with --debug", host=self.label,
                                 stage=task)
        if "Traceback" not in stderr and "Python" not in stderr:
            # The shipped probe always ends in a frame, and a Python that dies before that says why
            # (a traceback, "Fatal Python error"): a silent exit is an interpreter that is no Python.
            return InterpreterError(
                f"{python} did not run the probe (exit status {result.exit_status}, "
                f"{repr(last) if last else 'no output'}): it is not a working Python interpreter",
                hint=f"{shlex.quote(python)} -c 'import sys; print(sys.version)'  # must print 3.8 or newer; "
                     "else point --venv/--python at a working interpreter",
                host=self.label, stage="python")
        return RemoteError(f"the {task} probe exited with status {result.exit_status} without a reply"
                           + (f": {last}" if last else ""),
                           hint="# run with --debug to see the remote stderr", host=self.label, stage=task)
