"""How a virtual host answers an exec request: replayed from the recordings, by its role.

- introspect's exec (``python -B -c BOOT``, the envelope on stdin): the recorded reply of that
  request, its frames rewritten per host by :mod:`variation` unless the fleet is replayed verbatim;
- the peers' version one-liner: the recorded ``sys.version`` line (varied per host the same way);
- anything else: exit 127 and a line on stderr saying nothing was recorded for it (counted).

Roles: ``slow`` answers ``slow_s`` late, ``flaky`` drops the connection after login with
probability ``flaky_p`` (seeded per host), ``hang`` never answers (until the client closes).
In passthrough mode every command runs for real under ``sh -c`` and is recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from typing import TYPE_CHECKING, Any

import asyncssh

from . import variation
from .recordings import PEER, Exchange, Recordings, envelope_signature, is_introspect, is_peer_job
from .spec import FleetSpec

if TYPE_CHECKING:
    from .server import Host

CHUNK = 1 << 16


class Answers:
    def __init__(self, spec: FleetSpec, recordings: Recordings, stats: Counter[str],
                 passthrough: Recordings | None = None) -> None:
        self.spec = spec
        self.recordings = recordings
        self.stats = stats
        self.passthrough = passthrough
        self.epoch = 0  # drift: drifting hosts change their versions when this changes
        self.unknown: list[str] = []
        self._flaky: dict[int, random.Random] = {}

    async def run(self, host: Host, process: asyncssh.SSHServerProcess[bytes]) -> None:
        """asyncssh's process_factory: one exec request, answered and closed."""
        self.stats["execs"] += 1
        try:
            if self.passthrough is not None:
                process.exit(await self._passthrough(process))
                return
            status = await self._answer(host, process)
            if status is not None:
                process.exit(status)
        except (asyncssh.Error, ConnectionError, BrokenPipeError, asyncio.IncompleteReadError):
            self.stats["execs_cut"] += 1  # the client went away first
        finally:
            process.close()

    async def _answer(self, host: Host, process: asyncssh.SSHServerProcess[bytes]) -> int | None:
        command = process.command or ""
        if is_introspect(command):
            name, _readable = envelope_signature(await process.stdin.readline())
        elif is_peer_job(command):
            name = PEER
        else:
            self.unknown.append(command[:200])
            self.stats["exec:unknown"] += 1
            process.stderr.write(b"fleet-sim: nothing was recorded for this command\n")
            return 127
        self.stats[f"exec:{name}"] += 1
        if not await self._role_allows(host, process):
            return None
        exchange = self.recordings.get(name)
        if exchange is None:
            self.stats["exec:unrecorded"] += 1
            process.stderr.write(f"fleet-sim: no recording of the request {name!r}\n".encode())
            return 1
        stdout = exchange.stdout
        if self.spec.vary:
            stdout = variation.vary(name, stdout, host.index, self.spec.seed, self.epoch if host.drifts else 0)
        process.stdout.write(stdout)
        process.stderr.write(exchange.stderr)
        await process.stdout.drain()
        self.stats["answered"] += 1
        return exchange.exit

    async def _role_allows(self, host: Host, process: asyncssh.SSHServerProcess[bytes]) -> bool:
        """Play the host's role before answering; False: no answer comes (dropped or hung)."""
        if host.role == "slow":
            await asyncio.sleep(self.spec.slow_s)
        elif host.role == "flaky":
            rng = self._flaky.setdefault(host.index, random.Random(f"flaky:{self.spec.seed}:{host.index}"))
            if rng.random() < self.spec.flaky_p:
                self.stats["dropped_flaky"] += 1
                conn: Any = process.get_extra_info("connection")
                conn.abort()
                return False
        elif host.role == "hang":
            self.stats["hung"] += 1
            while await process.stdin.read(CHUNK):
                pass  # until the client gives up and closes the channel
            return False
        return True

    # -- recording ----------------------------------------------------------------------
    async def _passthrough(self, process: asyncssh.SSHServerProcess[bytes]) -> int:
        """Run the command here for real, relay both ways, and record the exchange."""
        assert self.passthrough is not None
        command = process.command or ""
        loop = asyncio.get_running_loop()
        started = loop.time()
        proc = await asyncio.create_subprocess_exec("/bin/sh", "-c", command, stdin=asyncio.subprocess.PIPE,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        first = bytearray()
        out, err = bytearray(), bytearray()
        feeder = asyncio.ensure_future(_feed(process, proc, first))
        assert proc.stdout is not None and proc.stderr is not None
        await asyncio.gather(_pump(proc.stdout, process.stdout, out), _pump(proc.stderr, process.stderr, err))
        status = await proc.wait()
        feeder.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await feeder
        request: dict[str, Any] = {"command_head": command[:120]}
        if is_introspect(command) and b"\n" in first:
            name, readable = envelope_signature(bytes(first).split(b"\n", 1)[0] + b"\n")
            request.update(readable)
        elif is_peer_job(command):
            name = PEER
        else:
            return status
        self.passthrough.exchanges[name] = Exchange(bytes(out), bytes(err), status, request, loop.time() - started)
        self.stats[f"recorded:{name}"] += 1
        return status


async def _feed(process: asyncssh.SSHServerProcess[bytes], proc: asyncio.subprocess.Process, first: bytearray) -> None:
    """The client's stdin into the command; EOF (the client closed) closes the command's stdin."""
    assert proc.stdin is not None
    try:
        while data := await process.stdin.read(CHUNK):
            if b"\n" not in first:
                first.extend(data)
            proc.stdin.write(data)
            await proc.stdin.drain()
    except (asyncssh.Error, ConnectionError, BrokenPipeError):
        pass
    with contextlib.suppress(OSError):
        proc.stdin.close()


async def _pump(source: asyncio.StreamReader, sink: asyncssh.SSHWriter[bytes], copy: bytearray) -> None:
    while data := await source.read(CHUNK):
        copy.extend(data)
        with contextlib.suppress(asyncssh.Error, ConnectionError, BrokenPipeError):
            sink.write(data)
