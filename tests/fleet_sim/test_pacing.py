"""Login pacing against sshd's MaxStartups, on the simulated fleet (real SSH through the product's
paramiko executor, the simulator refusing as sshd does).

sshd drops a connection past MaxStartups with one line and a close (openssh-portable sshd.c
drop_connection(), https://github.com/openssh/openssh-portable/blob/0ef0f5a839831c213f24e3f2ae434765c607fb50/sshd.c#L588-L638;
the rule, should_drop_connection(), sshd.c#L558-L578 at the same commit; the simulator's copy is
scripts/fleet_sim/spec.py). The transport names that refusal (not a banner timeout) with a pasteable
fix; the fleet runner backs off that one sshd and retries within the host's budget; a silent host is
a banner timeout, never paramiko's "No existing session".
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from introspect.client.fleet import FleetMonitor, ItemFailure, run_fleet
from introspect.client.fleet_pacing import Pacer, endpoint_of
from introspect.client.gpus import GpuJob, gather_gpus
from introspect.client.health import HostReport, run_health
from introspect.errors import HostUnreachable
from introspect.inventory import HostEntry
from introspect.transport.registry import create_executor
from introspect.transport.settings import ConnectionSettings
from introspect.transport.ssh_dial import StartupsRefused
from scripts.fleet_sim.files import Endpoint
from scripts.fleet_sim.recordings import PEER_JOB, Recordings
from scripts.fleet_sim.spec import FleetSpec, MaxStartups

from .conftest import Fleet, fleet, run_module
from .test_simulator import Knocks

pytestmark = pytest.mark.timeout(90)


def test_a_max_startups_refusal_is_named_at_once_with_a_pasteable_fix(recordings: Recordings,
                                                                      tmp_path: Path) -> None:
    spec = FleetSpec(1, first_address="127.1.40.1", max_startups=MaxStartups.parse("2"))
    knocks = Knocks()
    try:
        with fleet(spec, recordings, tmp_path) as f:
            e = f.endpoints[0]
            assert knocks.knock(e.address, e.port).startswith(b"SSH-2.0-")  # two unauthenticated
            assert knocks.knock(e.address, e.port).startswith(b"SSH-2.0-")  # connections hold both slots
            started = time.monotonic()
            with pytest.raises(StartupsRefused) as info:
                f.executor(0, banner_timeout=5.0).connect()
            elapsed = time.monotonic() - started
    finally:
        knocks.close()
    error = info.value
    assert elapsed < 1.0  # the refusal came at once: not the 5 s banner deadline
    assert error.stage == "banner" and isinstance(error, HostUnreachable)  # exit 3, as every unreachable host
    assert "MaxStartups" in error.message and "'Not allowed at this time'" in error.message
    assert error.hint is not None
    user = os.environ.get("USER") or __import__("getpass").getuser()  # the login name the client used
    assert error.hint.startswith(f"ssh -p {e.port} {user}@{e.address} sudo sshd -T | grep -i maxstartups  # ")
    assert "--parallel" in error.hint and f.sim.stats["refused_maxstartups"] == 1


@pytest.mark.parametrize(("connect_timeout", "banner_timeout"), [(0.5, 1.0), (5.0, 1.0)])
def test_a_silent_host_is_a_banner_timeout_never_no_existing_session(recordings: Recordings, tmp_path: Path,
                                                                     connect_timeout: float,
                                                                     banner_timeout: float) -> None:
    # paramiko alone says "No existing session" when its negotiation deadline (the connect timeout)
    # ends before the banner deadline; the product reads the banner itself (transport/ssh_dial.py).
    spec = FleetSpec(1, first_address="127.1.41.1", silent=1.0)
    with fleet(spec, recordings, tmp_path) as f:
        started = time.monotonic()
        with pytest.raises(HostUnreachable) as info:
            f.executor(0, connect_timeout=connect_timeout, banner_timeout=banner_timeout).connect()
        elapsed = time.monotonic() - started
    assert not isinstance(info.value, StartupsRefused)
    assert info.value.stage == "banner" and "no SSH banner" in info.value.message
    assert "No existing session" not in info.value.message
    assert banner_timeout - 0.05 < elapsed < banner_timeout + 1.0


def _hosts_behind_one_sshd(f: Fleet, count: int) -> list[HostEntry]:
    e = f.endpoints[0]
    return [HostEntry(f"c{i:02d}", e.address, port=e.port) for i in range(count)]


def test_logins_to_one_sshd_back_off_on_refusals_and_all_get_in(recordings: Recordings, tmp_path: Path) -> None:
    # 16 containers behind one sshd whose MaxStartups is 3: the first window (10) meets refusals,
    # the window shrinks, every refused login is retried, and every host gets in.
    spec = FleetSpec(1, first_address="127.1.42.1", rtt_ms=40, max_startups=MaxStartups.parse("3"))
    with fleet(spec, recordings, tmp_path) as f:
        monitor = FleetMonitor(pacer=Pacer(retry_s=30, seed=1))
        hosts = _hosts_behind_one_sshd(f, 16)
        assert len({endpoint_of(h) for h in hosts}) == 1

        def work(host: HostEntry) -> int | None:
            executor = f.executor(0)
            with monitor.connection(host.name, closer=executor.close):
                try:
                    monitor.login(endpoint_of(host), executor.connect)
                    return executor.execute(["sh", "-c", PEER_JOB], b"", 10).exit_status
                finally:
                    executor.close()

        results = run_fleet(hosts, work, parallel=16, monitor=monitor)
        refused = f.sim.stats["refused_maxstartups"]
        stats = monitor.stats()
    assert [r for r in results if isinstance(r, ItemFailure)] == [] and results == [0] * 16
    assert refused > 0 and stats["refusals"] == refused  # every refusal seen was sshd's
    assert stats["retries"] == refused and stats["refused_hosts"] == 0  # each retried, none given up
    assert stats["smallest_window"] < 10 and stats["refused_endpoints"] == 1
    assert f.sim.stats["logins"] == 16


@contextlib.contextmanager
def full_host(recordings: Recordings, tmp_path: Path, address: str) -> Iterator[tuple[Fleet, Endpoint]]:
    """One simulated host with MaxStartups 1 whose only slot a login-less connection holds
    for the whole block: every login to it is refused."""
    spec = FleetSpec(1, first_address=address, max_startups=MaxStartups.parse("1"))
    knocks = Knocks()
    try:
        with fleet(spec, recordings, tmp_path) as f:
            e = f.endpoints[0]
            knocks.knock(e.address, e.port)
            yield f, e
    finally:
        knocks.close()


def test_a_refused_host_gives_up_at_its_retry_budget(recordings: Recordings, tmp_path: Path) -> None:
    with full_host(recordings, tmp_path, "127.1.43.1") as (f, e):
        pacer = Pacer(retry_s=1.0, seed=2)
        started = time.monotonic()
        with pytest.raises(StartupsRefused):
            pacer.login(endpoint_of(HostEntry("c0", e.address, port=e.port)), f.executor(0).connect,
                        threading.Event())
        elapsed = time.monotonic() - started
        refused = f.sim.stats["refused_maxstartups"]
    assert 0.2 < elapsed < 1.0 + 0.5  # within the budget (the next back-off would have passed it)
    assert refused >= 2 and pacer.refusals == refused and pacer.refused_hosts == 1


def test_one_round_of_refusals_halves_the_window_once_and_logins_grow_it() -> None:
    pacer = Pacer(window=8, seed=3)
    both_in = threading.Barrier(2)
    tries: dict[str, int] = {}

    def refused_once(name: str) -> None:
        tries[name] = tries.get(name, 0) + 1
        if tries[name] == 1:
            both_in.wait(5)  # both logins in flight together: one round
            raise StartupsRefused("refused", stage="banner")

    threads = [threading.Thread(target=pacer.login, args=("sshd-a", lambda n=n: refused_once(n), threading.Event()))
               for n in ("x", "y")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert tries == {"x": 2, "y": 2} and pacer.refusals == 2
    # 8 halved once to 4 (not twice to 2), then two logins added 1/4 and 1/4.25.
    assert pacer.window_of("sshd-a") == pytest.approx(4 + 1 / 4 + 1 / (4 + 1 / 4))
    assert pacer.window_of("sshd-b") == 8  # another sshd's window is its own


def test_health_through_one_sshd_with_max_startups_checks_every_host(recordings: Recordings,
                                                                     tmp_path: Path) -> None:
    spec = FleetSpec(1, first_address="127.1.44.1", rtt_ms=40, max_startups=MaxStartups.parse("3"))
    with fleet(spec, recordings, tmp_path) as f:
        e = f.endpoints[0]
        behind = [Endpoint(f"c{i:02d}", e.address, e.port, e.role, e.host_key) for i in range(14)]
        inventory = f.inventory(tmp_path / "hosts.yaml", recordings, behind)
        done = run_module(["introspect.cli.main", "health", "--hosts", str(inventory), "--all-hosts", "--ssh-config",
                           "/dev/null", "--db", str(tmp_path / "h.db"), "--json"], tmp_path, 80)
        refused = f.sim.stats["refused_maxstartups"]
    doc = json.loads(done.stdout)
    assert doc["summary"]["hosts"] == 14 and doc["summary"]["unreachable"] == 0, done.stderr.decode()[-2000:]
    assert refused > 0 and doc["fleet"]["refusals"] == refused and doc["fleet"]["refused_hosts"] == 0
    assert all(h["connections"] == 1 for h in doc["hosts"])  # a refused attempt never became a connection


def test_silent_hosts_late_in_the_inventory_are_dialled_ahead(recordings: Recordings, tmp_path: Path) -> None:
    # Two workers, eight answering hosts, then two silent ones: dialled only when a worker reached
    # them, the silent hosts would end the run a banner deadline (2 s) after the last answering host.
    # Dialled ahead (client/fleet_ahead.py), their deadlines run while the others are checked.
    # At 150 ms RTT an answering host takes about 5 round trips (0.75 s measured), so two workers need
    # about 3 s for eight; without the look-ahead a silent host starts one host's time before the end
    # and ends 2 s later, over 1 s after the last answering host (4.8 s against 2.8 s, measured).
    spec = FleetSpec(10, first_address="127.1.45.1", rtt_ms=150, silent=0.2, seed=4)
    with fleet(spec, recordings, tmp_path) as f:
        order = f.by_role("ok") + f.by_role("silent")
        hosts = [HostEntry(f.endpoints[i].name, f.endpoints[i].address, port=f.endpoints[i].port) for i in order]
        where = {h.name: i for h, i in zip(hosts, order, strict=True)}
        finished: dict[str, float] = {}
        started = time.monotonic()

        def done(report: HostReport) -> None:
            finished[report.name] = time.monotonic() - started

        reports = run_health(hosts, lambda h: f.executor(where[h.name], banner_timeout=2.0), parallel=2,
                             on_done=done)
    last_ok = max(finished[h.name] for h in hosts[:8])
    silent = [r for r in reports if not r.reachable]
    assert [r.name for r in silent] == [h.name for h in hosts[8:]]
    for report in silent:
        (check,) = report.host_results
        assert "no SSH banner" in check.message and "within 2 s" in check.message
        assert finished[report.name] < last_ok + 0.6  # the deadline had run already
    assert last_ok > 2.5  # the answering hosts kept both workers busy past the silent hosts' deadline


def test_openssh_transport_reports_the_refusal_as_one_too(recordings: Recordings, tmp_path: Path) -> None:
    # OpenSSH 9 says "kex_exchange_identification: read: Connection reset by peer" (or "Connection
    # closed by remote host") for sshd's refusal line and close; openssh:// words it as ssh:// does.
    with full_host(recordings, tmp_path, "127.1.46.1") as (f, e):
        executor = create_executor(ConnectionSettings(
            scheme="openssh", host=e.address, port=e.port, ssh_config="/dev/null",
            known_hosts=str(f.known_hosts), identity=str(f.sim.key_path), connect_timeout=5.0))
        with pytest.raises(StartupsRefused) as info:
            executor.run_python(recordings.meta["python"], "health", {}, timeout=10)
        refused = f.sim.stats["refused_maxstartups"]
    assert refused >= 1 and info.value.stage == "banner"
    assert info.value.hint is not None and "sshd -T | grep -i maxstartups" in info.value.hint


def test_gpus_through_one_sshd_with_max_startups_gets_every_host_in(recordings: Recordings, tmp_path: Path) -> None:
    # `introspect gpus` (and `models`) log in through the same pacer: 12 containers behind one sshd
    # whose MaxStartups is 3 are all reached; none is left with sshd's refusal as its result. (The
    # simulator has no recorded gpus task: what its reply says is not the subject here.)
    spec = FleetSpec(1, first_address="127.1.46.1", rtt_ms=40, max_startups=MaxStartups.parse("3"))
    with fleet(spec, recordings, tmp_path) as f:
        hosts = _hosts_behind_one_sshd(f, 12)
        jobs = [GpuJob(h.name, h.address, h, recordings.meta["python"]) for h in hosts]
        results = gather_gpus(jobs, lambda job: f.executor(0), timeout=10, parallel=12)
        refused = f.sim.stats["refused_maxstartups"]
        logins = f.sim.stats["logins"]
    assert [r.error for r in results if isinstance(r.error, (StartupsRefused, HostUnreachable))] == []
    assert refused > 0 and logins == 12  # sshd refused some at first; each was retried and got in
