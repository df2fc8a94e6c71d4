"""Dial ahead: the TCP connect and banner wait of the hosts a fleet run has not reached yet.

A silent host (it accepts and never sends a banner) costs its banner deadline, 10 s by default,
and no CPU. Dialled only when a worker reaches it, a silent host near the end of the inventory
ends the run a whole deadline after the CPU-bound work is done. So while ``parallel`` workers
check hosts, :class:`DialAhead` makes the executors of the next ``limit`` hosts (4 rounds of
``parallel`` by default, within the open-file limit) and has each dial
its sshd and wait for its banner (:meth:`SSHExecutor.dial_ahead`); a worker reaching such a host
logs in on the waiting connection, or gets at once what the wait found (refused, silent, dead).
The deadlines of silent hosts then run while the others are being checked.

Only hosts whose endpoint no other host of the run shares are dialled ahead: an unauthenticated
connection waiting for its worker counts against that sshd's ``MaxStartups`` (fleet_pacing.py),
and hosts sharing one sshd are paced there instead. sshd gives an unauthenticated connection
``LoginGraceTime`` (120 s by default, sshd_config(5)); ``limit`` hosts ahead of ``parallel``
workers are reached in far less.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Generic, TypeVar

from introspect.client.fleet_pacing import Endpointed, endpoint_of
from introspect.transport.base import Executor

H = TypeVar("H", bound=Endpointed)


AHEAD_HOSTS = 1024  # hosts made ahead at least (within the open-file limit): see default_limit


def default_limit(parallel: int) -> int:
    """Hosts dialled ahead at most: 4 rounds of ``parallel`` and at least 1,024, within the
    open-file limit (each is one socket; the workers' own connections and their channels keep 4
    per worker and 128 spare). A silent host is found as far ahead as the workers take a banner
    deadline to reach: at 50 hosts a second and 10 s, 500 hosts; a worker reaching one sooner
    waits out the rest of its deadline."""
    wanted = max(4 * parallel, AHEAD_HOSTS)
    try:
        import resource  # POSIX only: elsewhere assume the common soft limit

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft == resource.RLIM_INFINITY:
            return wanted
    except (ImportError, OSError, ValueError):
        soft = 1024
    return max(1, min(wanted, soft - 4 * parallel - 128))


def dial_threads(parallel: int) -> int:
    """Dials waiting at once, each a thread: a dial waits one round trip, a silent host's its whole
    banner deadline. With ``parallel`` of them (64 at least), a fleet can hold that many silent
    hosts within one deadline's worth of hosts before the look-ahead stalls and workers wait on
    silent hosts themselves; threads are started only as dials wait (ThreadPoolExecutor)."""
    return max(64, parallel)


class DialAhead(Generic[H]):
    """``with DialAhead(hosts, make, parallel=N, cancelled=lambda: monitor.cancelled) as ahead:`` the work calls
    ``ahead.take(host)`` for its executor (made ahead, maybe already waiting at the banner)."""

    def __init__(self, hosts: Sequence[H], make: Callable[[H], Executor], *, parallel: int,
                 cancelled: Callable[[], bool], limit: int | None = None) -> None:
        self._hosts = list(hosts)
        self._make = make
        self._parallel = max(1, parallel)
        self._cancelled = cancelled
        shared = Counter(endpoint_of(h) for h in self._hosts)
        self._alone = [shared[endpoint_of(h)] == 1 for h in self._hosts]
        self._room = threading.Semaphore(max(1, limit if limit is not None else default_limit(self._parallel)))
        self._lock = threading.Lock()
        self._made: dict[int, Executor] = {}  # by position in hosts: made ahead, not taken yet
        self._taken: set[int] = set()
        self._index = {id(h): i for i, h in enumerate(self._hosts)}
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=dial_threads(self._parallel),
                                                           thread_name_prefix="ahead")
        self._done = threading.Event()  # the run is over: feed no more
        self._feeder = threading.Thread(target=self._feed, name="ahead-feeder", daemon=True)

    def __enter__(self) -> DialAhead[H]:
        if len(self._hosts) > self._parallel and any(self._alone):
            self._feeder.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop()

    def take(self, host: H) -> Executor:
        """``host``'s executor: the one made ahead for it, else a new one."""
        index = self._index.get(id(host))
        with self._lock:
            made = self._made.pop(index, None) if index is not None else None
            if index is not None:
                self._taken.add(index)
        if made is not None:
            self._room.release()
            return made
        return self._make(host)

    # -- the look-ahead -----------------------------------------------------------
    def _feed(self) -> None:
        """Walk the hosts past the first ``parallel`` (the workers take those at once), keeping at
        most ``limit`` made ahead and not yet taken."""
        for index in range(self._parallel, len(self._hosts)):
            if not self._alone[index]:
                continue
            while not self._room.acquire(timeout=0.2):
                if self._over():
                    return
            if self._over():
                return
            with self._lock:
                if index in self._taken:  # a worker got there first
                    self._room.release()
                    continue
            try:
                self._pool.submit(self._dial, index)
            except RuntimeError:  # the pool is shutting down: the run ended
                return

    def _over(self) -> bool:
        return self._done.is_set() or self._cancelled()

    def _dial(self, index: int) -> None:
        if self._over():
            self._room.release()
            return
        executor: Executor | None = None
        with contextlib.suppress(Exception):  # a failure here only means the worker dials itself
            executor = self._make(self._hosts[index])
        if executor is None:
            self._room.release()
            return
        with self._lock:
            if index in self._taken or self._done.is_set():
                self._room.release()
                executor.close()
                return
            self._made[index] = executor  # the worker may take it while it dials: connect() waits
        dial = getattr(executor, "dial_ahead", None)
        if dial is not None:
            with contextlib.suppress(Exception):  # its error is kept for connect() to raise
                dial()

    def _stop(self) -> None:
        """Close what was made ahead and never taken (a signal, or a worker that failed first)."""
        self._done.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            left, self._made = list(self._made.values()), {}
        for executor in left:
            with contextlib.suppress(Exception):
                executor.close()


__all__ = ["DialAhead"]
