"""Run one piece of work per host over a fleet: bounded, paced per sshd, isolated.

Used by every multi-host command (health, models, probe --all-hosts). What it fixes,
from other fleet tools' trackers (see the shared reference "SSH and fleet pitfalls"):

- fabric's ``ThreadingGroup`` starts one thread per host and joins without a timeout.
  Here a pool of ``parallel`` workers runs the items; each item is bounded by its own
  deadlines (the executor's connect, banner, auth and probe timeouts), so a dead or
  slow host costs its own timeout and never delays the others beyond that.
- sshd's ``MaxStartups`` (default 10:30:100) refuses unauthenticated connections past a
  count, per sshd: a fleet behind one bastion, or many containers behind one sshd, meets it;
  a thousand hosts with an sshd each never do. So logins are paced per endpoint and adapt
  to refusals (:mod:`introspect.client.fleet_pacing`: a window per sshd, halved on a refusal,
  the refused login retried within its budget); the controller's CPU is bounded by the SSH
  transport's gate on key exchanges in flight. Work that logs in by itself instead gets a
  global start rate (``stagger_s``: a burst of 10, then one start per 50 ms), which cost
  health 50 s per 1,000 hosts before it was paced per sshd.
- One host's exception never touches another's result: it is caught in the worker and
  turned into that item's result (``on_error``, else an :class:`ItemFailure`).

:class:`FleetMonitor` is the observable side: the work reports each connection it
holds (``with monitor.connection(name, closer=executor.close): ...``) and the monitor
keeps the number open now, the maximum seen and the count per host, so tests and
``--json`` can show the ``--parallel`` bound structurally rather than by timing. It
can also close every open connection at once (Ctrl-C), so remote probes stop at once.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from introspect.client.fleet_gc import fleet_collections
from introspect.client.fleet_pacing import Pacer, PacingStats
from introspect.interrupts import Terminated, signum_of

T = TypeVar("T")
R = TypeVar("R")

# A global start rate (one start per 50 ms after a burst of MaxStartups' start, 10) for work that
# logs in by itself (models, gpus, compare). health and probe --all-hosts pass 0: their logins go
# through FleetMonitor.login, paced per sshd (fleet_pacing.py).
DEFAULT_STAGGER_S = 0.05
DEFAULT_BURST = 10


@dataclass(frozen=True)
class ItemFailure(Generic[T]):
    """The result of an item whose work raised (when no ``on_error`` was given)."""

    item: T
    error: BaseException
    seconds: float


class FleetStats(PacingStats, total=False):
    """The ``fleet`` member of a fleet document: --parallel (set by the command), the monitor's
    counters and the login pacing's (inherited from fleet_pacing.PacingStats)."""

    parallel: int
    stagger_s: float
    burst: int
    max_open_connections: int
    connects_started: int
    open_connections: int


class FleetMonitor:
    """Login pacing, an optional global start rate, and the open-connection counter shared by the
    runner and the work."""

    def __init__(self, stagger_s: float = DEFAULT_STAGGER_S, burst: int = DEFAULT_BURST,
                 pacer: Pacer | None = None) -> None:
        self.stagger_s = max(0.0, stagger_s)
        self.burst = max(1, burst)
        self.pacer = pacer if pacer is not None else Pacer()
        self._lock = threading.Lock()
        self._next_start = 0.0  # monotonic time of the next free start slot
        self._starts = 0
        self._open = 0
        self._max_open = 0
        self._opened: Counter[str] = Counter()
        self._closers: dict[int, Callable[[], None]] = {}
        self._cancelled = threading.Event()

    # -- staggering ---------------------------------------------------------------
    def wait_turn(self) -> None:
        """Block until this caller's start slot (see :meth:`reserve`).

        The slot is reserved under the lock and slept outside it, so waiting callers
        queue up in order without holding anything.
        """
        slot = self.reserve(time.monotonic())
        delay = slot - time.monotonic()
        if delay > 0:
            self._cancelled.wait(delay)

    def reserve(self, now: float) -> float:
        """The next start slot at or after ``now``: the first ``burst`` starts at once, then
        one per ``stagger_s``, the first of those ``stagger_s`` after the last burst start."""
        with self._lock:
            self._starts += 1
            if self._starts <= self.burst:
                self._next_start = max(self._next_start, now + self.stagger_s)
                return now
            slot = max(now, self._next_start)
            self._next_start = slot + self.stagger_s
            return slot

    def login(self, endpoint: Hashable, connect: Callable[[], None]) -> int:
        """``connect()`` paced on ``endpoint``'s sshd, retried on its refusals (see fleet_pacing.py)."""
        return self.pacer.login(endpoint, connect, self._cancelled)

    # -- connections ----------------------------------------------------------------
    @contextmanager
    def connection(self, name: str, closer: Callable[[], None] | None = None) -> Iterator[None]:
        """Count one connection as open for the duration of the block.

        Entered *before* connecting, so an attempt in progress counts as open: the bound
        checked from ``max_open`` is then never looser than what sshd saw.
        ``closer`` is called by :meth:`cancel` to stop the work promptly.
        """
        token = object()
        with self._lock:
            self._open += 1
            self._max_open = max(self._max_open, self._open)
            self._opened[name] += 1
            if closer is not None:
                self._closers[id(token)] = closer
        try:
            yield
        finally:
            with self._lock:
                self._open -= 1
                self._closers.pop(id(token), None)

    @property
    def open_now(self) -> int:
        with self._lock:
            return self._open

    @property
    def max_open(self) -> int:
        with self._lock:
            return self._max_open

    @property
    def connects(self) -> dict[str, int]:
        """Connects started per name over the run (1 each when every host got exactly one)."""
        with self._lock:
            return dict(self._opened)

    # -- cancellation --------------------------------------------------------------
    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self) -> None:
        """Stop waiting starts and close every open connection (remote probes die with
        their channels: the remote watchdog kills a task whose stdin closes)."""
        self._cancelled.set()
        with self._lock:
            closers = list(self._closers.values())
        for close in closers:
            # One failing close must not leave the other connections open.
            with contextlib.suppress(Exception):
                close()

    def stats(self) -> FleetStats:
        pacing = self.pacer.stats()  # outside this lock: the pacer has its own
        with self._lock:
            return {
                "stagger_s": self.stagger_s, "burst": self.burst, "max_open_connections": self._max_open,
                # Connects started (attempts, failed ones included); each host's
                # report says how many connections its executor really opened.
                "connects_started": sum(self._opened.values()), "open_connections": self._open,
                **pacing}


def run_fleet(
    items: Sequence[T],
    work: Callable[[T], R],
    *,
    parallel: int,
    stagger_s: float = DEFAULT_STAGGER_S,
    burst: int = DEFAULT_BURST,
    on_done: Callable[[int, T, R | ItemFailure[T]], None] | None = None,
    on_error: Callable[[T, BaseException, float], R] | None = None,
    monitor: FleetMonitor | None = None,
    store: Callable[[int, R | ItemFailure[T]], R | ItemFailure[T]] | None = None,
) -> list[R | ItemFailure[T]]:
    """Run ``work(item)`` for every item on at most ``parallel`` threads; results in input order.

    ``on_done(index, item, result)`` is called in the calling thread as each item
    finishes (in completion order), so a progress display needs no locking.
    ``on_error(item, exc, seconds)`` turns an exception into that item's result.
    ``monitor`` (made here when not given) paces the logins; pass your own to let the
    work count its connections on it and to read the counters afterwards.
    ``store(index, result)``, called after ``on_done``, gives what the returned list keeps of
    each result (a small summary, the rest spooled): the run itself keeps no other reference.
    On KeyboardInterrupt (Ctrl-C, and SIGTERM/SIGHUP under :func:`introspect.interrupts.handling`)
    the monitor is cancelled (open connections closed), waiting items are dropped and the
    interrupt propagates, as :class:`FleetInterrupted` with the results of the items that had
    finished. Items still running end promptly: once a signal is received the
    transports open no connection and start no process (:func:`introspect.interrupts.refuse_new_work`),
    and the interpreter joins their threads before it exits.
    """
    if parallel < 1:
        raise ValueError(f"parallel must be at least 1, got {parallel}")
    items = list(items)
    if not items:
        return []
    monitor = monitor if monitor is not None else FleetMonitor(stagger_s, burst)

    def guarded(item: T) -> R | ItemFailure[T]:
        monitor.wait_turn()
        started = time.monotonic()
        if monitor.cancelled:
            error: BaseException = KeyboardInterrupt("cancelled before it started")
            return _failure(item, error, 0.0, on_error)
        try:
            return work(item)
        except Exception as exc:  # noqa: BLE001 - one item's failure is its own result
            return _failure(item, exc, time.monotonic() - started, on_error)

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(parallel, len(items)),
                                                 thread_name_prefix="fleet")
    with fleet_collections():
        results = _run_pool(pool, guarded, items, monitor, on_done, store)
        pool.shutdown(wait=True)
    return results


def _run_pool(pool: concurrent.futures.ThreadPoolExecutor, guarded: Callable[[T], R], items: list[T],
              monitor: FleetMonitor, on_done: Callable[[int, T, R], None] | None,
              store: Callable[[int, R], R] | None = None) -> list[R]:
    """Every item's result, in input order (see :func:`run_fleet`: its pool, its on_done, its store).
    A finished future leaves ``futures`` at once: it would hold its whole result to the end."""
    results: list[R | None] = [None] * len(items)
    futures: dict[concurrent.futures.Future[R], int] = {}
    try:
        futures.update((pool.submit(guarded, item), i) for i, item in enumerate(items))
        for future in concurrent.futures.as_completed(futures):
            index = futures.pop(future)
            result = future.result()  # guarded() never raises
            results[index] = result
            if on_done is not None:
                on_done(index, items[index], result)
            if store is not None:
                results[index] = store(index, result)
            del future, result
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            _keep_finished(futures, results)  # before the cancel cuts the others short
        monitor.cancel()
        pool.shutdown(wait=False, cancel_futures=True)
        if isinstance(exc, KeyboardInterrupt):
            raise FleetInterrupted(signum_of(exc), results) from exc
        raise
    return results  # type: ignore[return-value]  # every slot was filled above


def _keep_finished(futures: dict[concurrent.futures.Future[Any], int], results: list[Any]) -> None:
    """The results of the items done when a signal came: they finished on their own. One still
    running is cut short by the cancel that follows, and its result would only say so."""
    for future, index in futures.items():
        if results[index] is None and future.done() and not future.cancelled():
            results[index] = future.result()


class FleetInterrupted(Terminated):
    """A signal stopped :func:`run_fleet`; ``results`` are in input order, None for each item that
    had not finished (those still running were cancelled)."""

    def __init__(self, signum: int, results: Sequence[Any]) -> None:
        super().__init__(signum)
        self.results = list(results)


def _failure(item: T, error: BaseException, seconds: float,
             on_error: Callable[[T, BaseException, float], R] | None) -> R | ItemFailure[T]:
    if on_error is not None:
        # A broken handler must not take the other items down: fall back to ItemFailure.
        with contextlib.suppress(Exception):
            return on_error(item, error, seconds)
    return ItemFailure(item, error, seconds)


__all__ = ["DEFAULT_BURST", "DEFAULT_STAGGER_S", "FleetInterrupted", "FleetMonitor", "ItemFailure", "run_fleet"]
