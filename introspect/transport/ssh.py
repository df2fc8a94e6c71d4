"""SSH executor: paramiko connections, one per hop of the ProxyJump chain, one channel per
concurrent probe.

Where to connect (``~/.ssh/config`` aliases, identities, ProxyJump chains, ProxyCommand)
is resolved by ``ssh_config.py``; each ProxyJump hop is a ``direct-tcpip`` channel
opened on the previous hop's connection and handed to the next ``SSHClient.connect`` as
its socket, and every hop's host key is checked against introspect's known_hosts.
Every paramiko/socket exception is translated into introspect's errors here and nowhere
else. Every phase has its own deadline: TCP connect, banner, auth, channel open, and
each probe; keepalives catch a peer (or a jump host) that died silently.
"""

from __future__ import annotations

import errno
import os
import socket
import threading
from dataclasses import dataclass

from introspect.errors import (
    AuthenticationFailed,
    ConnectionLost,
    HostKeyError,
    HostUnreachable,
    IntrospectError,
    UsageError,
)
from introspect.interrupts import refuse_new_work
from introspect.redact import remember
from introspect.transport.base import Executor, RemoteProcess, Target
from introspect.transport.hostkeys import KnownHosts
from introspect.transport.paramiko_lib import paramiko
from introspect.transport.settings import DEFAULT_CONNECT_TIMEOUT, ConnectionSettings, checked_identity
from introspect.transport.ssh_client import FleetSSHClient, SSHProcess
from introspect.transport.ssh_config import Hop, Resolver, load_config
from introspect.transport.ssh_dial import (
    HANDSHAKES,
    await_banner,
    dial,
    idle_poll,
    negotiation_error,
    no_delay,
    refusal_fix,
    wake_reader,
)


@dataclass(frozen=True)
class SSHTarget:
    """Where and how to connect over SSH. ``host`` may be an ``~/.ssh/config`` alias."""

    host: str
    port: int | None = None
    user: str | None = None
    identity: str | None = None
    jump: str | None = None
    connect_timeout: float | None = None  # None: ssh_config's ConnectTimeout, else 5 s
    banner_timeout: float = 10.0
    auth_timeout: float = 15.0
    keepalive: int = 5
    ssh_config: str | None = None  # None: ~/.ssh/config and /etc/ssh/ssh_config
    passphrase_env: str | None = None  # name of the env var holding the key's passphrase

    @property
    def label(self) -> str:
        return self.host


class SSHExecutor(Executor):
    def __init__(self, ssh: SSHTarget, known_hosts: KnownHosts) -> None:
        super().__init__(Target("ssh", ssh.host, ssh.port, ssh.user, ssh.label))
        self.ssh = ssh
        self.known_hosts = known_hosts
        self._conn: paramiko.SSHClient | None = None  # the target's connection
        self._hops: list[paramiko.SSHClient] = []  # the ProxyJump hops' connections, the first one first
        self._open_lock = threading.Lock()
        self._opened = 0
        self._dialing: socket.socket | None = None  # a direct hop's socket while its banner is awaited
        self._ahead: socket.socket | IntrospectError | None = None  # what dial_ahead found, for connect()
        self._tried = False  # connect() was called
        self._hop: Hop | None = None  # the resolved target, once looked up

    @classmethod
    def from_settings(cls, settings: ConnectionSettings) -> SSHExecutor:
        if not settings.host:
            raise UsageError("an SSH target needs a host", hint="# pass --host [user@]HOST")
        if settings.ssh_options or settings.control_persist:
            # paramiko has no -o or ControlPersist: a flag silently ignored would mislead.
            raise UsageError(f"--ssh-option and --control-persist apply to openssh://, not to ssh:// ({settings.host})",
                             hint="# add --transport openssh, or write the host as openssh://HOST")
        ssh = SSHTarget(host=settings.host, port=settings.port, user=settings.user,
                        identity=checked_identity(settings.identity),
                        jump=settings.jump, connect_timeout=settings.connect_timeout,
                        banner_timeout=settings.banner_timeout, auth_timeout=settings.auth_timeout,
                        ssh_config=settings.ssh_config, passphrase_env=settings.passphrase_env)
        known = settings.host_keys or KnownHosts(settings.known_hosts, accept_new=settings.accept_new)
        return cls(ssh, known)

    @property
    def connections_opened(self) -> int:
        return self._opened

    # -- connection -------------------------------------------------------------
    def _resolve(self) -> Hop:
        # The dial ahead and the login both need the hops: ssh_config is looked up once per executor.
        if self._hop is None:
            self._hop = self._lookup()
        return self._hop

    def _lookup(self) -> Hop:
        try:
            resolver = Resolver(*load_config(self.ssh.ssh_config), identity=self.ssh.identity,
                                connect_timeout=self.ssh.connect_timeout)
            return resolver.target(self.ssh.host, port=self.ssh.port, user=self.ssh.user, jump=self.ssh.jump)
        except IntrospectError as exc:
            exc.host = exc.host or self.label
            raise

    def connect(self) -> None:
        with self._open_lock:
            if self._conn is not None and _active(self._conn):
                return
            refuse_new_work(self.label)
            self._tried = True  # from now on a dial ahead would be a second, unused connection
            self._close_clients()
            opened: list[paramiko.SSHClient] = []
            try:
                previous: Hop | None = None
                for hop in self._resolve().chain():
                    sock = self._socket(hop, previous, opened[-1] if opened else None)
                    opened.append(self._open(hop, sock))
                    previous = hop
                # A signal stopped the run during this login: the fleet's cancel closed nothing
                # of it yet (it is not ours until assigned below), so it must not be kept.
                refuse_new_work(self.label)
            except BaseException:
                _close_all(opened)
                raise
            self._hops, self._conn = opened[:-1], opened[-1]
            self._opened += 1

    def _socket(self, hop: Hop, previous: Hop | None, through: paramiko.SSHClient | None) -> object | None:
        """What ``hop`` connects over: a channel forwarded by the previous hop (fabric's gateway),
        ssh_config's ProxyCommand, or None for paramiko's own TCP connect."""
        if previous is None or through is None:
            if not hop.proxy_command:
                return None
            try:
                return paramiko.ProxyCommand(hop.proxy_command)
            except (OSError, ValueError, paramiko.SSHException) as exc:
                raise HostUnreachable(f"cannot start the ProxyCommand for {hop.where} ({hop.proxy_command}): {exc}",
                                      hint="# check the ProxyCommand line of ssh_config",
                                      host=self.label, stage="connect") from None
        transport = through.get_transport()
        try:
            if transport is None:
                raise EOFError("its connection is closed")
            return transport.open_channel("direct-tcpip", dest_addr=(hop.host, hop.port), src_addr=("", 0),
                                          timeout=hop.connect_timeout)
        except paramiko.ChannelException as exc:
            # sshd's words for a failed forward (SSH_OPEN_CONNECT_FAILED: refused, unreachable;
            # SSH_OPEN_ADMINISTRATIVELY_PROHIBITED: AllowTcpForwarding no).
            raise HostUnreachable(f"jump host {previous.where} could not connect to {hop.where} ({exc.text})",
                                  hint="# check that sshd runs on that host and port and that the jump host may "
                                       "reach it (and allows TCP forwarding: AllowTcpForwarding)",
                                  host=self.label, stage="connect") from None
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise HostUnreachable(f"no connection to {hop.where} through jump host {previous.where}: {exc}",
                                  hint="# check the jump host, then rerun (or raise --connect-timeout)",
                                  host=self.label, stage="connect") from None

    def _open(self, hop: Hop, sock: object | None) -> paramiko.SSHClient:
        """One hop's SSH connection, its host key checked by introspect's known_hosts policy."""
        client = FleetSSHClient()
        client.set_missing_host_key_policy(self.known_hosts.policy())
        self.known_hosts.seed(client, hop.host, hop.port)
        kwargs: dict[str, object] = {
            "hostname": hop.host, "port": hop.port, "username": hop.user, "timeout": hop.connect_timeout,
            "banner_timeout": self.ssh.banner_timeout, "auth_timeout": self.ssh.auth_timeout,
            "channel_timeout": hop.connect_timeout + 5,
        }
        if sock is None:
            # A direct hop: our own TCP connect and first-line read (ssh_dial.py says why), maybe
            # done already by dial_ahead.
            sock = self._dialed_ahead() or self._dial(hop)
            kwargs["timeout"] = max(hop.connect_timeout, self.ssh.banner_timeout)  # paramiko's kex deadline now
        kwargs["sock"] = sock
        if hop.key_files:
            kwargs["key_filename"] = list(hop.key_files)
        if hop.explicit and self.ssh.passphrase_env and os.environ.get(self.ssh.passphrase_env):
            # hosts.yaml names the variable; the secret itself never lives in a file we read.
            kwargs["passphrase"] = remember(os.environ[self.ssh.passphrase_env])  # masked in every output
        try:
            with HANDSHAKES.slot(self.label):
                client.connect(**kwargs)
        except BaseException as exc:
            transport = client.get_transport()
            banner_seen = transport is not None and bool(transport.remote_version)
            client.close()
            if isinstance(exc, IntrospectError) or not isinstance(exc, Exception):
                raise
            error = self._connect_error(hop, exc, banner_seen)
            if error is None:
                raise
            raise error from None
        transport = client.get_transport()
        if transport is not None:
            transport.set_keepalive(self.ssh.keepalive)
            no_delay(transport.sock)
            idle_poll(transport.sock)
        return client

    def dial_ahead(self) -> None:
        """Dial a one-hop target now, before connect() (a fleet's look-ahead: client/fleet_ahead.py)."""
        with self._open_lock:
            if self._tried or self._ahead is not None:
                return
            try:
                chain = self._resolve().chain()
                if len(chain) == 1 and not chain[0].proxy_command:
                    self._ahead = self._dial(chain[0])
            except IntrospectError as exc:
                self._ahead = exc

    def _dialed_ahead(self) -> socket.socket | None:
        ahead, self._ahead = self._ahead, None
        if isinstance(ahead, IntrospectError):
            raise ahead
        return ahead

    def _dial(self, hop: Hop) -> socket.socket:
        """A TCP connection to ``hop`` whose next line is the SSH version (ssh_dial.await_banner); a
        close from another thread (the fleet's cancel) ends the wait for it."""
        try:
            sock = dial(hop.host, hop.port, hop.connect_timeout)
        except (OSError, paramiko.SSHException) as exc:
            error = self._connect_error(hop, exc)
            if error is None:
                raise
            raise error from None
        self._dialing = sock
        try:
            await_banner(sock, self.ssh.banner_timeout, where=hop.where, label=self.label,
                         fix=refusal_fix(hop.host, hop.port, hop.user))
        except BaseException:
            sock.close()
            raise
        finally:
            self._dialing = None
        return sock

    def _connect_error(self, hop: Hop, exc: Exception, banner_seen: bool = True) -> IntrospectError | None:
        """A failed ``SSHClient.connect`` in introspect's words; None: not one we know. ``banner_seen``:
        whether the server's version line had come (paramiko's transport knows)."""
        where = hop.where
        if isinstance(exc, paramiko.BadHostKeyException):
            return self.known_hosts.changed_error(
                exc.hostname if ":" in exc.hostname else _entry(hop.host, hop.port), exc.key, exc.expected_key)
        if isinstance(exc, paramiko.AuthenticationException):  # PasswordRequiredException included
            return AuthenticationFailed(
                f"authentication refused for user {hop.user!r} at {where} ({exc}); tried {self._keys_tried(hop)}",
                hint="# load the right key into ssh-agent, pass --identity FILE, or check --user",
                host=self.label, stage="auth")
        if isinstance(exc, paramiko.SSHException):
            return self._negotiation_error(hop, exc, banner_seen)
        if isinstance(exc, (paramiko.ssh_exception.NoValidConnectionsError, ConnectionRefusedError)):
            return HostUnreachable(f"connection refused by {where}",
                                   hint="# check that sshd runs there and listens on that port",
                                   host=self.label, stage="connect")
        if isinstance(exc, TimeoutError):
            return HostUnreachable(f"TCP connect to {where} timed out after {hop.connect_timeout:g} s",
                                   hint="# check the address, the network path and that the host is up "
                                        "(or raise --connect-timeout)",
                                   host=self.label, stage="connect")
        if isinstance(exc, socket.gaierror):
            return HostUnreachable(f"cannot resolve host name {hop.host!r}: {exc.strerror}",
                                   hint="# check the name, or the Host/HostName entry in ~/.ssh/config",
                                   host=self.label, stage="connect")
        if isinstance(exc, OSError):
            reason = errno.errorcode.get(exc.errno or 0, "") if exc.errno else ""
            return HostUnreachable(f"cannot connect to {where}: {exc.strerror or exc} {reason}".strip(),
                                   hint="# check the address and the network path",
                                   host=self.label, stage="connect")
        if isinstance(exc, EOFError):
            return HostUnreachable(f"{where} closed the connection during the handshake",
                                   hint="# check the server's sshd logs (MaxStartups, AllowUsers)",
                                   host=self.label, stage="handshake")
        return None

    def _negotiation_error(self, hop: Hop, exc: Exception, banner_seen: bool) -> IntrospectError:
        """paramiko's SSHException, by what its words say went wrong (ssh_dial.negotiation_error)."""
        return negotiation_error(exc, hop, label=self.label, banner_seen=banner_seen,
                                 banner_timeout=self.ssh.banner_timeout, keys_tried=lambda: self._keys_tried(hop))

    def _keys_tried(self, hop: Hop) -> str:
        """What authentication had to offer, in words (files and counts, never key material)."""
        defaults = [os.path.join("~", ".ssh", n) for n in ("id_rsa", "id_ecdsa", "id_ed25519")
                    if os.path.isfile(os.path.expanduser(os.path.join("~", ".ssh", n)))]
        agent = "ssh-agent not running (SSH_AUTH_SOCK unset)"
        if os.environ.get("SSH_AUTH_SOCK"):
            try:
                agent = f"ssh-agent with {len(paramiko.Agent().get_keys())} key(s)"
            except (paramiko.SSHException, OSError):
                agent = "ssh-agent not reachable at SSH_AUTH_SOCK"
        keys = ", ".join(dict.fromkeys([*hop.key_files, *defaults])) or "no key files"
        return f"{keys}; {agent}"

    def _close_clients(self) -> None:
        clients = [*self._hops, *([self._conn] if self._conn is not None else [])]
        self._conn, self._hops = None, []
        _close_all(clients)

    def close(self) -> None:
        super().close()
        for sock in (self._dialing, self._ahead):
            if isinstance(sock, socket.socket):
                sock.close()  # ends await_banner's wait (another thread's close: the fleet's cancel)
        self._ahead = None
        self._close_clients()

    # -- processes --------------------------------------------------------------
    def _spawn(self, argv: list[str]) -> RemoteProcess:
        import shlex

        self.connect()
        assert self._conn is not None
        transport = self._conn.get_transport()
        if transport is None or not transport.is_active():
            raise ConnectionLost("the SSH connection is closed", hint="# rerun", host=self.label,
                                 stage="channel")
        try:
            channel = transport.open_session(timeout=(self.ssh.connect_timeout or DEFAULT_CONNECT_TIMEOUT) + 5)
            channel.exec_command(" ".join(shlex.quote(word) for word in argv))
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise ConnectionLost(f"cannot open an SSH channel: {exc}",
                                 hint="# sshd may limit sessions (MaxSessions); check its logs",
                                 host=self.label, stage="channel") from None
        return SSHProcess(channel, transport, self.label)


def _active(client: paramiko.SSHClient) -> bool:
    transport = client.get_transport()
    return transport is not None and transport.is_active()


def _close_all(clients: list[paramiko.SSHClient]) -> None:
    """Close connections, the target's first, then each hop back to the first one."""
    for client in reversed(clients):
        try:
            wake_reader(client.get_transport())
            client.close()
        except Exception:  # noqa: BLE001 - best effort at shutdown
            pass


def _entry(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


__all__ = ["SSHExecutor", "SSHTarget", "HostKeyError"]
