"""Login pacing for a fleet: per sshd, additive increase and multiplicative decrease on its refusals.

sshd's ``MaxStartups start:rate:full`` (default ``10:30:100``) counts the connections to ONE sshd that
have not authenticated yet and drops new ones beyond ``start`` with a probability rising to certainty
at ``full`` (openssh-portable sshd.c ``should_drop_connection()``,
https://github.com/openssh/openssh-portable/blob/0ef0f5a839831c213f24e3f2ae434765c607fb50/sshd.c#L558-L578;
the default, servconf.c#L348-L353 at the same commit). A dropped connection gets one line and a close
(``drop_connection()``, sshd.c#L588-L638), which the SSH transport raises as
:class:`~introspect.transport.ssh_dial.StartupsRefused`. So the limit is per destination sshd, never
global: a thousand hosts with one sshd each can all be dialled at once, while a hundred containers
behind one bastion share its ten.

:class:`Pacer` keeps, per endpoint (the jump host when there is one, else address and port), a window
of logins in flight: ``MaxStartups``' default start (10, never refused by a lone client), plus
1/window for every login that got through (about one more per round of logins), halved on a refusal
(once per round: refusals of logins that began before the last cut do not cut again). A refused
login is retried after a jittered, doubling back-off while the host's retry budget lasts, then its
refusal is the host's result. The controller's CPU is bounded elsewhere: the SSH transport's
:data:`~introspect.transport.ssh_dial.HANDSHAKES` gate on key exchanges in flight.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Protocol, TypedDict

from introspect.transport.ssh_dial import HANDSHAKES, StartupsRefused

# sshd's default MaxStartups "10:30:100": no connection is dropped while fewer than 10 are
# unauthenticated (start), every one at 100 (full). servconf.c#L348-L353 (URL above).
DEFAULT_WINDOW = 10.0
MAX_WINDOW = 100.0
# A refused host keeps trying for as long as a silent one is waited for (the banner deadline):
# neither kind adds more than that to a run.
DEFAULT_RETRY_S = 10.0
FIRST_BACKOFF_S = 0.25
MAX_BACKOFF_S = 2.0


class Endpointed(Protocol):
    """What :func:`endpoint_of` reads of an inventory host."""

    @property
    def address(self) -> str: ...
    @property
    def port(self) -> int | None: ...
    @property
    def url(self) -> str | None: ...
    @property
    def jump(self) -> str | None: ...


def endpoint_of(host: Endpointed) -> str:
    """The sshd whose MaxStartups a login to ``host`` counts against first: its jump host's when it
    has one (every login through it is one more unauthenticated connection there), else its own.
    Names as the inventory gives them (two aliases of one HostName pace apart)."""
    if host.jump:
        return f"jump {host.jump}"
    return host.url or f"{host.address}:{host.port or 22}"


def job_endpoint(entry: Endpointed | None, host: str | None) -> str:
    """The endpoint of a job: its inventory entry's, else the ``--host`` it was given as is."""
    return endpoint_of(entry) if entry is not None else f"host {host or 'local'}"


@dataclass
class _Endpoint:
    window: float
    in_flight: int = 0
    cut_at: float = 0.0  # monotonic time of the last halving
    refusals: int = 0


class PacingStats(TypedDict):
    """The pacing counters of a run (the ``fleet`` member of the fleet documents)."""

    refusals: int
    retries: int
    refused_hosts: int
    refused_endpoints: int
    smallest_window: int
    handshakes_limit: int
    handshakes_peak: int


class Pacer:
    """Per-endpoint login windows (see the module doc); one per fleet run, shared by its workers."""

    def __init__(self, window: float = DEFAULT_WINDOW, ceiling: float = MAX_WINDOW,
                 retry_s: float = DEFAULT_RETRY_S, seed: int | None = None) -> None:
        self.window = max(1.0, window)
        self.ceiling = max(self.window, ceiling)
        self.retry_s = max(0.0, retry_s)
        self._cond = threading.Condition()
        self._endpoints: dict[Hashable, _Endpoint] = {}
        self._rng = random.Random(seed)
        self.refusals = self.retries = self.refused_hosts = 0

    def login(self, endpoint: Hashable, connect: Callable[[], None], cancelled: threading.Event) -> int:
        """``connect()`` within ``endpoint``'s window, retried on a refusal until the retry budget
        is spent (then the refusal is raised); the number of attempts made."""
        deadline = time.monotonic() + self.retry_s
        backoff = FIRST_BACKOFF_S
        attempts = 0
        while True:
            attempts += 1
            started = self._enter(endpoint, cancelled)
            try:
                connect()
            except StartupsRefused:
                self._leave(endpoint, started, refused=True)
                wait = backoff * self._rng.uniform(0.5, 1.5)
                if cancelled.is_set() or time.monotonic() + wait > deadline:
                    with self._cond:
                        self.refused_hosts += 1
                    raise
                with self._cond:
                    self.retries += 1
                cancelled.wait(wait)
                backoff = min(2 * backoff, MAX_BACKOFF_S)
                continue
            except BaseException:
                self._leave(endpoint, started, refused=False, grow=False)
                raise
            self._leave(endpoint, started, refused=False)
            return attempts

    def _enter(self, endpoint: Hashable, cancelled: threading.Event) -> float:
        with self._cond:
            state = self._endpoints.setdefault(endpoint, _Endpoint(self.window))
            # A cancelled run stops waiting: the login then meets the transports' refusal of new work.
            while state.in_flight >= int(state.window) and not cancelled.is_set():
                self._cond.wait(0.2)
            state.in_flight += 1
            return time.monotonic()

    def _leave(self, endpoint: Hashable, started: float, *, refused: bool, grow: bool = True) -> None:
        with self._cond:
            state = self._endpoints[endpoint]
            state.in_flight -= 1
            if refused:
                self.refusals += 1
                state.refusals += 1
                if started >= state.cut_at:  # one cut per round of logins, as TCP cuts once per RTT
                    state.window = max(1.0, state.window / 2)
                    state.cut_at = time.monotonic()
            elif grow:
                state.window = min(self.ceiling, state.window + 1.0 / state.window)
            self._cond.notify_all()

    def window_of(self, endpoint: Hashable) -> float:
        with self._cond:
            state = self._endpoints.get(endpoint)
            return self.window if state is None else state.window

    def stats(self) -> PacingStats:
        with self._cond:
            refused = [s for s in self._endpoints.values() if s.refusals]
            smallest = min((s.window for s in self._endpoints.values()), default=self.window)
            return {"refusals": self.refusals, "retries": self.retries, "refused_hosts": self.refused_hosts,
                    "refused_endpoints": len(refused), "smallest_window": int(smallest),
                    "handshakes_limit": HANDSHAKES.limit, "handshakes_peak": HANDSHAKES.peak}


__all__ = ["DEFAULT_RETRY_S", "DEFAULT_WINDOW", "MAX_WINDOW", "PacingStats", "Pacer", "endpoint_of", "job_endpoint"]
