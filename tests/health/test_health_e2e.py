"""`introspect health` and `introspect history` end to end, against real sshd hosts on 127.0.0.x.

Every test writes its own inventory in tmp (identity and known_hosts of a client key
made here, ``--ssh-config /dev/null``): nothing reads the repo's hosts.yaml or ~/.ssh.
The fleet runner's own behaviour (order, isolation, the parallel bound, staggering) is
tested first, without SSH.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from introspect.client.fleet import FleetMonitor, ItemFailure, run_fleet
from tests.conftest import CLIResult, run_cli
from tests.fixtures.venvs import make_venv
from tests.sshd_server import ClientKeys, SSHServer, free_port, start_sshd, trust

FLEET_SIZE = 16
FLEET_PARALLEL = 4


# ===================================================================== fleet runner


def test_fleet_keeps_input_order_and_isolates_failures() -> None:
    def work(n: int) -> int:
        time.sleep(0.01 * (5 - n))  # finish in reverse order
        if n == 2:
            raise RuntimeError("host 2 exploded")
        return n * 10

    done: list[int] = []
    results = run_fleet(range(5), work, parallel=3, stagger_s=0.0, on_done=lambda i, item, r: done.append(i))
    assert results[:2] == [0, 10] and results[3:] == [30, 40]
    failure = results[2]
    assert isinstance(failure, ItemFailure) and failure.item == 2 and "exploded" in str(failure.error)
    assert sorted(done) == [0, 1, 2, 3, 4]

    handled = run_fleet([1, 2], lambda n: 1 // (n - 2), parallel=2, stagger_s=0.0,
                        on_error=lambda item, exc, secs: f"{item}: {type(exc).__name__}")
    assert handled == [-1, "2: ZeroDivisionError"]


def test_fleet_bound_is_reached_and_never_exceeded() -> None:
    parallel = 3
    monitor = FleetMonitor(stagger_s=0.0)
    # The first `parallel` items only pass the barrier together: proof that the pool
    # really runs `parallel` at once; max_open then proves it never runs more.
    barrier = threading.Barrier(parallel, timeout=10)

    def work(n: int) -> int:
        with monitor.connection(f"host{n}"):
            if n < parallel:
                barrier.wait()
            time.sleep(0.005)
        return n

    assert run_fleet(range(12), work, parallel=parallel, monitor=monitor) == list(range(12))
    assert monitor.max_open == parallel
    assert monitor.open_now == 0
    assert monitor.connects == {f"host{n}": 1 for n in range(12)}


def test_fleet_staggers_starts() -> None:
    starts: list[float] = []
    lock = threading.Lock()

    def work(n: int) -> None:
        with lock:
            starts.append(time.monotonic())

    stagger = 0.02
    before = time.monotonic()
    run_fleet(range(6), work, parallel=6, stagger_s=stagger, burst=1)
    starts.sort()
    # Start slots are `stagger` apart from the first; a thread may start late but never
    # before its slot, so the i-th start is at least i slots after the call. A lower
    # bound only (sleeps never end early): no timing flakiness.
    late = [round(t - before - i * stagger, 4) for i, t in enumerate(starts)]
    assert all(x >= -0.001 for x in late), late


def test_fleet_starts_a_max_startups_burst_at_once_then_staggers() -> None:
    monitor = FleetMonitor(stagger_s=0.05)  # the default burst: sshd's MaxStartups start (10)
    slots = [monitor.reserve(100.0) for _ in range(13)]
    assert slots[:10] == [100.0] * 10
    assert [round(s - 100.0, 3) for s in slots[10:]] == [0.05, 0.1, 0.15]
    later = monitor.reserve(200.0)  # a start long after the queue drained waits for nobody
    assert later == 200.0 and monitor.stats()["burst"] == 10


def test_fleet_cancel_closes_open_connections() -> None:
    monitor = FleetMonitor()
    closed = threading.Event()
    with monitor.connection("h", closer=closed.set):
        monitor.cancel()
        assert closed.is_set() and monitor.cancelled
    assert monitor.open_now == 0


def test_the_tally_counts_healthy_failing_and_unreachable_hosts() -> None:
    from introspect.checks.result import CheckResult
    from introspect.cli.health_progress import Tally
    from introspect.client.health import HostReport, VenvReport

    def report(reach: str, *venv_statuses: str) -> HostReport:
        venv = VenvReport("/v", [CheckResult(f"c{i}", s, "m") for i, s in enumerate(venv_statuses)])
        return HostReport("h", "a", [CheckResult("reachable", reach, "m")], [venv], [], 0.1, 1)

    tally = Tally(4)
    for r in (report("pass", "pass", "warn"), report("pass", "fail"), report("fail"), report("pass", "info")):
        tally.add(r)
    assert (tally.done, tally.text()) == (4, "2 healthy · 1 failing · 1 unreachable")


# ========================================================================= helpers


def write_inventory(path: Path, client: ClientKeys, hosts: dict[str, Any], **defaults: Any) -> Path:
    data = {
        "defaults": {"identity": str(client.key), "known_hosts": str(client.known_hosts), "connect_timeout": 5,
                     "remote_code": True, "probe_timeout": 90, **defaults},
        "hosts": hosts,
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def host_entry(server: SSHServer, *venvs: dict[str, Any]) -> dict[str, Any]:
    return {"address": server.address, "port": server.port, "venvs": list(venvs)}


def health(inventory: Path, db: Path, *args: str, cwd: Path | None = None) -> CLIResult:
    return run_cli("health", "--hosts", str(inventory), "--db", str(db), "--ssh-config", "/dev/null", *args,
                   cwd=cwd or inventory.parent)


def by_check(checks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["check"]: c for c in checks}


def host_doc(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(h for h in doc["hosts"] if h["name"] == name)


def venv_checks(doc: dict[str, Any], name: str) -> dict[str, dict[str, Any]]:
    (venv,) = host_doc(doc, name)["venvs"]
    return by_check(venv["checks"])


def start_many(root: Path, client: ClientKeys, addresses: list[str]) -> list[SSHServer]:
    # sshd start-up is mostly waiting for the port: start them side by side.
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        servers = list(pool.map(lambda a: start_sshd(root / a, client, address=a), addresses))
    for server in servers:
        trust(server, client)
    return servers


@pytest.fixture(scope="module")
def health_client(tmp_path_factory: pytest.TempPathFactory) -> ClientKeys:
    # Own key and known_hosts: which hosts are trusted is part of these tests.
    return ClientKeys(tmp_path_factory.mktemp("health-client"))


# ================================================================ mixed fleet run


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory, health_client: ClientKeys) -> Iterator[dict[str, SSHServer]]:
    root = tmp_path_factory.mktemp("health-sshd")
    good, no_tiktoken, old_pin = start_many(root, health_client, ["127.0.0.10", "127.0.0.11", "127.0.0.12"])
    # Started but never trusted: its host key is unknown to the client's known_hosts.
    stranger = start_sshd(root / "stranger", health_client, address="127.0.0.13")
    found = {"good": good, "no-tiktoken": no_tiktoken, "old-pin": old_pin, "stranger": stranger}
    yield found
    for server in found.values():
        server.stop()


@pytest.fixture(scope="module")
def mixed_run(servers: dict[str, SSHServer], health_client: ClientKeys, venv_full: Path, venv_no_tiktoken: Path,
              kimi_model: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[CLIResult, Path, Path]:
    tmp = tmp_path_factory.mktemp("health-mixed")
    model = str(kimi_model)
    hosts = {
        "good": host_entry(servers["good"], {"path": str(venv_full), "requires": ["transformers>=4.45", "tiktoken"],
                                             "imports": ["tiktoken"], "models": [model]}),
        "no-tiktoken": host_entry(servers["no-tiktoken"], {"path": str(venv_no_tiktoken), "requires": ["tiktoken"],
                                                           "imports": ["tiktoken"], "models": [model]}),
        "old-pin": host_entry(servers["old-pin"], {"path": str(venv_full), "requires": ["transformers<1"]}),
        "stranger": host_entry(servers["stranger"], {"path": str(venv_full)}),
        # Nothing listens there: a free port on a loopback address of its own.
        "down": {"address": "127.0.0.14", "port": free_port("127.0.0.14"), "venvs": [{"path": str(venv_full)}]},
    }
    inventory = write_inventory(tmp / "hosts.yaml", health_client, hosts)
    prom = tmp / "introspect.prom"
    result = health(inventory, tmp / "history.sqlite3", "--json", "--prom", str(prom))
    return result, prom, tmp / "history.sqlite3"


@pytest.mark.ssh
def test_mixed_fleet_per_check_results(mixed_run, venv_no_tiktoken: Path, kimi_model: Path) -> None:
    result, _prom, _db = mixed_run
    # Checks failed and two hosts are unreachable: the one exit-code rule (cli/outcome.py) says 3.
    assert result.code == 3, (result.stdout[-3000:], result.stderr[-3000:])
    assert "Traceback" not in result.stderr
    doc = result.json()
    assert doc["schema"] == "introspect.health/v1" and doc["exit_code"] == 3
    assert [h["name"] for h in doc["hosts"]] == ["good", "no-tiktoken", "old-pin", "stranger", "down"]

    good = venv_checks(doc, "good")
    assert not [c for c in good.values() if c["status"] == "fail"], good
    assert good["package:tiktoken"]["status"] == "pass"
    assert good["package:transformers"]["status"] == "pass"
    assert good["import:tiktoken"]["status"] == "pass"
    assert good["python"]["status"] == "pass"
    assert good[f"tokenizer:{kimi_model}"]["status"] == "pass"
    assert good["gpus"]["status"] in ("info", "pass")
    assert f"disk:{kimi_model}" in good

    broken = venv_checks(doc, "no-tiktoken")
    assert broken["package:tiktoken"]["status"] == "fail"
    assert broken["package:tiktoken"]["fix"] == f"{venv_no_tiktoken}/bin/pip install tiktoken"
    assert broken["import:tiktoken"]["status"] == "fail"
    tok = broken[f"tokenizer:{kimi_model}"]
    assert tok["status"] == "fail" and "tiktoken" in tok["message"], tok

    pinned = venv_checks(doc, "old-pin")
    assert pinned["package:transformers"]["status"] == "fail"
    assert "does not satisfy transformers<1" in pinned["package:transformers"]["message"]

    for name in ("good", "no-tiktoken", "old-pin"):
        host = host_doc(doc, name)
        assert host["reachable"] and host["connections"] == 1  # one connection per host (issue 7)
        assert by_check(host["checks"])["reachable"]["status"] == "pass"


@pytest.mark.ssh
def test_unreachable_hosts_fail_with_cause_and_fix(mixed_run) -> None:
    doc = mixed_run[0].json()
    down = host_doc(doc, "down")
    assert down["reachable"] is False and down["connections"] == 0
    reach = by_check(down["checks"])["reachable"]
    assert reach["status"] == "fail" and "connection refused" in reach["message"]
    assert "sshd" in reach["fix"]
    assert down["venvs"][0]["checks"] == []  # unknown, not failed

    stranger = by_check(host_doc(doc, "stranger")["checks"])["reachable"]
    assert stranger["status"] == "fail" and "unknown host key" in stranger["message"]
    assert "--accept-new" in stranger["fix"]
    assert doc["summary"]["unreachable"] == 2


@pytest.mark.ssh
def test_prometheus_file_parses(mixed_run, venv_no_tiktoken: Path) -> None:
    _result, prom, _db = mixed_run
    families = {f.name: f for f in text_string_to_metric_families(prom.read_text())}
    checks = {(s.labels["host"], s.labels["check"]): s for s in families["introspect_health_check"].samples}
    assert checks[("no-tiktoken", "package:tiktoken")].value == 0
    assert checks[("no-tiktoken", "package:tiktoken")].labels["venv"] == str(venv_no_tiktoken)
    assert checks[("good", "package:tiktoken")].value == 1
    assert checks[("down", "reachable")].value == 0 and checks[("down", "reachable")].labels["venv"] == ""
    up = {s.labels["host"]: s.value for s in families["introspect_health_host_up"].samples}
    assert up == {"good": 1, "no-tiktoken": 1, "old-pin": 1, "stranger": 0, "down": 0}
    assert families["introspect_health_last_run_timestamp_seconds"].samples[0].value > 0


@pytest.mark.ssh
def test_plain_output_for_cron(servers, health_client: ClientKeys, venv_full: Path, tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "hosts.yaml", health_client, {
        "old-pin": host_entry(servers["old-pin"], {"path": str(venv_full), "requires": ["transformers<1"]})})
    result = health(inventory, tmp_path / "h.sqlite3")
    assert result.code == 1, result.stderr
    # Not a terminal: one plain line per host on stderr, the table and fixes on stdout.
    assert "[1/1: 0 healthy · 1 failing · 0 unreachable] old-pin: FAIL (" in result.stderr.splitlines()[0], result.stderr
    assert "package:transformers" in result.stdout and "pip install" in result.stdout
    assert "run #1 stored" in result.stdout


# ================================================================ drift and history


@pytest.mark.ssh
def test_drift_after_a_package_is_removed_and_history(servers, health_client: ClientKeys,
                                                     tmp_path: Path) -> None:
    venv = make_venv(tmp_path / "venv")
    inventory = write_inventory(tmp_path / "hosts.yaml", health_client, {
        "drifty": host_entry(servers["good"], {"path": str(venv), "requires": ["tiktoken"]})})
    db = tmp_path / "history.sqlite3"

    first = health(inventory, db, "--json")
    assert first.code in (0, 1), first.stderr
    assert venv_checks(first.json(), "drifty")["package:tiktoken"]["status"] == "pass"
    assert host_doc(first.json(), "drifty")["venvs"][0]["drift"] == []  # nothing to compare with yet

    make_venv(venv, exclude={"tiktoken"})  # someone "cleaned up" the venv between two runs
    second = health(inventory, db, "--json")
    assert second.code == 1, second.stderr
    assert venv_checks(second.json(), "drifty")["package:tiktoken"]["status"] == "fail"
    drift = by_check(host_doc(second.json(), "drifty")["venvs"][0]["drift"])
    removed = drift["drift:package-removed"]
    assert removed["status"] == "warn" and "tiktoken" in removed["message"]
    assert removed["fix"].startswith(f"{venv}/bin/pip install tiktoken==")

    history = run_cli("history", "--db", str(db), "--json")
    assert history.code == 0, history.stderr
    runs = history.json()["runs"]
    assert [r["id"] for r in runs] == [second.json()["run_id"], first.json()["run_id"]]
    assert any(p["check"] == "drift:package-removed" for p in runs[0]["problems"])
    assert all(p["check"] != "package:tiktoken" for p in runs[1]["problems"])

    one = run_cli("history", "--db", str(db), "--host", "drifty", "--run", str(runs[0]["id"]), "--json")
    assert one.code == 0 and {r["check"] for r in one.json()["results"]} >= {"package:tiktoken",
                                                                               "drift:package-removed"}
    table = run_cli("history", "--db", str(db))
    assert table.code == 0 and "health" in table.stdout


# ============================================================= inventory / usage


def test_invalid_inventory_is_exit_2_with_file_line_key(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text("hosts:\n  gpu-a:\n    adress: 127.0.0.10\n")
    result = health(inventory, tmp_path / "h.sqlite3")
    assert result.code == 2, result.stderr
    assert f"{inventory}:3: hosts.gpu-a.adress" in result.stderr and "did you mean 'address'" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_inventory_and_unknown_host_are_usage_errors(tmp_path: Path,
                                                              health_client: ClientKeys) -> None:
    # cwd without hosts.yaml, and no --hosts: the repo's example must never be picked up.
    result = run_cli("health", "--db", str(tmp_path / "h.sqlite3"), cwd=tmp_path)
    assert result.code == 2 and "no inventory" in result.stderr, result.stderr
    inventory = write_inventory(tmp_path / "hosts.yaml", health_client,
                                {"a": {"address": "127.0.0.10", "port": 1}})
    result = health(inventory, tmp_path / "h.sqlite3", "--only", "nope")
    assert result.code == 2 and "no host named 'nope'" in result.stderr, result.stderr
    result = run_cli("history", "--db", str(tmp_path / "missing.sqlite3"))
    assert result.code == 2 and "no history database" in result.stderr


# ===================================================================== 16 hosts


@pytest.mark.ssh
def test_fleet_of_16_hosts_with_bounded_parallelism(tmp_path_factory: pytest.TempPathFactory,
                                                   health_client: ClientKeys, venv_full: Path) -> None:
    root = tmp_path_factory.mktemp("fleet16")
    addresses = [f"127.0.0.{20 + i}" for i in range(FLEET_SIZE)]
    servers = start_many(root, health_client, addresses)
    try:
        # One venv shared through the file system by every "host".
        venv = {"path": str(venv_full), "requires": ["tiktoken", "packaging"], "imports": ["tiktoken"]}
        hosts = {f"node{i:02d}": host_entry(s, venv) for i, s in enumerate(servers)}
        inventory = write_inventory(root / "hosts.yaml", health_client, hosts, parallel=8)
        result = health(inventory, root / "h.sqlite3", "--json", "--parallel", str(FLEET_PARALLEL))
    finally:
        for server in servers:
            server.stop()
    assert "Traceback" not in result.stderr
    doc = result.json()
    assert [h["name"] for h in doc["hosts"]] == sorted(hosts)  # every host exactly once, in order
    for host in doc["hosts"]:
        assert host["reachable"] and host["connections"] == 1, host["checks"]
        assert by_check(host["venvs"][0]["checks"])["package:tiktoken"]["status"] == "pass"
    fleet = doc["fleet"]
    assert fleet["parallel"] == FLEET_PARALLEL
    assert 1 <= fleet["max_open_connections"] <= FLEET_PARALLEL  # the --parallel bound, counted
    assert fleet["connects_started"] == FLEET_SIZE and fleet["open_connections"] == 0
    # stderr got one progress line per host, each exactly once.
    lines = [line.split("] ", 1)[1].split(":")[0] for line in result.stderr.splitlines() if line.startswith("[")]
    assert sorted(lines) == sorted(hosts)


@pytest.mark.ssh
def test_progress_lines_keep_the_tally_so_far(mixed_run) -> None:
    """Without a terminal each finished host is one line that starts with its place in the run and
    the tally so far; the last line's tally is the run's (healthy, failing, unreachable)."""
    result = mixed_run[0]
    doc = result.json()
    lines = [line for line in result.stderr.splitlines() if line.startswith("[")]
    assert len(lines) == len(doc["hosts"]) == 5, result.stderr
    assert [line.split(":", 1)[0] for line in lines] == [f"[{i}/5" for i in range(1, 6)]
    failing = {h["name"] for h in doc["hosts"] if h["reachable"]
               and any(c["status"] == "fail" for c in h["checks"] + [c for v in h["venvs"] for c in v["checks"]])}
    down = {h["name"] for h in doc["hosts"] if not h["reachable"]}
    healthy = 5 - len(failing) - len(down)
    assert lines[-1].startswith(f"[5/5: {healthy} healthy · {len(failing)} failing · {len(down)} unreachable] ")
    finished = {line.split("] ", 1)[1].split(":", 1)[0] for line in lines}
    assert finished == {h["name"] for h in doc["hosts"]}
    assert failing and down and any("] down: UNREACHABLE (" in line for line in lines)
