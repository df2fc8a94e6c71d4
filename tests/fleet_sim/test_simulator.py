"""The fleet simulator's own behaviour, through the product's real SSH executor (paramiko).

Replayed frames reach the client byte for byte; RTT and bandwidth delay what they should; MaxStartups
refuses like sshd (openssh-portable sshd.c should_drop_connection(), cited in scripts/fleet_sim/spec.py);
dead, silent, slow, flaky and hung hosts behave as named; host keys and the client key are real. And end to
end: the real ``introspect health --json`` over 20 simulated hosts, one dead and one silent. (One file: the
session's recording is made once per test worker.)
"""

from __future__ import annotations

import json
import random
import socket
import time
from pathlib import Path

import pytest

from introspect.errors import AuthenticationFailed, ConnectionLost, HostKeyError, HostUnreachable
from introspect.transport import shipping
from scripts.fleet_sim import variation
from scripts.fleet_sim.recordings import PEER, PEER_JOB, Recordings
from scripts.fleet_sim.server import REFUSAL
from scripts.fleet_sim.spec import FleetSpec, MaxStartups

from .conftest import Fleet, fleet, run_module

pytestmark = pytest.mark.timeout(60)


def health_call(recordings: Recordings) -> tuple[list[str], bytes]:
    """The exec line and stdin of a health task, as the controller sends them."""
    python = recordings.meta["python"]
    request = recordings.exchanges["health"].request["request"]
    return shipping.command_argv(python), shipping.envelope("health", request, timeout=60)


def test_replayed_frames_reach_the_client_byte_for_byte(recordings: Recordings, tmp_path: Path) -> None:
    argv, stdin = health_call(recordings)
    model = recordings.exchanges["model"]
    model_stdin = shipping.envelope("model", model.request["request"], timeout=60)
    with fleet(FleetSpec(3, first_address="127.1.16.1", vary=False), recordings, tmp_path) as f:
        for i in range(3):
            with f.executor(i) as ex:
                got = ex.execute(argv, stdin, 30)
                assert (got.stdout, got.stderr, got.exit_status) == (
                    recordings.exchanges["health"].stdout, recordings.exchanges["health"].stderr, 0)
                got = ex.execute(argv, model_stdin, 30)
                assert got.stdout == model.stdout and got.exit_status == model.exit
                peer = ex.execute(["sh", "-c", PEER_JOB], b"", 30)
                assert peer.stdout == recordings.exchanges[PEER].stdout
        # The product reads the replayed reply as its own: the health facts of the recorded venv.
        with f.executor(1) as ex:
            reply = ex.run_python(recordings.meta["python"], "health", {}, timeout=30)
        assert reply.facts["python"]["executable"] == recordings.meta["python"]
        assert f.sim.stats["exec:health"] == 4 and f.sim.stats["exec:model"] == 3


def test_variation_is_per_host_deterministic_and_valid(recordings: Recordings) -> None:
    stdout = recordings.exchanges["health"].stdout
    seen = {variation.vary("health", stdout, i, 7, 0) for i in range(8)}
    assert len(seen) > 1  # hosts differ ...
    assert variation.vary("health", stdout, 3, 7, 0) == variation.vary("health", stdout, 3, 7, 0)  # ... by seed
    for out in seen:
        (frame,) = shipping.parse_frames(out)
        dists = frame["facts"]["distributions"]
        recorded = shipping.parse_frames(stdout)[0]["facts"]["distributions"]
        for name in variation.PACKAGES:  # the same or a later patch release of the same minor
            old, new = recorded[name]["version"].split("."), dists[name]["version"].split(".")
            assert new[:2] == old[:2] and int(new[2]) - int(old[2]) in (0, 1, 2)
    assert variation.vary("health", stdout, 3, 7, 1) != variation.vary("health", stdout, 3, 7, 0)  # drift
    line = variation.vary(PEER, recordings.exchanges[PEER].stdout, 2, 7, 0)
    assert line.split(b" ", 1)[1] == recordings.exchanges[PEER].stdout.split(b" ", 1)[1]


def _timed_exec(f: Fleet, argv: list[str], stdin: bytes) -> tuple[float, float]:
    """Seconds to log in, and seconds of one exec on the open connection."""
    ex = f.executor(0)
    started = time.monotonic()
    ex.connect()
    connected = time.monotonic()
    try:
        result = ex.execute(argv, stdin, 30)
        assert result.exit_status == 0
    finally:
        ex.close()
    return connected - started, time.monotonic() - connected


def test_rtt_and_bandwidth_are_applied(recordings: Recordings, tmp_path: Path) -> None:
    argv, stdin = health_call(recordings)
    with fleet(FleetSpec(1, first_address="127.1.17.1"), recordings, tmp_path / "fast") as f:
        fast_login, fast_exec = _timed_exec(f, argv, stdin)
    with fleet(FleetSpec(1, first_address="127.1.17.2", rtt_ms=150), recordings, tmp_path / "slow") as f:
        login, exec_s = _timed_exec(f, argv, stdin)
    # Login is >= 4 exchanges (banner, kex, new keys + service, auth); an exec >= 2 (open, exec + reply).
    assert login >= 4 * 0.150 > fast_login
    assert exec_s >= 2 * 0.150 > fast_exec
    bandwidth = 400_000.0
    with fleet(FleetSpec(1, first_address="127.1.17.3", bandwidth=bandwidth), recordings, tmp_path / "bw") as f:
        _login, exec_s = _timed_exec(f, argv, stdin)
        moved = f.sim.stats["bytes_in"]  # the envelope dominates (the health task's shipped modules)
    assert len(stdin) > 30_000 and moved > len(stdin) and exec_s >= len(stdin) / bandwidth


class Knocks:
    """TCP connections that never log in (each one holds a MaxStartups slot while it is open)."""

    def __init__(self) -> None:
        self.socks: list[socket.socket] = []

    def knock(self, address: str, port: int) -> bytes:
        """The first bytes the server sends to a new connection: its banner, or sshd's refusal."""
        sock = socket.create_connection((address, port), timeout=5)
        self.socks.append(sock)
        return sock.recv(100)

    def close(self) -> None:
        for sock in self.socks:
            sock.close()
        self.socks.clear()


def test_max_startups_refuses_like_sshd(recordings: Recordings, tmp_path: Path) -> None:
    gate = MaxStartups.parse("3:30:6")
    spec = FleetSpec(1, first_address="127.1.18.1", max_startups=gate, seed=5)
    # The coins the simulator draws for host 0 (scripts/fleet_sim/server.py seeds one generator per host).
    coins = random.Random(f"maxstartups:{spec.seed}:0")
    knocks = Knocks()
    try:
        with fleet(spec, recordings, tmp_path) as f:
            e = f.endpoints[0]
            pending = 0
            for _ in range(12):
                first = knocks.knock(e.address, e.port)
                if gate.should_drop(pending, coins):
                    assert first == REFUSAL  # sshd's words, then the close
                else:
                    assert first.startswith(b"SSH-2.0-")
                    pending += 1
            assert pending == 6 and f.sim.stats["refused_maxstartups"] == 12 - 6  # never past `full`
            assert knocks.knock(e.address, e.port) == REFUSAL
            knocks.close()  # unauthenticated connections that go away free their slots (sshd's child_close())
            time.sleep(0.2)
            with f.executor(0) as ex:
                assert ex.execute(["sh", "-c", PEER_JOB], b"", 10).exit_status == 0
    finally:
        knocks.close()


def test_a_login_frees_its_max_startups_slot(recordings: Recordings, tmp_path: Path) -> None:
    spec = FleetSpec(1, first_address="127.1.18.2", max_startups=MaxStartups.parse("2"))
    knocks = Knocks()
    try:
        with fleet(spec, recordings, tmp_path) as f, f.executor(0) as ex:
            e = f.endpoints[0]
            ex.connect()  # logged in and still open: no longer a startup
            assert knocks.knock(e.address, e.port).startswith(b"SSH-2.0-")
            assert knocks.knock(e.address, e.port).startswith(b"SSH-2.0-")
            assert knocks.knock(e.address, e.port) == REFUSAL  # MaxStartups 2: the third is refused
    finally:
        knocks.close()


# sshd's rule: https://github.com/openssh/openssh-portable/blob/0ef0f5a839831c213f24e3f2ae434765c607fb50/sshd.c#L558-L578
# (should_drop_connection), its parse: .../servconf.c#L1793-L1818 (case sMaxStartups), defaults .../servconf.c#L348-L353.
def test_max_startups_probability_matches_sshd() -> None:
    gate = MaxStartups.parse("10:30:100")
    rng = random.Random(0)
    assert not any(gate.should_drop(9, rng) for _ in range(1000))
    assert all(gate.should_drop(100, rng) for _ in range(1000))
    # sshd: p = (100 - rate) * (startups - start) / (full - start) + rate, integer division.
    for startups, p in ((10, 30), (55, 65), (99, 99)):
        drops = sum(gate.should_drop(startups, rng) for _ in range(20000)) / 20000
        assert abs(drops - p / 100) < 0.02
    assert MaxStartups.parse("4") == MaxStartups(4, 100, 4)
    with pytest.raises(ValueError):
        MaxStartups.parse("10:0:100")  # servconf.c: rate must be 1..100


def test_dead_silent_slow_flaky_and_hung_hosts(recordings: Recordings, tmp_path: Path) -> None:
    spec = FleetSpec(5, first_address="127.1.19.1", dead=0.2, silent=0.2, slow=0.2, flaky=0.2, hang=0.2,
                     slow_s=0.5, flaky_p=1.0)
    argv, stdin = health_call(recordings)
    with fleet(spec, recordings, tmp_path) as f:
        started = time.monotonic()
        with pytest.raises(HostUnreachable, match="refused"):
            f.executor(f.by_role("dead")[0]).connect()
        assert time.monotonic() - started < 1
        started = time.monotonic()
        with pytest.raises(HostUnreachable):  # no banner: the client gives up at its banner deadline
            f.executor(f.by_role("silent")[0], banner_timeout=0.5).connect()
        assert 0.45 < time.monotonic() - started < 2.5
        with f.executor(f.by_role("slow")[0]) as ex:
            started = time.monotonic()
            assert ex.execute(argv, stdin, 30).stdout.endswith(b"<<<INTROSPECT:END>>>\n")
            assert time.monotonic() - started >= 0.5
        with f.executor(f.by_role("flaky")[0]) as ex, pytest.raises(ConnectionLost):
            ex.run_python(recordings.meta["python"], "health", {}, timeout=5)
        with f.executor(f.by_role("hang")[0]) as ex:
            result = ex.execute(argv, stdin, 0.5)
            assert result.timed_out and result.stdout == b""
        assert f.sim.stats["dropped_flaky"] == 1 and f.sim.stats["hung"] == 1


def test_host_keys_and_client_key_are_checked(recordings: Recordings, tmp_path: Path) -> None:
    with fleet(FleetSpec(2, first_address="127.1.20.1"), recordings, tmp_path) as f:
        swapped = tmp_path / "swapped_known_hosts"
        a, b = f.endpoints
        swapped.write_text(f"[{a.address}]:{a.port} {b.host_key}\n")
        with pytest.raises(HostKeyError):
            f.executor(0, known_hosts=str(swapped)).connect()
        stranger = tmp_path / "stranger"
        stranger.mkdir()
        from scripts.fleet_sim.files import client_key

        other, _ = client_key(stranger)
        with pytest.raises(AuthenticationFailed):
            f.executor(0, identity=str(other)).connect()


def test_health_over_twenty_hosts_reports_the_dead_and_the_silent_one(recordings: Recordings,
                                                                        tmp_path: Path) -> None:
    spec = FleetSpec(20, first_address="127.1.32.1", dead=0.05, silent=0.05, seed=3)
    with fleet(spec, recordings, tmp_path) as f:
        inventory = f.inventory(tmp_path / "hosts.yaml", recordings)
        done = run_module(["introspect.cli.main", "health", "--hosts", str(inventory), "--all-hosts", "--ssh-config",
                           "/dev/null", "--db", str(tmp_path / "h.db"), "--banner-timeout", "1", "--json"], tmp_path, 50)
        stats = dict(f.sim.stats)
    assert done.returncode == 3, done.stderr.decode()[-2000:]  # exit 3: a host could not be reached
    doc = json.loads(done.stdout)
    assert doc["summary"]["hosts"] == 20 and doc["summary"]["unreachable"] == 2
    down = {h["name"]: h for h in doc["hosts"] if not h["reachable"]}
    roles = {e.name: e.role for e in f.endpoints}
    assert sorted(roles[name] for name in down) == ["dead", "silent"]
    (silent,) = [h for name, h in down.items() if roles[name] == "silent"]
    assert silent["seconds"] < 1 + 1.5  # given up at its banner deadline, not later
    # Every reachable host answered from the recordings, one login and one health exec each.
    assert stats["logins"] == 18 and stats["exec:health"] == 18 and stats["answered"] == 18
    for host in doc["hosts"]:
        if host["reachable"]:
            (venv,) = host["venvs"]
            assert venv["path"] == recordings.meta["venv"] and {c["check"] for c in venv["checks"]} >= {"python"}
