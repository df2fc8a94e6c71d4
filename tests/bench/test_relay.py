"""scripts/relay.py, the latency relay of the bench: bytes pass unchanged, both ways, EOF included."""

from __future__ import annotations

import importlib.util
import os
import socket
import threading
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "relay.py"


def _relay_module():
    spec = importlib.util.spec_from_file_location("bench_relay", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture()
def echo_server():
    """A TCP server on loopback that sends back what it reads, then closes after the client's EOF."""
    listener = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            while data := conn.recv(65536):
                received.append(data)
                conn.sendall(data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname(), received
    listener.close()
    thread.join(5)


def test_relay_passes_bytes_unchanged_both_ways(echo_server) -> None:
    target, received = echo_server
    relay = _relay_module()
    payload = bytes(range(256)) * 4096 + os.urandom(100_000)  # every byte value, 1.1 MB
    with relay.RelayPool() as pool:
        address = pool.add(target, 0.005)
        assert address[0] == "127.0.0.1" and address[1] != target[1]
        with socket.create_connection(address, timeout=20) as sock:
            sender = threading.Thread(target=lambda: (sock.sendall(payload), sock.shutdown(socket.SHUT_WR)))
            sender.start()
            back = bytearray()
            while chunk := sock.recv(65536):  # ends when the server's close comes through the relay
                back += chunk
            sender.join(20)
        assert pool.relays[0].connections == 1
    assert b"".join(received) == payload
    assert bytes(back) == payload


def test_relay_refuses_non_loopback_addresses() -> None:
    relay = _relay_module()
    with pytest.raises(ValueError, match="loopback"):
        relay.Relay(("0.0.0.0", 0), ("127.0.0.1", 22), 0.01)
    with pytest.raises(ValueError, match="loopback"):
        relay.Relay(("127.0.0.1", 0), ("10.0.0.1", 22), 0.01)


def test_relay_counts_connections_and_round_trips(echo_server) -> None:
    target, _received = echo_server
    relay = _relay_module()
    with relay.RelayPool() as pool:
        address = pool.add(target, 0.0)
        with socket.create_connection(address, timeout=20) as sock:
            for word in (b"one", b"two", b"three"):  # three request/answer exchanges
                sock.sendall(word)
                got = b""
                while len(got) < len(word):
                    got += sock.recv(65536)
                assert got == word
        assert pool.relays[0].connections == 1 and pool.relays[0].turns.count == 3
