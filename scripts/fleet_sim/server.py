"""The simulator: N virtual SSH hosts on loopback, served by asyncssh in one asyncio process.

Each live host is one listening socket on its own 127.x address (an ephemeral port, so that runs
never collide), its own host key, and the one authorized client key. A connection goes through
:class:`~wire.Wire` (delay, bandwidth) and sshd's MaxStartups gate before asyncssh sees it. An exec
request is answered by :mod:`answers` from the recordings. Dead hosts are a bound socket that
never listens (the kernel refuses the connection); silent hosts accept and never say a word.
"""

from __future__ import annotations

import asyncio
import functools
import random
import socket
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh

from .answers import Answers
from .files import Endpoint, client_key
from .recordings import Recordings
from .spec import FleetSpec
from .wire import Wire

# What sshd writes to a connection it drops past MaxStartups, then closes it (openssh-portable
# sshd.c drop_connection(), the `msg` it writes, https://github.com/openssh/openssh-portable/blob/
# 0ef0f5a839831c213f24e3f2ae434765c607fb50/sshd.c#L588-L638); its accept loop calls it with the
# number of children that have not authenticated yet (sshd.c#L1145).
REFUSAL = b"Not allowed at this time\r\n"


@dataclass
class Host:
    index: int
    name: str
    address: str
    role: str
    key: asyncssh.SSHKey
    drifts: bool
    port: int = 0
    startups: int = 0  # connections accepted that have not authenticated yet (sshd's children_active)
    server: asyncio.AbstractServer | None = None
    sock: socket.socket | None = None  # a dead host's bound, never listening socket
    rng: random.Random = field(default_factory=random.Random)
    options: asyncssh.SSHServerConnectionOptions | None = None

    def endpoint(self) -> Endpoint:
        return Endpoint(self.name, self.address, self.port, self.role, self.key.export_public_key().decode().strip())


class HostServer(asyncssh.SSHServer):
    """asyncssh's per-connection callbacks: public-key auth only, and MaxStartups' bookkeeping."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.wire: Wire | None = Wire.current  # set by Wire.connection_made, which runs this factory

    def begin_auth(self, username: str) -> bool:
        return True

    def password_auth_supported(self) -> bool:
        return False

    def kbdint_auth_supported(self) -> bool:
        return False

    def auth_completed(self) -> None:
        self.sim.stats["logins"] += 1
        if self.wire is not None:
            self.wire.authenticated()


class Refused(asyncio.Protocol):
    """A connection sshd drops past MaxStartups: its one line, then the close."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        transport.write(REFUSAL)
        transport.close()


class Silent(asyncio.Protocol):
    """Accepts and never answers (a hung sshd, a black-holed port behind a proxy that accepted)."""

    def __init__(self, held: set[asyncio.Transport]) -> None:
        self.held = held

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.held.add(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.held.discard(self.transport)


class Simulator:
    """``await start()`` listens for every host of ``spec``; ``await close()`` stops them all.

    ``passthrough``: run each exec for real on this machine (``sh -c``) and record it there,
    instead of replaying ``recordings`` (the recorder's mode)."""

    def __init__(self, spec: FleetSpec, recordings: Recordings, folder: Path, *,
                 passthrough: Recordings | None = None, log: Callable[[str], None] = lambda _m: None) -> None:
        self.spec = spec
        self.folder = folder
        self.log = log
        self.stats: Counter[str] = Counter()
        self.peaks: Counter[str] = Counter()
        self.open_connections = 0
        self.hosts: list[Host] = []
        self.held: set[asyncio.Transport] = set()  # silent hosts' connections
        self.live: set[Wire] = set()  # SSH connections
        self.answers = Answers(spec, recordings, self.stats, passthrough)

    async def start(self) -> list[Endpoint]:
        self.key_path, key = client_key(self.folder)
        authorized = asyncssh.import_authorized_keys(key.export_public_key().decode())
        roles, drifting = self.spec.roles(), self.spec.drifting()
        loop = asyncio.get_running_loop()
        for i in range(self.spec.hosts):
            host = Host(i, f"sim-{i:04d}", self.spec.address(i), roles[i],
                        asyncssh.generate_private_key("ssh-ed25519"), i in drifting,
                        rng=random.Random(f"maxstartups:{self.spec.seed}:{i}"))
            self.hosts.append(host)
            if host.role == "dead":
                host.sock = socket.socket()
                host.sock.bind((host.address, 0))  # bound, never listening: connect() is refused
                host.port = host.sock.getsockname()[1]
                continue
            if host.role == "silent":
                factory: Callable[[], asyncio.BaseProtocol] = functools.partial(Silent, self.held)
            else:
                host.options = self._options(host, authorized)
                factory = functools.partial(self._accept, host)
            host.server = await loop.create_server(factory, host.address, 0, backlog=128)
            host.port = host.server.sockets[0].getsockname()[1]
        return [h.endpoint() for h in self.hosts]

    def _options(self, host: Host, authorized: asyncssh.SSHAuthorizedKeys) -> asyncssh.SSHServerConnectionOptions:
        return asyncssh.SSHServerConnectionOptions(
            server_factory=functools.partial(HostServer, self), server_host_keys=[host.key],
            authorized_client_keys=authorized, process_factory=functools.partial(self.answers.run, host),
            encoding=None, line_editor=False, agent_forwarding=False, x11_forwarding=False,
            allow_scp=False, server_version="OpenSSH_9.6 fleet-sim", login_timeout=120)

    def _accept(self, host: Host) -> asyncio.BaseProtocol:
        """A new connection to a live host: refused like sshd past MaxStartups, else an SSH session."""
        self.stats["connections"] += 1
        one_way, bandwidth = self.spec.rtt_ms / 2000.0, self.spec.bandwidth
        if self.spec.max_startups.should_drop(host.startups, host.rng):
            self.stats["refused_maxstartups"] += 1
            return Wire(Refused(), one_way, bandwidth, lambda: None, self.stats)
        host.startups += 1
        self.peaks["startups_one_host"] = max(self.peaks["startups_one_host"], host.startups)
        self.open_connections += 1
        self.peaks["open_connections"] = max(self.peaks["open_connections"], self.open_connections)
        assert host.options is not None
        conn = asyncssh.SSHServerConnection(asyncio.get_running_loop(), host.options)
        wire = Wire(conn, one_way, bandwidth, lambda: None, self.stats)
        wire.on_close = functools.partial(self._closed, host, wire)
        wire.on_auth = functools.partial(self._authenticated, host)
        self.live.add(wire)
        return wire

    def _authenticated(self, host: Host) -> None:
        host.startups -= 1

    def _closed(self, host: Host, wire: Wire) -> None:
        self.open_connections -= 1
        self.live.discard(wire)
        if not wire.authed:
            host.startups -= 1  # dropped before login: its startup slot frees, as sshd's child_close()

    def snapshot(self) -> dict[str, Any]:
        return {"stats": dict(self.stats), "peaks": dict(self.peaks), "open_connections": self.open_connections,
                "epoch": self.answers.epoch, "unknown_commands": self.answers.unknown[-5:]}

    async def close(self) -> None:
        for transport in list(self.held):
            transport.abort()
        for wire in list(self.live):
            wire.abort()
        for host in self.hosts:
            if host.server is not None:
                host.server.close()
            if host.sock is not None:
                host.sock.close()
        for host in self.hosts:
            if host.server is not None:
                await host.server.wait_closed()
