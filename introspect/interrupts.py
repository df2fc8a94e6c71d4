"""SIGTERM and SIGHUP end a run as Ctrl-C does: every cleanup path runs, then exit 128 + the signal.

Python's default action for SIGTERM and SIGHUP is to die at once, running no ``finally``:
an openssh:// ControlMaster (started in a session of its own, so that the terminal's
Ctrl-C does not reach it before we close it) is then re-parented to init and lives on
with its ControlPath dir. :func:`handling` installs one handler for SIGINT, SIGTERM and
SIGHUP that raises :class:`Terminated`, a ``KeyboardInterrupt``, in the main thread, so
the paths written for Ctrl-C run unchanged: channels and connections closed (the remote
watchdogs then kill their task groups), masters sent ``-O exit``, temp dirs removed.

- Only the first signal raises. A SIGTERM or SIGHUP arriving while that cleanup runs
  (systemd repeats nothing, but a ``kill`` in a loop or a terminal's hangup cascade does)
  is ignored, so it cannot cut a cleanup short; a second Ctrl-C still raises, as the
  user asks for it.
- A signal is only ever delivered to the main thread. :func:`stopping` tells worker
  threads that the run is ending, so that no connection is opened (or reopened) after
  the fleet's cancel closed the open ones.
- :func:`deferred` holds a signal back while a child is started and recorded by its
  owner, so that none is left running without an owner who stops it.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

HANDLED: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """The run was asked to stop by ``signum`` (SIGINT, SIGTERM or SIGHUP)."""

    def __init__(self, signum: int) -> None:
        self.signum = int(signum)
        super().__init__(self.name)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """The shell's convention for a process ended by a signal: 128 + its number."""
        return 128 + self.signum


class _State:
    received: int | None = None  # the first signal of the run
    deferring = 0  # depth of deferred() blocks in the main thread
    pending = False  # a signal arrived inside deferred(): raise it on leaving


_STATE = _State()


# signal -> (what stopped the run, the fix as a comment): one wording for the error line, the
# ``error`` member of a --json document and the finding of a partial profile.
_STOPPED_BY: dict[int, tuple[str, str]] = {
    signal.SIGINT: ("interrupted", "# rerun the same command for the full result; nothing was left running"),
    signal.SIGTERM: ("terminated by SIGTERM", "# something stopped the run (systemd stop, timeout, kill): "
                     "rerun it with more time; nothing was left running"),
    signal.SIGHUP: ("terminated by SIGHUP (the terminal closed)", "# run it under nohup, tmux or "
                    "systemd-run to outlive the terminal; nothing was left running"),
}


def cause(signum: int) -> str:
    """What stopped the run, to follow "the run was": "interrupted", "terminated by SIGTERM"."""
    return _STOPPED_BY.get(signum, _STOPPED_BY[signal.SIGINT])[0]


def describe(signum: int) -> tuple[str, str, str]:
    """(message, fix, kind) of a run stopped by ``signum``: kind ``Interrupted`` for Ctrl-C,
    ``Terminated`` for the others (the ``error`` code of a --json document)."""
    fix = _STOPPED_BY.get(signum, _STOPPED_BY[signal.SIGINT])[1]
    return f"{cause(signum)}; remote probes were stopped", fix, "Interrupted" if signum == signal.SIGINT else "Terminated"


def signum_of(exc: BaseException | None) -> int:
    """The signal behind ``exc`` (a plain KeyboardInterrupt is Ctrl-C's SIGINT)."""
    if isinstance(exc, Terminated):
        return exc.signum
    return _STATE.received or signal.SIGINT


def stopping() -> bool:
    """True once SIGINT, SIGTERM or SIGHUP asked the run to stop."""
    return _STATE.received is not None


def received() -> int | None:
    return _STATE.received


def refuse_new_work(host: str | None) -> None:
    """Raise ConnectionLost once the run is stopping: called before a connection (or a client
    process) is opened, so that a worker thread does not open one after the fleet closed them."""
    if _STATE.received is not None:
        from introspect.errors import ConnectionLost

        name = signal.Signals(_STATE.received).name
        raise ConnectionLost(f"not connecting: the run was stopped by {name}", hint="rerun the command",
                             host=host, stage="connect")


def _handler(signum: int, _frame: FrameType | None) -> None:
    first = _STATE.received is None
    if not first and signum != signal.SIGINT:
        return  # the cleanup the first signal started must finish
    if first:
        _STATE.received = signum
    if _STATE.deferring:
        _STATE.pending = True
        return
    raise Terminated(signum)


@contextmanager
def handling() -> Iterator[None]:
    """Handle the three signals for the duration of the block (a no-op outside the main thread,
    where Python allows no handler)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _STATE.received, _STATE.deferring, _STATE.pending = None, 0, False
    previous: dict[int, Any] = {}
    for signum in HANDLED:
        previous[signum] = signal.getsignal(signum)
        signal.signal(signum, _handler)
    try:
        yield
    finally:
        # The run is over and cleaned up: a later in-process run (an API caller after main())
        # must not find its connections refused by this run's signal.
        _STATE.received, _STATE.deferring, _STATE.pending = None, 0, False
        for signum, action in previous.items():
            # None: a handler installed from C, which Python cannot reinstall; the default then.
            signal.signal(signum, action if action is not None else signal.SIG_DFL)


@contextmanager
def deferred() -> Iterator[None]:
    """Hold a signal back until the block is done (main thread only; elsewhere none arrives)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _STATE.deferring += 1
    try:
        yield
    finally:
        _STATE.deferring -= 1
        if not _STATE.deferring and _STATE.pending:
            _STATE.pending = False
            assert _STATE.received is not None
            raise Terminated(_STATE.received)


__all__ = ["HANDLED", "Terminated", "cause", "deferred", "describe", "handling", "received", "refuse_new_work", "signum_of",
           "stopping"]
