"""``scripts/bench --fleet``: the controller against 10 to 3,000 simulated hosts, and its peers.

For every size (``--sizes``, default 10, 100, 1,000) and RTT (``--rtts``, default 0, 20, 50 and
100 ms) one simulator process (``python -m scripts.fleet_sim serve``, see scripts/fleet_sim) serves
a fleet with 5% dead and 5% silent hosts, and the bench runs, each once, on every host of it:

- ``introspect health --json`` (one venv per host, three requirements checked);
- the files-only ``introspect probe --no-tokenizer --no-model-code --no-cache --json``;
- at ``--peer-rtt`` (default 50 ms), the peers' version job: Ansible ``-m raw -f 50`` and ``-f 200``,
  pyinfra ``exec`` and parallel-ssh (scripts/bench_fleet_peers.py), unless ``--no-peers``.

Measured per run: wall time; controller CPU (user + system of the command and its waited-for
children, from wait4); the simulator's CPU (/proc/<pid>/stat) and the whole machine's; the
controller's peak RSS (VmHWM), open file descriptors and threads (/proc sampled every 50 ms);
SSH connections per second (the simulator's count). At 1,000 hosts and 50 ms one more health run
on a fleet without dead or silent hosts gives what the silent ones add. The report prints every
target of the fleet benchmark as met or not with the measured reason, the machine's load and cores,
and writes a plot (wall and RSS against hosts) as SVG. A measurement, not a test: exits 0 when a
target is missed.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import bench_fleet_report as report
from bench_fleet_measure import REPO, Measured, SimError, SimProc, machine_busy_s, measure
from bench_fleet_peers import run_peers
from fleet_sim.recordings import FILES_ONLY


def parse_args(argv: list[str]) -> argparse.Namespace:
    def ints(text: str) -> list[int]:
        return [int(v) for v in text.split(",") if v]

    parser = argparse.ArgumentParser(prog="scripts/bench --fleet", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=ints, default=[10, 100, 1000], help="hosts per fleet (add 3000 where "
                        "the machine has the memory and file descriptors)")
    parser.add_argument("--rtts", type=ints, default=[0, 20, 50, 100], help="round-trip times, ms")
    parser.add_argument("--large-sizes", type=ints, default=[], help="bigger fleets (e.g. 3000) run at the target "
                        "RTT only and without the peers: each costs minutes")
    parser.add_argument("--jobs", default="health,probe", help="introspect jobs: health,probe")
    parser.add_argument("--dead", type=float, default=0.05)
    parser.add_argument("--silent", type=float, default=0.05)
    parser.add_argument("--parallel", type=int, default=200, help="introspect --parallel (at most 1024); also "
                        "pyinfra's --parallel and parallel-ssh's pool")
    parser.add_argument("--no-peers", action="store_true", help="skip Ansible, pyinfra and parallel-ssh")
    parser.add_argument("--peer-rtt", type=int, default=50, help="the RTT at which the peers run")
    parser.add_argument("--max-startups", default="10:30:100", help="each simulated sshd's MaxStartups")
    parser.add_argument("--recordings", type=Path, help="the simulator's recordings (default: its cache)")
    parser.add_argument("--svg", type=Path, default=REPO / "docs" / "img" / "fleet-scaling.svg")
    parser.add_argument("--out", type=Path, help="also write the markdown report here")
    parser.add_argument("--save", type=Path, help="also write every measurement as JSON here")
    parser.add_argument("--replot", type=Path, metavar="SAVED", help="run nothing: print the report and write the "
                        "plot again from a --save file")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    return parser.parse_args(argv)


class FleetBench:
    def __init__(self, args: argparse.Namespace, tmp: Path, log: Callable[[str], None]) -> None:
        self.args, self.tmp, self.log = args, tmp, log
        self.rows: list[Measured] = []
        self.peers: list[Measured] = []
        self.clean: Measured | None = None
        self.failures: list[str] = []
        self.env = {k: v for k, v in os.environ.items() if k not in ("SSH_AUTH_SOCK", "PYTHONSTARTUP")}
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode cached in the temp dir, as installed
        self.env.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                        INTROSPECT_CACHE_DIR=str(tmp / "cache"), PYTHONPYCACHEPREFIX=str(tmp / "pycache"),
                        INTROSPECT_CONFIG=str(tmp / "no-user-config.yaml"))
        self.cwd = tmp / "cwd"
        self.cwd.mkdir()
        self.tree = snapshot(tmp / "tree")
        self.env["PYTHONPATH"] = str(self.tree)

    def start_sim(self, hosts: int, rtt: int, faults: bool) -> SimProc:
        a = self.args
        args = ["--hosts", str(hosts), "--rtt-ms", str(rtt), "--parallel", str(min(a.parallel, 1024)),
                "--max-startups", a.max_startups]
        if faults:
            args += ["--dead", str(a.dead), "--silent", str(a.silent)]
        if a.recordings:
            args += ["--recordings", str(a.recordings)]
        started = time.monotonic()
        sim = SimProc(self.tmp / f"sim-{hosts}-{rtt}{'' if faults else '-clean'}", args, self.env, self.tree)
        self.log(f"  simulator: {sim.manifest['spec']} (ready in {time.monotonic() - started:.1f} s)")
        return sim

    def roles(self, sim: SimProc) -> dict[str, str]:
        return {h["name"]: h["role"] for h in json.loads(Path(sim.manifest["dir"], "fleet.json").read_text())["hosts"]}

    def health(self, sim: SimProc, hosts: int, rtt: int) -> Measured:
        m = sim.manifest
        argv = [sys.executable, "-m", "introspect.cli.main", "health", "--hosts", m["inventory"], "--all-hosts",
                "--ssh-config", "/dev/null", "--db", str(self.tmp / f"health-{hosts}-{rtt}.db"), "--json",
                "--parallel", str(min(self.args.parallel, 1024))]
        run = measure("introspect health --json", argv, env=self.env, cwd=self.cwd, sim=sim, hosts=hosts,
                      rtt_ms=rtt)
        try:
            doc = json.loads(run.stdout)
        except ValueError:
            run.notes.append(f"no JSON (exit {run.code}): {run.stderr.decode(errors='replace')[-300:]}")
            return run
        if not doc.get("hosts"):
            run.notes.append(f"no host in its JSON (exit {run.code}, schema {doc.get('schema')}): "
                             f"{run.stderr.decode(errors='replace')[-300:]}")
            return run
        run.pacing = doc.get("fleet") or {}
        roles = self.roles(sim)
        down = [h for h in doc.get("hosts", []) if not h.get("reachable")]
        run.unreachable, run.answered_hosts = len(down), len(doc.get("hosts", [])) - len(down)
        silent = [float(h.get("seconds") or 0) for h in down if roles.get(h.get("name")) == "silent"]
        run.silent_max_s = max(silent) if silent else None
        wrong = sorted(h["name"] for h in down if roles.get(h.get("name")) not in ("dead", "silent"))
        if wrong:
            run.notes.append(f"{len(wrong)} answering host(s) reported unreachable, e.g. {wrong[:3]}")
        return run

    def logins(self, sim: SimProc, hosts: int, rtt: int) -> Measured:
        """health's logins alone (scripts/fleet_logins.py): what of its CPU one login per host is."""
        argv = [sys.executable, "-m", "scripts.fleet_logins", "--hosts", sim.manifest["inventory"],
                "--parallel", str(min(self.args.parallel, 1024))]
        run = measure(report.LOGINS, argv, env=self.env, cwd=self.cwd, sim=sim, hosts=hosts, rtt_ms=rtt)
        try:
            doc = json.loads(run.stdout.decode().strip().splitlines()[-1])
            run.answered_hosts, run.unreachable = int(doc["logged_in"]), int(doc["failed"])
        except (ValueError, IndexError, KeyError, TypeError):
            run.notes.append(f"no summary (exit {run.code}): {run.stderr.decode(errors='replace')[-300:]}")
        return run

    def probe(self, sim: SimProc, hosts: int, rtt: int) -> Measured:
        m = sim.manifest
        argv = [sys.executable, "-m", "introspect.cli.main", "probe", "--hosts", m["inventory"], "--all-hosts",
                "--ssh-config", "/dev/null", "--model", m["model"], "--venv", m["venv"], *FILES_ONLY, "--json",
                "--parallel", str(min(self.args.parallel, 1024))]
        run = measure(f"introspect probe {' '.join(FILES_ONLY)}", argv, env=self.env, cwd=self.cwd, sim=sim,
                      hosts=hosts, rtt_ms=rtt)
        try:
            items = json.loads(run.stdout).get("hosts") or []
        except ValueError:
            items = []
        if not items:
            run.notes.append(f"no host in its JSON (exit {run.code}): {run.stderr.decode(errors='replace')[-300:]}")
            return run
        run.unreachable = sum(1 for i in items if i.get("exit_code") == 3)
        run.answered_hosts = sum(1 for i in items if i.get("exit_code") in (0, 1))
        return run

    def one_fleet(self, hosts: int, rtt: int, peers: bool = True) -> None:
        self.log(f"fleet: {hosts} hosts, {rtt} ms RTT")
        sim = self.start_sim(hosts, rtt, faults=True)
        try:
            jobs = self.args.jobs.split(",")
            for job in jobs + (["logins"] if "health" in jobs else []):
                run = {"health": self.health, "probe": self.probe, "logins": self.logins}[job](sim, hosts, rtt)
                self.log(f"    {run.label}: {run.wall:.1f} s wall, {run.cpu:.1f} CPU-s, simulator {run.sim_cpu:.1f} "
                         f"CPU-s, {run.answered_hosts} answered, {run.unreachable} unreachable "
                         f"{'; '.join(run.notes)}")
                self.rows.append(run)
            if peers and not self.args.no_peers and rtt == self.args.peer_rtt:
                self.peers += run_peers(sim, hosts=hosts, rtt_ms=rtt, env=self.env, tmp=self.cwd,
                                        parallel=self.args.parallel, log=self.log)
        finally:
            sim.stop()

    def clean_run(self, hosts: int, rtt: int) -> None:
        """health on the same fleet without dead or silent hosts: what the silent ones add."""
        self.log(f"fleet: {hosts} hosts, {rtt} ms RTT, no dead or silent host (reference)")
        sim = self.start_sim(hosts, rtt, faults=False)
        try:
            self.clean = self.health(sim, hosts, rtt)
            self.log(f"    reference health: {self.clean.wall:.1f} s wall, {self.clean.cpu:.1f} CPU-s")
        finally:
            sim.stop()

    def recordings(self) -> None:
        """Record the product's replies once (or take the cached recording of these sources), so that
        every fleet of this run replays the same exchanges even if the tree changes meanwhile."""
        if self.args.recordings:
            return
        done = subprocess.run([sys.executable, "-m", "scripts.fleet_sim", "record", "--if-missing"], cwd=self.tree,
                              env=self.env, capture_output=True, timeout=900, check=False)
        lines = done.stdout.decode().strip().splitlines()
        if done.returncode != 0 or not lines:
            tail = [x for x in done.stderr.decode(errors="replace").splitlines() if x.strip()]
            raise SimError(f"recording the product's replies failed: {tail[-1] if tail else done.returncode}")
        self.args.recordings = Path(json.loads(lines[-1])["recordings"])
        self.log(f"recordings: {self.args.recordings}")

    def run(self) -> None:
        self.recordings()
        target_hosts, target_rtt = report.TARGET
        fleets: list[Callable[[], None]] = [functools.partial(self.one_fleet, h, r)
                                             for h in self.args.sizes for r in self.args.rtts]
        if "health" in self.args.jobs and target_hosts in self.args.sizes and target_rtt in self.args.rtts:
            fleets.append(functools.partial(self.clean_run, target_hosts, target_rtt))
        fleets += [functools.partial(self.one_fleet, h, target_rtt, peers=False) for h in self.args.large_sizes]
        for one in fleets:
            try:
                one()
            except SimError as exc:  # one fleet the machine cannot serve: the others still count
                self.log(f"  {exc}")
                self.failures.append(str(exc).splitlines()[0])


def snapshot(dest: Path) -> Path:
    """A copy of what the runs import (introspect/, the simulator, the recorder's fixtures), taken once:
    a run of many minutes then measures one version of the code even while the checkout changes.
    Every command runs from it (PYTHONPATH, the simulator's cwd), ahead of the editable install."""
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("introspect", "scripts/fleet_sim", "tests/fixtures", "tests/data/realconfigs"):
        shutil.copytree(REPO / part, dest / part, ignore=skip)
    shutil.copy2(REPO / "scripts" / "fleet_logins.py", dest / "scripts" / "fleet_logins.py")
    (dest / "tests" / "__init__.py").write_text("")
    return dest


def background_load(seconds: float = 1.0) -> float:
    before = machine_busy_s()
    time.sleep(seconds)
    return (machine_busy_s() - before) / seconds


def raise_nofile() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # children inherit it
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def publish(args: argparse.Namespace, text: str, rows: list[Measured], peers: list[Measured]) -> None:
    print(text, flush=True)
    if args.out:
        args.out.write_text(text + "\n")
    if rows:
        args.svg.parent.mkdir(parents=True, exist_ok=True)
        args.svg.write_text(report.svg(rows, peers))
        print(f"bench --fleet: plot written to {args.svg}", file=sys.stderr)


def main(argv: list[str]) -> int:
    args = parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if args.replot:
        rows, peers, clean, machine, elapsed, saved, failures = report.load(args.replot)
        publish(args, report.render(rows, peers, clean, machine, elapsed, saved, failures), rows, peers)
        return 0
    nofile = raise_nofile()
    tmp = Path(tempfile.mkdtemp(prefix="introspect-bench-fleet-"))
    bench = FleetBench(args, tmp, log)
    machine = report.Machine(cores=len(os.sched_getaffinity(0)), nofile=nofile, load_before=os.getloadavg(),
                             busy_before=background_load())
    started = time.monotonic()
    try:
        bench.run()
    except SimError as exc:
        log(f"bench --fleet: error: {exc}")
        return 1
    except KeyboardInterrupt:
        log("bench --fleet: interrupted; the report covers the runs that finished")
    finally:
        if args.keep:
            log(f"bench --fleet: kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    machine.load_after, machine.busy_after = os.getloadavg(), background_load()
    elapsed = time.monotonic() - started
    if args.save:
        report.save(args.save, bench.rows, bench.peers, bench.clean, machine, elapsed, args, bench.failures)
    publish(args, report.render(bench.rows, bench.peers, bench.clean, machine, elapsed, args, bench.failures),
            bench.rows, bench.peers)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
