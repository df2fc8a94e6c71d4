"""A userspace TCP relay that adds a fixed delay each way: WAN latency on loopback.

This kernel has no ``netem`` (and the bench must not need root), so ``scripts/bench``
puts one relay in front of every loopback sshd: a client connects to the relay's port,
the relay connects to sshd, and every chunk read on one side is written to the other
``delay_s`` after it arrived, in order. A round trip through it therefore takes at least
``2 * delay_s``; bandwidth is not limited. Bytes pass unchanged. Each relay counts the
connections and the round trips (client flights after server data) it carried.

Used as a module (``RelayPool``: an asyncio loop in one thread serving many relays) or
from the command line for a manual check::

    python scripts/relay.py --listen 127.0.0.1:2222 --to 127.0.0.1:22 --rtt-ms 20
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

CHUNK = 1 << 16
_senders: set[asyncio.Future[Any]] = set()  # strong references (asyncio keeps tasks weakly)


class Turns:
    """Round trips seen on one relay: a client-to-server flight that follows server data
    (or opens the connection) starts a new one. TCP's own handshake is not counted."""

    def __init__(self) -> None:
        self.count = 0
        self._last: dict[int, bool] = {}  # connection id -> the last data was the client's

    def saw(self, conn: int, from_client: bool) -> None:
        if from_client and not self._last.get(conn, False):
            self.count += 1
        self._last[conn] = from_client


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: float,
                seen: Callable[[], None] = lambda: None) -> None:
    """Copy reader to writer, each chunk ``delay_s`` after it was read (order kept)."""
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def deliver() -> None:
        while True:
            due, data = await queue.get()
            if not data:
                break
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        if writer.can_write_eof():
            writer.write_eof()  # the half-close travels with the same delay

    sender = asyncio.ensure_future(deliver())
    _senders.add(sender)
    sender.add_done_callback(_senders.discard)
    try:
        while True:
            data = await reader.read(CHUNK)
            if data:
                seen()
            queue.put_nowait((time.monotonic() + delay_s, data))
            if not data:
                break
        await sender
    except (ConnectionError, OSError):
        sender.cancel()
    finally:
        if not sender.done():
            sender.cancel()


class Relay:
    """One listening port forwarding to one target, ``delay_s`` each way."""

    def __init__(self, listen: tuple[str, int], target: tuple[str, int], delay_s: float) -> None:
        if not listen[0].startswith("127.") or not target[0].startswith("127."):
            raise ValueError("the relay only listens on and connects to loopback (127.0.0.0/8)")
        self.listen, self.target, self.delay_s = listen, target, max(0.0, delay_s)
        self.server: asyncio.AbstractServer | None = None
        self.connections = 0
        self.turns = Turns()
        # asyncio holds tasks weakly: a connection whose sockets are gone could be collected mid-copy.
        self._live: set[asyncio.Task[Any]] = set()

    async def start(self) -> tuple[str, int]:
        self.server = await asyncio.start_server(self._serve, self.listen[0], self.listen[1])
        host, port = self.server.sockets[0].getsockname()[:2]
        return host, port

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        if task is not None:
            self._live.add(task)
            task.add_done_callback(self._live.discard)
        try:
            target_r, target_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.close()
            return
        try:
            conn = self.connections
            await asyncio.gather(_pump(client_r, target_w, self.delay_s, lambda: self.turns.saw(conn, True)),
                                 _pump(target_r, client_w, self.delay_s, lambda: self.turns.saw(conn, False)))
        except asyncio.CancelledError:
            # Only stop() cancels a connection. On Python 3.11 asyncio's stream callback calls
            # exception() on the cancelled handler task and logs a traceback
            # (https://github.com/python/cpython/issues/113538): end the task normally instead.
            pass
        finally:
            for w in (client_w, target_w):
                with contextlib.suppress(Exception):
                    w.close()

    async def stop(self) -> None:
        """Stop listening and end every connection still open (its tasks cancelled and awaited)."""
        if self.server is not None:
            self.server.close()
        live = list(self._live) + [f for f in _senders if not f.done()]
        for task in live:
            task.cancel()
        await asyncio.gather(*live, return_exceptions=True)
        if self.server is not None:
            await self.server.wait_closed()


class RelayPool:
    """An asyncio loop in a daemon thread serving any number of relays; a context manager."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.relays: list[Relay] = []
        self.thread = threading.Thread(target=self.loop.run_forever, name="relay", daemon=True)
        self.thread.start()

    def add(self, target: tuple[str, int], delay_s: float, listen: tuple[str, int] | None = None) -> tuple[str, int]:
        """Start a relay to ``target`` (on ``listen``, default: target's address, a free port)."""
        relay = Relay(listen or (target[0], 0), target, delay_s)
        address = asyncio.run_coroutine_threadsafe(relay.start(), self.loop).result(10)
        self.relays.append(relay)
        return address

    def close(self) -> None:
        async def stop_all(relays: Iterable[Relay]) -> None:
            for relay in relays:
                await relay.stop()

        if self.loop.is_running():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(stop_all(self.relays), self.loop).result(10)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
        self.loop.close()

    def __enter__(self) -> RelayPool:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listen", type=_address, required=True, help="HOST:PORT to listen on (loopback)")
    parser.add_argument("--to", type=_address, required=True, help="HOST:PORT to forward to (loopback)")
    parser.add_argument("--rtt-ms", type=float, default=20.0, help="added round-trip time (half each way)")
    args = parser.parse_args()
    with RelayPool() as pool:
        host, port = pool.add(args.to, args.rtt_ms / 2000, args.listen)
        print(f"relay: {host}:{port} -> {args.to[0]}:{args.to[1]}, +{args.rtt_ms:g} ms RTT (Ctrl-C stops)",
              flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
