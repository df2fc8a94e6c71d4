"""The server's first line, read before paramiko (transport/ssh_dial.py), against real TCP servers on
loopback that say what sshd says: its refusal past MaxStartups (one line, then the close: openssh-portable
sshd.c drop_connection(), https://github.com/openssh/openssh-portable/blob/0ef0f5a839831c213f24e3f2ae434765c607fb50/sshd.c#L588-L638),
a silent close, lines before the version line (RFC 4253 section 4.2), or nothing at all."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from introspect.errors import HostUnreachable
from introspect.transport.ssh_dial import StartupsRefused, await_banner, dial, refusal_fix

ADDRESS = "127.0.0.93"


@contextmanager
def server(say: bytes, *, close: bool) -> Iterator[int]:
    """A TCP server on loopback that writes ``say`` to each connection, then closes it or holds it open."""
    listener = socket.create_server((ADDRESS, 0))
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.sendall(say)
            if close:
                conn.close()
            else:
                held.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()
        for conn in held:
            conn.close()


def _wait(port: int, timeout: float = 2.0) -> socket.socket:
    sock = dial(ADDRESS, port, 2.0)
    await_banner(sock, timeout, where=f"{ADDRESS}:{port}", label="h", fix=refusal_fix(ADDRESS, port, "u"))
    return sock


def test_sshds_refusal_is_startups_refused_in_its_own_words() -> None:
    with server(b"Not allowed at this time\r\n", close=True) as port:
        started = time.monotonic()
        with pytest.raises(StartupsRefused) as info:
            _wait(port)
    assert time.monotonic() - started < 1.0
    assert "MaxStartups" in info.value.message and "'Not allowed at this time'" in info.value.message
    assert info.value.hint == (f"ssh -p {port} u@{ADDRESS} sudo sshd -T | grep -i maxstartups  # raise MaxStartups "
                               "(start:rate:full) in /etc/ssh/sshd_config and reload sshd, or rerun with a lower "
                               "--parallel")


def test_a_silent_close_is_a_refusal_that_names_the_candidates() -> None:
    with server(b"", close=True) as port, pytest.raises(StartupsRefused) as info:
        _wait(port)
    assert "closed the connection before its SSH banner: sshd's MaxStartups or PerSourcePenalties" in info.value.message


def test_lines_before_the_version_line_are_skipped_as_paramiko_skips_them() -> None:
    with server(b"welcome\r\nsecond line\r\nSSH-2.0-OpenSSH_9.6\r\n", close=False) as port:
        sock = _wait(port)
        try:
            sock.settimeout(2.0)
            assert sock.recv(100).startswith(b"SSH-2.0-OpenSSH_9.6")  # next to read: the version line
        finally:
            sock.close()


def test_nothing_at_all_is_the_banner_timeout_at_its_deadline() -> None:
    with server(b"", close=False) as port:
        started = time.monotonic()
        with pytest.raises(HostUnreachable) as info:
            _wait(port, timeout=0.6)
    assert 0.55 < time.monotonic() - started < 1.5
    assert not isinstance(info.value, StartupsRefused) and info.value.stage == "banner"
    assert info.value.message == f"no SSH banner from {ADDRESS}:{port} within 0.6 s (the connection was accepted " \
                                 "and nothing came)"
