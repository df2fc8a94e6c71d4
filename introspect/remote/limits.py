"""The probe's own resource limits on the host: address space, file size, and render budgets.

Runs on the host (standard library only, Python 3.8+). The supervisor sends the limits of an
isolated task in its child's envelope and the child applies them (:func:`apply`) before the
task runs, so a runaway tokenizer or template fails inside the probe with a finding that
names the limit, long before the host's own OOM killer picks a victim.

Why address space (``RLIMIT_AS``) and not only a resident-set watch: a failed allocation
under it raises ``MemoryError`` where it happens, so the task answers with everything it had
and says which limit it met. Its cost is that reservations count too: ``import torch`` maps
several GiB of CUDA libraries, and CUDA's driver reserves address space for unified memory
in proportion to the GPUs and the host's memory when it initialises
(https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#unified-memory-programming),
so the meta-device code witness, which may reach ``torch.cuda.is_available()``, runs without
an address-space limit: its file-size limit and the output caps still hold, and the
supervisor's watch on resident memory (:mod:`introspect.remote.memwatch`) bounds it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from typing import Any, Dict, Iterator, Optional

try:
    import resource
except ImportError:  # not a POSIX host: no limits to set (the probe itself needs Linux anyway)
    resource = None  # type: ignore[assignment]

GIB = 1 << 30
MIB = 1 << 20
# Tasks never run under an address-space limit, and why: see the module docstring.
NO_ADDRESS_LIMIT_TASKS = ("model_code",)
# Largest file an isolated task may write (its private caches: copied model code, a tiktoken
# cache). Python ignores SIGXFSZ, so a write past it fails with EFBIG instead of killing the task.
FILE_SIZE_LIMIT = 1 * GIB
# One render of a chat template: address space it may add, and seconds it may take. Real
# templates render a conversation in well under 1 MiB and 100 ms; a template that doubles a
# string or a list reaches 512 MiB in under a second and stops here, with the rest of the
# probe's facts kept.
RENDER_MEMORY = 512 * MIB
RENDER_SECONDS = 20.0


class LimitExceeded(Exception):
    """A step of the probe met one of its own limits. ``cause``: "memory-limit" | "time-limit"."""

    def __init__(self, cause: str, message: str) -> None:
        super().__init__(message)
        self.cause = cause


def size_text(n: int) -> str:
    """``8 GiB``, ``512 MiB``, ``1.5 GiB``: a limit as the finding names it."""
    for unit, name in ((GIB, "GiB"), (MIB, "MiB"), (1 << 10, "KiB")):
        if n >= unit:
            value = n / float(unit)
            return ("%d %s" % (value, name)) if value == int(value) else ("%.1f %s" % (value, name))
    return "%d bytes" % n


def task_limits(task: str, memory: Optional[int]) -> Dict[str, Any]:
    """The limits the supervisor sends with ``task``: ``memory`` None or 0 means none."""
    limits: Dict[str, Any] = {"file_size": FILE_SIZE_LIMIT}
    if memory and task not in NO_ADDRESS_LIMIT_TASKS:
        limits["memory"] = int(memory)
    if resource is not None:  # an outer limit that is tighter (the child inherits it) is the one in force
        for key, which in (("memory", resource.RLIMIT_AS), ("file_size", resource.RLIMIT_FSIZE)):
            hard = resource.getrlimit(which)[1]
            if key in limits and hard != resource.RLIM_INFINITY:
                limits[key] = min(limits[key], int(hard))
    return limits


def apply(limits: Any) -> Dict[str, Any]:
    """Set the limits in this process (inherited by everything it starts). Returns what was set."""
    done: Dict[str, Any] = {}
    if resource is None or not isinstance(limits, dict):
        return done
    for key, which in (("memory", resource.RLIMIT_AS), ("file_size", resource.RLIMIT_FSIZE)):
        value = limits.get(key)
        if not isinstance(value, int) or value <= 0:
            continue
        _soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY and hard < value:
            value = hard  # an outer limit that is tighter stays in force
        try:
            # Hard and soft: the task's own code cannot raise it again.
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            continue
        done[key] = value
    return done


def memory_limit() -> Optional[int]:
    """This process's address-space limit in bytes, or None when there is none."""
    if resource is None:
        return None
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    return None if soft == resource.RLIM_INFINITY else int(soft)


def memory_message(who: str) -> str:
    """"the tokenizer probe exceeded its 16 GiB memory limit (address space)", for a MemoryError."""
    limit = memory_limit()
    if limit is None:
        return "%s ran out of memory (the host refused an allocation; the probe had no limit of its own)" % who
    return "%s exceeded its %s memory limit (address space)" % (who, size_text(limit))


def _address_space() -> Optional[int]:
    """Bytes of address space this process uses now (Linux ``/proc``), or None."""
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


@contextlib.contextmanager
def budget(what: str, memory: int = RENDER_MEMORY, seconds: float = RENDER_SECONDS) -> Iterator[None]:
    """Run a step with at most ``memory`` more bytes of address space and ``seconds`` of time.

    The address-space limit is lowered for the step and raised back after it (the hard limit,
    the task's own, never moves); the time budget is an interval timer, in the main thread
    only (where Python delivers signals). A step past either raises :class:`LimitExceeded`.
    """
    used = _address_space()
    previous = resource.getrlimit(resource.RLIMIT_AS) if resource is not None else None
    lowered = False
    # Which limit a MemoryError inside the step met: the step's budget only when the budget is
    # below the limit already in force (the soft one: a budget never raises it).
    own: Optional[int] = None
    if previous is not None and used is not None:
        soft = previous[0]
        own = None if soft == resource.RLIM_INFINITY or used + memory < soft else int(soft)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_AS, (used + memory if own is None else own, previous[1]))
            lowered = True
    timed = seconds > 0 and threading.current_thread() is threading.main_thread()
    old_handler: Any = None
    old_timer = (0.0, 0.0)
    started = time.monotonic()
    if timed:
        old_handler = signal.signal(signal.SIGALRM, _on_alarm)
        old_timer = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except MemoryError:
        raise LimitExceeded("memory-limit", _memory_text(what, memory, lowered, own)) from None
    except _Alarm:
        raise LimitExceeded("time-limit", "%s ran past its %g s time budget" % (what, seconds)) from None
    finally:
        if timed:  # the caller's own timer, if it had one, goes on with what is left of it
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old_handler)
            if old_timer[0] > 0:
                signal.setitimer(signal.ITIMER_REAL, max(old_timer[0] - (time.monotonic() - started), 0.001),
                                 old_timer[1])
        if lowered and previous is not None:
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(resource.RLIMIT_AS, previous)


def _memory_text(what: str, memory: int, lowered: bool, own: Optional[int]) -> str:
    """A MemoryError in a budgeted step, worded by the limit that refused the allocation."""
    if lowered and own is None:
        return "%s exceeded its %s memory budget" % (what, size_text(memory))
    limit = own if own is not None else memory_limit()
    if limit is not None:  # the task's own limit (or an outer one) came first
        return "%s exceeded the task's %s memory limit (address space)" % (what, size_text(limit))
    return "%s ran out of memory (the host refused an allocation; the probe had no limit of its own)" % what


class _Alarm(BaseException):
    """Raised by the render's timer; a BaseException so a template's own ``except Exception``
    (a remote-code helper called from it) cannot swallow it."""


def _on_alarm(_signum: int, _frame: Any) -> None:
    raise _Alarm()

