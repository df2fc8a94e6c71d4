"""SSH executor: one paramiko connection per host (opened through fabric, which
resolves ``~/.ssh/config`` aliases, identities and ProxyJump), one channel per
concurrent probe.

Every paramiko/socket exception is translated into introspect's errors here
and nowhere else. Every phase has its own deadline: TCP connect, banner, auth,
channel open, and each probe; keepalives catch a peer that died silently.
"""

from __future__ import annotations

import errno
import os
import socket
import threading
import time
from dataclasses import dataclass

import paramiko
from fabric import Config, Connection
from paramiko.ssh_exception import NoValidConnectionsError

from introspect.errors import (
    AuthenticationFailed,
    ConnectionLost,
    HostKeyError,
    HostUnreachable,
    IntrospectError,
    UsageError,
)
from introspect.transport.base import Executor, RemoteProcess, Target
from introspect.transport.hostkeys import KnownHosts
from introspect.transport.settings import DEFAULT_CONNECT_TIMEOUT, ConnectionSettings, checked_identity


@dataclass(frozen=True)
class SSHTarget:
    """Where and how to connect over SSH. ``host`` may be an ``~/.ssh/config`` alias."""

    host: str
    port: int | None = None
    user: str | None = None
    identity: str | None = None
    jump: str | None = None
    connect_timeout: float = 5.0
    banner_timeout: float = 10.0
    auth_timeout: float = 15.0
    keepalive: int = 5
    ssh_config: str | None = None  # None: ~/.ssh/config and /etc/ssh/ssh_config
    passphrase_env: str | None = None  # name of the env var holding the key's passphrase

    @property
    def label(self) -> str:
        return self.host


class SSHProcess(RemoteProcess):
    def __init__(self, channel: paramiko.Channel, transport: paramiko.Transport, label: str) -> None:
        self._channel = channel
        self._transport = transport
        self._label = label

    def write_stdin(self, data: bytes) -> None:
        try:
            self._channel.sendall(data)
        except (OSError, EOFError, paramiko.SSHException):
            pass  # the command died at once; its stderr and exit status say why

    def read_stdout(self) -> bytes:
        return self._channel.recv(65536)

    def read_stderr(self) -> bytes:
        return self._channel.recv_stderr(65536)

    def wait(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while not self._channel.exit_status_ready():
            if not self._transport.is_active():
                raise ConnectionLost("the SSH connection dropped while a probe was running",
                                     hint="check that the host and its sshd are up, then rerun",
                                     host=self._label, stage="probe")
            if time.monotonic() > deadline:
                return None
            time.sleep(0.02)
        status = self._channel.recv_exit_status()
        if status == -1:
            # paramiko's "closed without an exit status": the session or the whole
            # connection died under us. Give the transport a moment to notice which.
            for _ in range(50):
                if not self._transport.is_active():
                    break
                time.sleep(0.02)
            raise ConnectionLost("the SSH session ended without an exit status (sshd or the host went away)",
                                 hint="check that the host and its sshd are up, then rerun",
                                 host=self._label, stage="probe")
        return status

    def kill(self) -> None:
        # Closing the channel closes the remote stdin: the probe's watchdog then
        # kills its task group and removes its temp dir.
        try:
            self._channel.close()
        except Exception:  # noqa: BLE001 - closing a dead channel must never fail a run
            pass


class SSHExecutor(Executor):
    def __init__(self, ssh: SSHTarget, known_hosts: KnownHosts) -> None:
        super().__init__(Target("ssh", ssh.host, ssh.port, ssh.user, ssh.label))
        self.ssh = ssh
        self.known_hosts = known_hosts
        self._conn: Connection | None = None
        self._open_lock = threading.Lock()
        self._opened = 0

    @classmethod
    def from_settings(cls, settings: ConnectionSettings) -> SSHExecutor:
        if not settings.host:
            raise UsageError("an SSH target needs a host", hint="pass --host [user@]HOST")
        if settings.ssh_options or settings.control_persist:
            # paramiko has no -o or ControlPersist: a flag silently ignored would mislead.
            raise UsageError(f"--ssh-option and --control-persist apply to openssh://, not to ssh:// ({settings.host})",
                             hint="add --transport openssh, or write the host as openssh://HOST")
        ssh = SSHTarget(host=settings.host, port=settings.port, user=settings.user,
                        identity=checked_identity(settings.identity),
                        jump=settings.jump, connect_timeout=settings.connect_timeout or DEFAULT_CONNECT_TIMEOUT,
                        banner_timeout=settings.banner_timeout, auth_timeout=settings.auth_timeout,
                        ssh_config=settings.ssh_config, passphrase_env=settings.passphrase_env)
        known = settings.host_keys or KnownHosts(settings.known_hosts, accept_new=settings.accept_new)
        return cls(ssh, known)

    @property
    def connections_opened(self) -> int:
        return self._opened

    # -- connection -------------------------------------------------------------
    def _connection(self, host: str, *, port: int | None, user: str | None,
                    gateway: Connection | None) -> Connection:
        config = Config(runtime_ssh_path=self.ssh.ssh_config) if self.ssh.ssh_config else Config()
        config.timeouts.connect = self.ssh.connect_timeout
        connect_kwargs: dict[str, object] = {
            "banner_timeout": self.ssh.banner_timeout,
            "auth_timeout": self.ssh.auth_timeout,
            "channel_timeout": self.ssh.connect_timeout + 5,
        }
        if self.ssh.identity:
            connect_kwargs["key_filename"] = [self.ssh.identity]
        if self.ssh.passphrase_env and os.environ.get(self.ssh.passphrase_env):
            # hosts.yaml names the variable; the secret itself never lives in a file we read.
            connect_kwargs["passphrase"] = os.environ[self.ssh.passphrase_env]
        kwargs: dict[str, object] = {"config": config, "connect_kwargs": connect_kwargs,
                                     "connect_timeout": self.ssh.connect_timeout}
        if port:
            kwargs["port"] = port
        if user:
            kwargs["user"] = user
        if gateway is not None:
            kwargs["gateway"] = gateway
        conn = Connection(host, **kwargs)
        self._secure(conn)
        return conn

    def _secure(self, conn: Connection) -> None:
        """Strict host keys on this hop and every ProxyJump hop fabric built from ssh_config."""
        hop: object = conn
        while isinstance(hop, Connection):
            hop.client.set_missing_host_key_policy(self.known_hosts.policy())
            self.known_hosts.seed(hop.client, hop.host, hop.port)
            hop = hop.gateway

    def connect(self) -> None:
        with self._open_lock:
            if self._conn is not None and self._conn.is_connected:
                return
            gateway = None
            if self.ssh.jump:
                gateway = self._connection(self.ssh.jump, port=None, user=None, gateway=None)
            conn = self._connection(self.ssh.host, port=self.ssh.port, user=self.ssh.user,
                                    gateway=gateway)
            self._open(conn)
            self._conn = conn
            self._opened += 1

    def _open(self, conn: Connection) -> None:
        where = f"{conn.host}:{conn.port}"
        timeout = self.ssh.connect_timeout
        try:
            conn.open()
        except IntrospectError:
            raise
        except paramiko.BadHostKeyException as exc:
            raise self.known_hosts.changed_error(
                exc.hostname if ":" in exc.hostname else _entry(conn.host, conn.port),
                exc.key, exc.expected_key) from None
        except (paramiko.AuthenticationException, paramiko.PasswordRequiredException) as exc:
            raise AuthenticationFailed(
                f"authentication refused for user {conn.user!r} at {where} ({exc}); tried {self._keys_tried(conn)}",
                hint="load the right key into ssh-agent, pass --identity FILE, or check --user",
                host=self.label, stage="auth") from None
        except NoValidConnectionsError:
            raise HostUnreachable(f"connection refused by {where}",
                                  hint="check that sshd runs there and listens on that port",
                                  host=self.label, stage="connect") from None
        except TimeoutError:
            raise HostUnreachable(f"TCP connect to {where} timed out after {timeout:g} s",
                                  hint="check the address, the network path and that the host is up "
                                       "(or raise --connect-timeout)",
                                  host=self.label, stage="connect") from None
        except socket.gaierror as exc:
            raise HostUnreachable(f"cannot resolve host name {conn.host!r}: {exc.strerror}",
                                  hint="check the name, or the Host/HostName entry in ~/.ssh/config",
                                  host=self.label, stage="connect") from None
        except ConnectionRefusedError:
            raise HostUnreachable(f"connection refused by {where}",
                                  hint="check that sshd runs there and listens on that port",
                                  host=self.label, stage="connect") from None
        except paramiko.SSHException as exc:
            raise self._negotiation_error(conn, str(exc)) from None
        except OSError as exc:
            reason = errno.errorcode.get(exc.errno or 0, "") if exc.errno else ""
            raise HostUnreachable(f"cannot connect to {where}: {exc.strerror or exc} {reason}".strip(),
                                  hint="check the address and the network path",
                                  host=self.label, stage="connect") from None
        except EOFError:
            raise HostUnreachable(f"{where} closed the connection during the handshake",
                                  hint="check the server's sshd logs (MaxStartups, AllowUsers)",
                                  host=self.label, stage="handshake") from None
        transport = conn.client.get_transport()
        if transport is not None:
            transport.set_keepalive(self.ssh.keepalive)

    def _negotiation_error(self, conn: Connection, text: str) -> IntrospectError:
        """paramiko's SSHException, by what its words say went wrong."""
        where = f"{conn.host}:{conn.port}"
        if "no authentication methods available" in text.lower():
            # paramiko's words when it had no key and no agent to offer at all.
            return AuthenticationFailed(
                f"no usable SSH key for user {conn.user!r} at {where}: tried {self._keys_tried(conn)}",
                hint="pass --identity FILE, load a key with `ssh-add`, or create one with `ssh-keygen`",
                host=self.label, stage="auth")
        if "banner" in text.lower():
            return HostUnreachable(
                f"no SSH banner from {where} within {self.ssh.banner_timeout:g} s ({text})",
                hint="the port may not be sshd, or sshd is refusing new connections (MaxStartups); "
                     "retry with fewer parallel hosts", host=self.label, stage="banner")
        return HostUnreachable(f"SSH negotiation with {where} failed: {text}",
                               hint="check the server's sshd logs", host=self.label, stage="handshake")

    def _keys_tried(self, conn: Connection) -> str:
        """What authentication had to offer, in words (files and counts, never key material)."""
        files = conn.connect_kwargs.get("key_filename") or []
        files = [files] if isinstance(files, str) else list(files)
        defaults = [os.path.join("~", ".ssh", n) for n in ("id_rsa", "id_ecdsa", "id_ed25519")
                    if os.path.isfile(os.path.expanduser(os.path.join("~", ".ssh", n)))]
        agent = "ssh-agent not running (SSH_AUTH_SOCK unset)"
        if os.environ.get("SSH_AUTH_SOCK"):
            try:
                agent = f"ssh-agent with {len(paramiko.Agent().get_keys())} key(s)"
            except (paramiko.SSHException, OSError):
                agent = "ssh-agent not reachable at SSH_AUTH_SOCK"
        keys = ", ".join(dict.fromkeys([*map(str, files), *defaults])) or "no key files"
        return f"{keys}; {agent}"

    def close(self) -> None:
        super().close()
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - best effort at shutdown
                pass
            self._conn = None

    # -- processes --------------------------------------------------------------
    def _spawn(self, argv: list[str]) -> RemoteProcess:
        import shlex

        self.connect()
        assert self._conn is not None
        transport = self._conn.client.get_transport()
        if transport is None or not transport.is_active():
            raise ConnectionLost("the SSH connection is closed", hint="rerun", host=self.label,
                                 stage="channel")
        try:
            channel = transport.open_session(timeout=self.ssh.connect_timeout + 5)
            channel.exec_command(" ".join(shlex.quote(word) for word in argv))
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise ConnectionLost(f"cannot open an SSH channel: {exc}",
                                 hint="sshd may limit sessions (MaxSessions); check its logs",
                                 host=self.label, stage="channel") from None
        return SSHProcess(channel, transport, self.label)


def _entry(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


__all__ = ["SSHExecutor", "SSHTarget", "HostKeyError"]
