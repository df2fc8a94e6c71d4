"""The link of one simulated connection: delay each way, bandwidth, and sshd's startup accounting.

:class:`Wire` sits between the kernel's socket and asyncssh's connection protocol. Every chunk
read from the client reaches asyncssh ``one_way`` seconds later, and every chunk asyncssh writes
leaves ``one_way`` seconds later, in order (so a request/response exchange costs one RTT, and a
packet sent right after another waits behind it). With a bandwidth, each chunk also occupies the
link for ``len / bandwidth`` seconds. EOF and the connection's loss wait behind the data, so the
peer never sees a close before the bytes that preceded it. With no delay and no bandwidth the
wire forwards at once (no timer per chunk).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

_EOF = object()


class Lane:
    """One direction: items delivered in order, each at its due time."""

    def __init__(self, loop: asyncio.AbstractEventLoop, delay: float, bandwidth: float,
                 deliver: Callable[[Any], None]) -> None:
        self.loop = loop
        self.delay = delay
        self.bandwidth = bandwidth
        self.deliver = deliver
        self.queue: deque[tuple[float, Any]] = deque()
        self.busy_until = 0.0
        self.timer: asyncio.TimerHandle | None = None

    @property
    def immediate(self) -> bool:
        return self.delay <= 0 and self.bandwidth <= 0

    def push(self, item: Any, size: int = 0) -> None:
        if self.immediate and not self.queue:
            self.deliver(item)
            return
        now = self.loop.time()
        sent = now
        if self.bandwidth > 0 and size:
            sent = max(now, self.busy_until) + size / self.bandwidth
            self.busy_until = sent
        due = max(sent + self.delay, self.queue[-1][0] if self.queue else 0.0)
        self.queue.append((due, item))
        if self.timer is None:
            self.timer = self.loop.call_at(due, self._fire)

    def _fire(self) -> None:
        self.timer = None
        now = self.loop.time()
        while self.queue and self.queue[0][0] <= now:
            self.deliver(self.queue.popleft()[1])
        if self.queue:
            self.timer = self.loop.call_at(self.queue[0][0], self._fire)

    def drop(self) -> None:
        self.queue.clear()
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


class Wire(asyncio.Protocol):
    """Wraps the protocol of one accepted connection (see the module's docstring).

    ``on_close`` runs once when the connection is gone and ``on_auth`` when the client has logged in
    (the host's startup accounting); ``counters`` gets ``bytes_in`` and ``bytes_out`` added."""

    # The wire whose protocol is being started: asyncssh builds the connection's SSHServer inside
    # connection_made(), and that object needs its wire (the event loop runs one callback at a time).
    current: Wire | None = None

    def __init__(self, inner: asyncio.Protocol, one_way: float, bandwidth: float,
                 on_close: Callable[[], None], counters: dict[str, int]) -> None:
        self.inner = inner
        self.one_way = one_way
        self.bandwidth = bandwidth
        self.on_close = on_close
        self.counters = counters
        self.on_auth: Callable[[], None] = lambda: None
        self.transport: asyncio.Transport | None = None
        self.closing = False
        self.authed = False

    # -- the kernel's side ----------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        loop = asyncio.get_running_loop()
        self.inbound = Lane(loop, self.one_way, self.bandwidth, self._deliver_in)
        self.outbound = Lane(loop, self.one_way, self.bandwidth, self._deliver_out)
        Wire.current = self
        try:
            self.inner.connection_made(DelayedTransport(self))
        finally:
            Wire.current = None

    def authenticated(self) -> None:
        if not self.authed:
            self.authed = True
            self.on_auth()

    def abort(self) -> None:
        """Drop the connection now (a flaky host, or the simulator shutting down)."""
        self.outbound.drop()
        if self.transport is not None:
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        self.counters["bytes_in"] += len(data)
        self.inbound.push(data, len(data))

    def eof_received(self) -> bool | None:
        self.inbound.push(_EOF)
        return True  # keep our half open: the delayed EOF decides

    def connection_lost(self, exc: Exception | None) -> None:
        self.outbound.drop()
        self.inbound.push(("lost", exc))

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def _deliver_in(self, item: Any) -> None:
        if item is _EOF:
            if not self.inner.eof_received() and self.transport is not None:
                self.transport.close()
        elif isinstance(item, tuple):
            self.inner.connection_lost(item[1])
            self.on_close()
        else:
            self.inner.data_received(item)

    # -- the protocol's side -----------------------------------------------------------
    def write(self, data: bytes) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        self.counters["bytes_out"] += len(data)
        self.outbound.push(bytes(data), len(data))

    def _deliver_out(self, item: Any) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if item is _EOF:
            if transport.can_write_eof():
                transport.write_eof()
        elif item == "close":
            transport.close()
        else:
            transport.write(item)


class DelayedTransport(asyncio.Transport):
    """What the wrapped protocol writes through: the wire's outbound lane."""

    def __init__(self, wire: Wire) -> None:
        super().__init__()
        self.wire = wire

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.wire.write(bytes(data))

    def write_eof(self) -> None:
        self.wire.outbound.push(_EOF)

    def can_write_eof(self) -> bool:
        return True

    def close(self) -> None:
        if not self.wire.closing:
            self.wire.closing = True
            self.wire.outbound.push("close")

    def abort(self) -> None:
        self.wire.closing = True
        self.wire.outbound.drop()
        if self.wire.transport is not None:
            self.wire.transport.abort()

    def is_closing(self) -> bool:
        transport = self.wire.transport
        return self.wire.closing or transport is None or transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        transport = self.wire.transport
        return default if transport is None else transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        if self.wire.transport is not None:
            self.wire.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.wire.transport is not None:
            self.wire.transport.resume_reading()

    def is_reading(self) -> bool:
        return self.wire.transport is not None and self.wire.transport.is_reading()

    def get_write_buffer_size(self) -> int:
        transport = self.wire.transport
        return 0 if transport is None else transport.get_write_buffer_size()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        if self.wire.transport is not None:
            self.wire.transport.set_write_buffer_limits(high, low)
