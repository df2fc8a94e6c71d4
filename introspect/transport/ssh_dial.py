"""The first steps of a direct SSH login, before paramiko: the TCP connect, the server's first line,
and the process-wide cap on key exchanges in flight.

Why read the first line here rather than leave it to paramiko: its transport thread reports a
server that closed at once and one that never spoke in the same words ("Error reading SSH protocol
banner"), and when its negotiation timeout runs out first, as "No existing session". The two call for
opposite actions. sshd past ``MaxStartups`` writes one line and closes (openssh-portable sshd.c
``drop_connection()``: ``msg = "Not allowed at this time\\r\\n"``, written, then the socket closed,
https://github.com/openssh/openssh-portable/blob/0ef0f5a839831c213f24e3f2ae434765c607fb50/sshd.c#L588-L638):
that connection is worth retrying a little later (:class:`StartupsRefused`, which the fleet runner's
pacing backs off on). A server that never speaks has had its chance once its banner deadline is over.

:data:`HANDSHAKES` bounds the logins whose key exchange and authentication run at once in this
process: that part is the controller's CPU (curve25519, host-key and client-key signatures in
paramiko's Python threads), while the TCP connect and the banner wait before it cost nothing, so
silent hosts never hold a slot.
"""

from __future__ import annotations

import errno
import os
import shlex
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from introspect.errors import AuthenticationFailed, HostUnreachable, IntrospectError
from introspect.interrupts import refuse_new_work

if TYPE_CHECKING:
    from introspect.transport.ssh_config import Hop

# sshd's own words for a connection dropped past MaxStartups (sshd.c drop_connection(), above).
MAX_STARTUPS_WORDS = b"Not allowed at this time"
_POLL_S = 0.2  # how often a wait looks at the run's signals and at a close from another thread
_LINES_BEFORE_BANNER = 100  # paramiko's _check_banner reads at most 100 lines before the version line


class StartupsRefused(HostUnreachable):
    """sshd closed a new connection before its banner: past ``MaxStartups`` (its words say so), or an
    access rule that closes silently. Worth a retry later; the fleet runner paces on it."""


def dial(host: str, port: int, timeout: float) -> socket.socket:
    """A connected TCP socket to ``host:port``, each address family tried in turn as paramiko does
    (``SSHClient.connect`` without ``sock``), with the same exceptions for the caller to word."""
    errors: dict[tuple[str, int] | tuple[str, int, int, int], Exception] = {}
    for family, kind, proto, _name, address in socket.getaddrinfo(host, port, socket.AF_UNSPEC, socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        sock.settimeout(timeout)
        try:
            sock.connect(address)
        except OSError as exc:
            sock.close()
            if exc.errno not in (errno.ECONNREFUSED, errno.EHOSTUNREACH):
                raise
            errors[(str(address[0]), int(address[1]))] = exc
            continue
        return sock
    # Imported here: the fleet's pacer imports this module, and a run without SSH hosts (health
    # of local venvs) never loads paramiko (tests/cli/test_lazy_imports.py).
    from introspect.transport.paramiko_lib import paramiko

    raise paramiko.ssh_exception.NoValidConnectionsError(errors)


def await_banner(sock: socket.socket, timeout: float, *, where: str, label: str, fix: str) -> None:
    """Return once the server's version line (``SSH-``) is next to read, having consumed the lines
    before it that RFC 4253 section 4.2 allows (paramiko would skip them too). A close before it
    raises :class:`StartupsRefused`; no version line within ``timeout`` raises the banner timeout.
    ``fix``: the refusal's pasteable command. A close of ``sock`` from another thread (the fleet's
    cancel) ends the wait."""
    deadline = time.monotonic() + timeout
    said: list[bytes] = []
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            came = f"it said {b''.join(said).decode('utf-8', 'replace').strip()!r}, no version line" if said else \
                "the connection was accepted and nothing came"
            raise HostUnreachable(f"no SSH banner from {where} within {timeout:g} s ({came})",
                                  hint="# check that this port is sshd and that the host is not hung, "
                                       "or raise --banner-timeout", host=label, stage="banner")
        refuse_new_work(label)
        try:
            head = _peek(sock, min(remaining, _POLL_S))
        except TimeoutError:
            continue
        if sock.fileno() < 0:
            raise HostUnreachable(f"the connection to {where} was closed before its SSH banner",
                                  hint="# the run was stopped; rerun", host=label, stage="banner")
        endless = len(said) >= _LINES_BEFORE_BANNER or (head is not None and len(head) >= 4096 and b"\n" not in head)
        if head is None or head.startswith(b"SSH-") or endless:
            return  # a socket error, the version line, or endless noise: paramiko words what follows
        if not head:
            raise _refused(where, label, fix, b"".join(said))
        newline = head.find(b"\n")
        if newline < 0:
            time.sleep(0.01)  # part of a line (maybe "SS" of "SSH-"): wait for the rest of it
            continue
        said.append(sock.recv(newline + 1))


def _peek(sock: socket.socket, timeout: float) -> bytes | None:
    """What the server sent so far, left unread (b"": it closed), waiting up to ``timeout`` for a
    first byte; None: a socket error (paramiko words what follows). A blocking read with a timeout,
    not select(), which fails on descriptors past 1023 (a run dialling hosts ahead opens many)."""
    try:
        sock.settimeout(timeout)
        return sock.recv(4096, socket.MSG_PEEK)
    except TimeoutError:
        raise
    except OSError:
        return None


def _refused(where: str, label: str, fix: str, said: bytes) -> StartupsRefused:
    words = said.decode("utf-8", "replace").strip()
    if MAX_STARTUPS_WORDS in said:
        return StartupsRefused(f"sshd at {where} refused the connection before its banner: too many unauthenticated "
                               f"connections at once (MaxStartups; it said {words!r})",
                               hint=fix, host=label, stage="banner")
    told = f" (it said {words!r})" if words else ""
    return StartupsRefused(f"{where} closed the connection before its SSH banner{told}: sshd's MaxStartups or "
                           "PerSourcePenalties, or an access rule (TCP wrappers, a firewall's rate limit)",
                           hint=fix, host=label, stage="banner")


def refusal_fix(host: str, port: int, user: str | None) -> str:
    """The pasteable command of a refusal: read the server's MaxStartups, then what to change."""
    target = shlex.quote(f"{user}@{host}" if user else host)
    port_flag = "" if port == 22 else f"-p {port} "
    return (f"ssh {port_flag}{target} sudo sshd -T | grep -i maxstartups  # raise MaxStartups (start:rate:full) in "
            "/etc/ssh/sshd_config and reload sshd, or rerun with a lower --parallel")


def no_delay(sock: object) -> None:
    """Send small packets at once. paramiko leaves Nagle's algorithm on, so a channel-open or
    exec request written while the previous packet is unacknowledged waits for the peer's
    delayed ACK: 40 ms per request on Linux, measured on every channel of a loopback probe."""
    if isinstance(sock, socket.socket) and sock.family in (socket.AF_INET, socket.AF_INET6):
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass  # a socket that refuses the option only costs the delay


# How often a logged-in connection's paramiko thread wakes while nothing comes: paramiko polls its
# socket every 0.1 s (Transport._active_check_timeout) to notice a close and to send keepalives,
# which for hundreds of connections is thousands of wake-ups a second contending for the
# interpreter lock. After login nothing needs it sooner: keepalives are seconds apart and a close
# wakes the thread itself (wake_reader).
IDLE_POLL_S = 1.0


def idle_poll(sock: object) -> None:
    """Let a logged-in connection's reader thread wait IDLE_POLL_S between its checks."""
    if isinstance(sock, socket.socket):
        sock.settimeout(IDLE_POLL_S)


def wake_reader(transport: object) -> None:
    """End a connection's reader thread now rather than at its next poll: a shutdown makes its
    blocked read return (closing the socket alone does not, on Linux)."""
    sock = getattr(transport, "sock", None)
    if isinstance(sock, socket.socket):
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # not connected any more: nothing blocks on it


def negotiation_error(exc: Exception, hop: Hop, *, label: str, banner_seen: bool, banner_timeout: float,
                      keys_tried: Callable[[], str]) -> IntrospectError:
    """paramiko's SSHException from ``SSHClient.connect``, by what its words say went wrong.
    ``banner_seen``: whether the server's version line had come (paramiko's transport knows)."""
    text = str(exc)
    if "no authentication methods available" in text.lower():
        # paramiko's words when it had no key and no agent to offer at all.
        return AuthenticationFailed(f"no usable SSH key for user {hop.user!r} at {hop.where}: tried {keys_tried()}",
                                    hint="# pass --identity FILE, load a key with `ssh-add`, or create one with "
                                         "`ssh-keygen`", host=label, stage="auth")
    if "banner" in text.lower() and isinstance(exc.__context__, EOFError):
        # A hop reached through a jump host or a ProxyCommand (await_banner reads a direct hop's banner).
        return StartupsRefused(f"{hop.where} closed the connection before its SSH banner ({text})",
                               hint=refusal_fix(hop.host, hop.port, hop.user), host=label, stage="banner")
    if "banner" in text.lower() or not banner_seen:
        # paramiko's "No existing session" when its negotiation deadline (the connect timeout for a
        # proxied hop) ended before any banner came: that host is silent, nothing else.
        deadline = banner_timeout if "banner" in text.lower() else min(hop.connect_timeout, banner_timeout)
        return HostUnreachable(f"no SSH banner from {hop.where} within {deadline:g} s",
                               hint="# check that this port is sshd and that the host is not hung, "
                                    "or raise --banner-timeout", host=label, stage="banner")
    if text in ("No existing session", "Negotiation timed out."):
        return HostUnreachable(f"the SSH key exchange with {hop.where} did not finish within "
                               f"{max(hop.connect_timeout, banner_timeout):g} s",
                               hint="# the host or the path to it is slow or overloaded: raise --connect-timeout, "
                                    "or lower --parallel", host=label, stage="handshake")
    return HostUnreachable(f"SSH negotiation with {hop.where} failed: {text}",
                           hint="# check the server's sshd logs", host=label, stage="handshake")


class HandshakeGate:
    """A counting gate on the logins whose key exchange runs now, and the most seen at once."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._slots = threading.BoundedSemaphore(self.limit)
        self._lock = threading.Lock()
        self._now = 0
        self.peak = 0
        self.waited = 0  # logins that found every slot taken

    @contextmanager
    def slot(self, label: str) -> Iterator[None]:
        if not self._slots.acquire(blocking=False):
            with self._lock:
                self.waited += 1
            while not self._slots.acquire(timeout=_POLL_S):
                refuse_new_work(label)  # a signal: stop waiting (the run is being cancelled)
        with self._lock:
            self._now += 1
            self.peak = max(self.peak, self._now)
        try:
            yield
        finally:
            with self._lock:
                self._now -= 1
            self._slots.release()


def default_handshakes() -> int:
    """Key exchanges in flight at once: 16 per core, at most 32. The kex and authentication run in
    paramiko's Python threads, so the process does them about one core's worth at a time whatever
    the machine; beyond that, more logins in flight only add threads contending for the
    interpreter lock, whose hand-offs cost the kernel as much as the work. Below it, the logins'
    round trips (about 4 per login: 0.2 s at 50 ms) set the pace. Measured on 1,000 simulated
    hosts at 50 ms RTT, 2 cores, ``--parallel 200`` (docs/performance.md "Large fleets"), after the
    controller's per-host work was cut: 16 in flight 17.3-17.7 s and 12.4 CPU-s, 32 in flight
    14.7-15.5 s and 14.2-14.9 CPU-s, 48 no faster than 32 and more CPU; before that cut, 128 in
    flight took 24 CPU-s against 17-19 at 16."""
    return 16 * min(os.cpu_count() or 1, 2)


HANDSHAKES = HandshakeGate(default_handshakes())


__all__ = ["HANDSHAKES", "IDLE_POLL_S", "MAX_STARTUPS_WORDS", "HandshakeGate", "StartupsRefused", "await_banner", "dial",
           "idle_poll", "negotiation_error", "no_delay", "refusal_fix", "wake_reader"]
