"""scripts/fleet_logins.py: health's logins and nothing else, which the fleet bench sets beside a health
run to split its controller CPU into the logins and the rest. Tested on a simulated fleet: every live
host logged into once, no command run on any, the dead ones counted as failed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from scripts.fleet_sim.recordings import Recordings
from scripts.fleet_sim.spec import FleetSpec

from .conftest import REPO, fleet, run_module

# The bench's modules import one another by their bare names, as scripts/bench runs them.
sys.path.insert(0, str(REPO / "scripts"))
from bench_fleet_measure import Measured, Peaks  # noqa: E402
from bench_fleet_report import LOGINS, targets  # noqa: E402


def test_every_live_host_is_logged_into_once_and_nothing_runs(recordings: Recordings, tmp_path: Path) -> None:
    spec = FleetSpec(8, first_address="127.1.36.1", dead=0.25, seed=5)
    with fleet(spec, recordings, tmp_path) as f:
        inventory = f.inventory(tmp_path / "hosts.yaml", recordings)
        done = run_module(["scripts.fleet_logins", "--hosts", str(inventory), "--parallel", "8"], tmp_path, 60)
        stats = dict(f.sim.stats)
        dead = len(f.by_role("dead"))
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    doc = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert dead >= 1 and doc["hosts"] == 8 and doc["failed"] == dead and doc["logged_in"] == 8 - dead
    assert stats["logins"] == 8 - dead  # one login per live host
    assert not any(key.startswith("exec") for key in stats), stats  # and no command on any


def _run(label: str, cpu: float) -> Measured:
    return Measured(label, 1000, 50, 15.0, cpu, 7.0, 22.0, Peaks(), 0, b"", b"", logins=900)


def test_the_cpu_target_says_what_the_logins_alone_took() -> None:
    rows = [_run("introspect health --json", 14.0), _run(LOGINS, 6.3)]
    (cpu_row,) = [line for line in targets(rows, [], None, 2) if "controller CPU per host" in line]
    assert "the same logins alone" in cpu_row and "took 6.3 CPU-s (45%)" in cpu_row and "the rest, 7.7 CPU-s" in cpu_row
