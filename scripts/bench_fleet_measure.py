"""The measuring half of ``scripts/bench --fleet``: one simulator process, one measured command.

:class:`SimProc` runs ``python -m scripts.fleet_sim serve`` as its own process (so that its CPU is
read apart from the controller's, from /proc/<pid>/stat) and reads its counters (SIGUSR1 ->
stats.json). :func:`measure` runs one controller command and samples /proc of it (and, for the
peers, of every process under it) while it runs: resident memory, its high-water mark, open file
descriptors and threads.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TICK = os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> float:
    """Busy CPU-seconds of the whole machine so far (/proc/stat: all but idle and iowait)."""
    with open("/proc/stat") as fh:
        fields = [int(v) for v in fh.readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / TICK


def cpu_s(pid: int) -> float:
    """utime + stime of one process (its own threads; not its children)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


class SimError(RuntimeError):
    pass


class SimProc:
    """The simulator as a child process, ready once it printed its manifest line."""

    def __init__(self, folder: Path, args: list[str], env: dict[str, str], tree: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.err = open(folder / "sim.stderr", "wb")  # noqa: SIM115 - closed in stop()
        argv = [sys.executable, "-m", "scripts.fleet_sim", "serve", "--dir", str(folder), *args]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.err, cwd=tree, env=env)
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 900)  # the first run records (seconds)
        line = self.proc.stdout.readline() if ready else b""
        if not line:
            self.stop()
            lines = [x for x in (folder / "sim.stderr").read_text(errors="replace").splitlines() if x.strip()]
            raise SimError(f"the simulator for {folder.name} did not start: {lines[-1] if lines else 'no output'}")
        self.manifest: dict[str, Any] = json.loads(line)
        self.pid = self.proc.pid

    def cpu_s(self) -> float:
        return cpu_s(self.pid)

    def stats(self) -> dict[str, Any]:
        path = self.folder / "stats.json"
        before = path.stat().st_mtime_ns if path.exists() else 0
        self.proc.send_signal(signal.SIGUSR1)
        for _ in range(200):
            if path.exists() and path.stat().st_mtime_ns != before:
                try:
                    return json.loads(path.read_text())
                except ValueError:
                    pass  # caught mid-write
            time.sleep(0.01)
        return {}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.err.close()


@dataclass
class Peaks:
    rss_kib: int = 0  # tree mode: the PSS summed over the process tree, largest sample
    hwm_kib: int = 0  # largest VmHWM of one process (its exact peak RSS, kept by the kernel)
    fds: int = 0
    threads: int = 0
    processes: int = 0
    samples: int = 0


def _status(pid: int) -> tuple[int, int, int]:
    """VmRSS, VmHWM (KiB) and Threads of one process; zeros when it is gone."""
    rss = hwm = threads = 0
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
                elif line.startswith("Threads:"):
                    threads = int(line.split()[1])
    except OSError:
        pass
    return rss, hwm, threads


def _pss(pid: int) -> int:
    """Proportional set size (KiB): shared pages split among the processes that map them, so the sum
    over a process tree (Ansible's forks) counts each page once; zero when the process is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo.extend(int(c) for c in fh.read().split())
        except OSError:
            continue
    return found


class Sampler(threading.Thread):
    """Samples /proc of ``pid`` (and its descendants when ``tree``) every ``interval`` seconds."""

    def __init__(self, pid: int, interval: float, tree: bool) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval, self.tree = pid, interval, tree
        self.peaks = Peaks()
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.sample()
            self.done.wait(self.interval)

    def sample(self) -> None:
        pids = _descendants(self.pid) if self.tree else [self.pid]
        rss = threads = fds = 0
        for pid in pids:
            r, hwm, t = _status(pid)
            rss, threads = rss + (_pss(pid) if self.tree else r), threads + t
            self.peaks.hwm_kib = max(self.peaks.hwm_kib, hwm)
            try:
                fds += len(os.listdir(f"/proc/{pid}/fd"))
            except OSError:
                pass
        p = self.peaks
        p.rss_kib, p.threads, p.fds = max(p.rss_kib, rss), max(p.threads, threads), max(p.fds, fds)
        p.processes, p.samples = max(p.processes, len(pids)), p.samples + 1


@dataclass
class Measured:
    label: str
    hosts: int
    rtt_ms: float
    wall: float
    cpu: float  # user + system of the command and every child it waited for
    sim_cpu: float
    machine_cpu: float
    peaks: Peaks
    code: int
    stdout: bytes
    stderr: bytes
    connections: int = 0  # SSH connections the simulator accepted during the run
    logins: int = 0
    answered_hosts: int | None = None
    unreachable: int | None = None
    silent_max_s: float | None = None  # the slowest silent host's own time, as the controller reported it
    pacing: dict[str, Any] = field(default_factory=dict)  # the controller's own `fleet` block (stagger, burst)
    user_s: float = 0.0
    sys_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def peak_rss_kib(self) -> int:
        """The controller's peak memory: the exact resident high-water mark of its largest process, or
        the largest sampled PSS of its whole process tree when that is larger (peers that fork)."""
        return max(self.peaks.hwm_kib, self.peaks.rss_kib)


def measure(label: str, argv: list[str], *, env: dict[str, str], cwd: Path, sim: SimProc, hosts: int,
            rtt_ms: float, tree: bool = False, timeout: float = 1800) -> Measured:
    """Run ``argv`` once, sampling it; the simulator's CPU and counters before and after."""
    before, sim0, busy0 = sim.stats(), sim.cpu_s(), machine_busy_s()
    out_path = cwd / "last.stdout"
    with open(out_path, "wb") as out, open(cwd / "last.stderr", "wb") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, cwd=cwd)
        sampler = Sampler(proc.pid, 0.2 if tree else 0.05, tree)
        sampler.start()
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _pid, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
            sampler.done.set()
            sampler.join()
        wall = time.perf_counter() - started
    after = sim.stats()
    counts = {k: (after.get("stats") or {}).get(k, 0) - (before.get("stats") or {}).get(k, 0)
              for k in ("connections", "logins")}
    return Measured(label, hosts, rtt_ms, wall, usage.ru_utime + usage.ru_stime, sim.cpu_s() - sim0,
                    machine_busy_s() - busy0, sampler.peaks, os.waitstatus_to_exitcode(status),
                    out_path.read_bytes(), (cwd / "last.stderr").read_bytes(), counts["connections"], counts["logins"],
                    user_s=usage.ru_utime, sys_s=usage.ru_stime)
