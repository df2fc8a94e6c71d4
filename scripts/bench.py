"""The benchmark of issue 7: introspect against the hand-run way, measured side by side.

Run through ``scripts/bench`` (which sets up .venv first). Everything is built in a
temp dir that is removed at the end (also on Ctrl-C): a client key, 32 throwaway
OpenSSH servers on 127.0.0.40..127.0.0.71 (loopback only, nothing else is contacted),
a Kimi-K2.6-like model, a 64-shard sparse 1T-parameter INT4 checkpoint and one venv.

Each comparison runs its variants alternately (A B, then B A, ...) after one warm-up
run of each, ``--reps`` times, and reports medians. Wall times are of whole processes,
as a user sees them: the ``introspect`` CLI (Python start-up included) against
``/usr/bin/ssh``. It is a measurement, not a test: it exits 0 when a target is missed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import bench_latency  # noqa: E402
import bench_peers  # noqa: E402
from fleet_sim.recordings import FILES_ONLY  # noqa: E402

from introspect.transport import shipping  # noqa: E402
from tests.fixtures.venvs import make_venv  # noqa: E402
from tests.sshd_server import ClientKeys, SSHServer, start_sshd, trust  # noqa: E402

SSH = "/usr/bin/ssh"
FLEET_BASE = 40  # 127.0.0.40 .. 127.0.0.71
FLEET_SIZES = (1, 8, 32)
MiB = 1024 * 1024

# The hand-run way (benchmark 1): what an engineer types to learn the same facts.
HAND_TOKENIZER = """\
import sys
from transformers import AutoTokenizer
t = AutoTokenizer.from_pretrained(sys.argv[1], trust_remote_code=True)
ids = t.encode("Hello, world! 你好")
print(type(t).__name__, t.vocab_size, len(t), t.bos_token, t.eos_token, t.pad_token,
      bool(getattr(t, "chat_template", None)), len(ids))
"""
HAND_CONFIG = """\
import json, sys
c = json.load(open(sys.argv[1] + "/config.json"))
t = c.get("text_config", c)
print(c.get("model_type"), t.get("num_hidden_layers"), t.get("n_routed_experts"), t.get("vocab_size"))
"""

# Remote peak memory: run one introspect task as a child of this wrapper and report
# getrusage(RUSAGE_CHILDREN).ru_maxrss, the largest RSS of any waited-for descendant
# (for an isolated task: the supervisor or the tokenizer interpreter it waits for).
# stdin stays open until the task has answered: EOF is the task's signal to stop.
REMOTE_MAXRSS = """\
import json, resource, subprocess, sys
argv = json.loads(sys.stdin.buffer.readline())
envelope = sys.stdin.buffer.readline()
p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
p.stdin.write(envelope)
p.stdin.flush()
out = p.stdout.read()
rc = p.wait()
p.stdin.close()
print(json.dumps({"rc": rc, "replied": b"<<<INTROSPECT:END>>>" in out,
                  "children_maxrss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
                  "wrapper_maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


# The model fixtures are built in a child process. On Linux a child's ru_maxrss can never be
# below the peak RSS of the process that forked it (exec keeps the old high-water mark),
# so the bench itself stays small: building 211k tensor descriptions here would make every
# child process report at least that much.
FIXTURES = """\
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from tests.fixtures.kimi_model import build_kimi_model
from tests.fixtures.shards import write_kimi_k25_int4_checkpoint
models = Path(sys.argv[2])
build_kimi_model(models / "Kimi-K2.6")
print(json.dumps({"params": write_kimi_k25_int4_checkpoint(models / "Kimi-K2.5-INT4-sparse", shards=64)}))
"""


def machine_busy_s() -> float:
    """CPU-seconds this machine has spent busy (all CPUs, /proc/stat), or NaN where unknown."""
    try:
        with open("/proc/stat") as fh:
            fields = [int(v) for v in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return float("nan")
    busy = sum(fields[:8]) - fields[3] - fields[4]  # all but idle and iowait; guest is in user
    return busy / os.sysconf("SC_CLK_TCK")


def background_load(seconds: float = 1.0) -> float:
    """CPUs kept busy by others while the bench sits idle (a noisy neighbour skews every timing)."""
    before = machine_busy_s()
    time.sleep(seconds)
    return (machine_busy_s() - before) / seconds


class BenchError(RuntimeError):
    """A variant did not do its job (the timing would be meaningless)."""


# ------------------------------------------------------------------ processes


@dataclass
class Run:
    argv: list[str]
    seconds: float
    code: int
    maxrss_kib: int
    stdout: bytes
    stderr: bytes
    cpu_s: float = 0.0  # user + system CPU of the process (and its waited-for children)
    machine_cpu_s: float = float("nan")  # busy CPU-seconds of the whole machine meanwhile

    def json(self) -> Any:
        return json.loads(self.stdout)

    def fail(self, why: str) -> BenchError:
        cmd = " ".join(shlex.quote(a) for a in self.argv)
        if len(cmd) > 400:
            cmd = cmd[:400] + " ..."
        return BenchError(f"{why}\n  command: {cmd}\n  exit code: {self.code}\n"
                          f"  stderr tail: {self.stderr.decode('utf-8', 'replace')[-1500:]}")


_live: set[subprocess.Popen] = set()
_live_lock = threading.Lock()
_stopping = threading.Event()  # set when interrupted: no new process starts


def run(argv: Sequence[str], *, env: dict[str, str], cwd: Path, stdin: bytes | None = None,
        timeout: float = 300) -> Run:
    """Run one process; wall time, exit code and its own peak RSS (wait4's rusage)."""
    argv = [str(a) for a in argv]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as inp:
        if stdin is not None:
            inp.write(stdin)
            inp.seek(0)
        busy = machine_busy_s()
        started = time.perf_counter()
        with _live_lock:
            if _stopping.is_set():
                raise KeyboardInterrupt("stopping")
            proc = subprocess.Popen(argv, stdin=inp if stdin is not None else subprocess.DEVNULL, stdout=out,
                                    stderr=err, env=env, cwd=cwd)
            _live.add(proc)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _pid, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            stop_processes([proc])  # interrupted: never leave the child running
            raise
        finally:
            timer.cancel()
            with _live_lock:
                _live.discard(proc)
        seconds = time.perf_counter() - started
        busy = machine_busy_s() - busy
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Run(argv, seconds, proc.returncode, usage.ru_maxrss, out.read(), err.read(),
                   usage.ru_utime + usage.ru_stime, busy)


def run_many(calls: Sequence[Callable[[], Run]]) -> Run:
    """Run the calls at once (one thread each); one Run: wall time of all, largest RSS, CPU summed."""
    busy = machine_busy_s()
    started = time.perf_counter()
    pool = concurrent.futures.ThreadPoolExecutor(len(calls))
    try:
        runs = [future.result() for future in [pool.submit(call) for call in calls]]
    except BaseException:
        kill_live()  # interrupted: stop the others now rather than wait for them
        raise
    finally:
        pool.shutdown(wait=True)
    seconds = time.perf_counter() - started
    return Run(runs[0].argv, seconds, max(r.code for r in runs), max(r.maxrss_kib for r in runs), b"", b"",
               sum(r.cpu_s for r in runs), machine_busy_s() - busy)


def kill_live() -> None:
    """Stop every process still running and start no new one (interrupted)."""
    with _live_lock:
        _stopping.set()
        procs = list(_live)
    stop_processes(procs)


def stop_processes(procs: Sequence[subprocess.Popen]) -> None:
    """SIGTERM, then SIGKILL after 3 s."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + 3
    for proc in procs:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ------------------------------------------------------------------ statistics


@dataclass
class Series:
    label: str
    seconds: list[float] = field(default_factory=list)
    maxrss_kib: list[int] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    machine_cpu_s: list[float] = field(default_factory=list)

    def add(self, r: Run) -> None:
        self.seconds.append(r.seconds)
        self.maxrss_kib.append(r.maxrss_kib)
        self.cpu_s.append(r.cpu_s)
        self.machine_cpu_s.append(r.machine_cpu_s)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def machine_cpu(self) -> float:
        return statistics.median(self.machine_cpu_s)

    def raw_row(self, rss_floor_kib: int) -> str:
        s = self.seconds
        peak = max(self.maxrss_kib)
        # At or below the bench's own peak: the true value is lower (see the notes).
        rss = f"≤ {rss_floor_kib / 1024:.0f}" if peak <= rss_floor_kib else f"{peak / 1024:.0f}"
        return (f"| {self.label} | {self.median:.3f} | {min(s):.3f} | {max(s):.3f} | {len(s)} | "
                f"{statistics.median(self.cpu_s):.2f} | {self.machine_cpu:.2f} | {rss} |")


def cpu_bound_why(most: Series, one: Series, hosts: int, floors: tuple[Series, Series] | None = None) -> str:
    """Why a fleet ratio cannot reach its target here: the work of every host shares this machine's CPUs.
    ``floors``: the same number of bare `ssh host true` at once, and one."""
    cores = os.cpu_count() or 1
    bound = most.machine_cpu / cores / one.median
    why = (f"CPU-bound on loopback: the {hosts}-host run needs {most.machine_cpu:.1f} CPU-s of this machine "
           f"({hosts} sshd, login shells and remote interpreters, and the controller), so even with perfect "
           f"overlap it takes ≥ {most.machine_cpu / cores:.2f} s on {cores} CPU(s) = {bound:.1f}× the 1-host wall")
    if floors is not None:
        why += f"; {hosts} bare `ssh host true` at once take {floors[0].median / floors[1].median:.1f}× one"
    return why


def alternate(reps: int, variants: Sequence[tuple[Series, Callable[[], Run]]], log: Callable[[str], None]) -> None:
    """One warm-up run of each variant (not counted), then ``reps`` rounds, the order
    reversed every other round (A B, B A, ...), so that drift hits every variant alike."""
    for _series, call in variants:
        call()
    for rep in range(reps):
        order = list(variants) if rep % 2 == 0 else list(reversed(variants))
        for series, call in order:
            series.add(call())
        done = ", ".join(f"{s.label.split(' (')[0]} {s.seconds[-1]:.2f}s" for s, _ in variants)
        log(f"    round {rep + 1}/{reps}: {done}")


# ------------------------------------------------------------------ the bench


@dataclass
class Row:
    metric: str
    measured: str
    target: str
    met: bool | None  # None: informational
    why: str = ""  # when missed: the measured reason, printed beside the row


class Bench:
    def __init__(self, tmp: Path, reps: int, log: Callable[[str], None]) -> None:
        self.tmp = tmp
        self.reps = reps
        self.log = log
        self.servers: list[SSHServer] = []
        self.rows: list[Row] = []
        self.series: list[Series] = []
        self.notes: list[str] = []
        self.load: list[float] = []
        self.cwd = tmp / "cwd"  # no hosts.yaml here: the CLI reads only what the bench passes
        self.cwd.mkdir()
        self.env = {k: v for k, v in os.environ.items() if k not in ("SSH_AUTH_SOCK", "PYTHONSTARTUP")}
        # Bytecode is cached (in the temp dir, never in the checkout), as it is for an installed
        # package: without it every CLI run would compile introspect's own modules anew.
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.env.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                        INTROSPECT_CACHE_DIR=str(tmp / "cache"), PYTHONPYCACHEPREFIX=str(tmp / "pycache"))
        self.peers_table = ""

    # -- setup -----------------------------------------------------------------
    def setup(self) -> None:
        t0 = time.monotonic()
        self.client = ClientKeys(self.tmp / "client")
        addresses = [f"127.0.0.{FLEET_BASE + i}" for i in range(max(FLEET_SIZES))]
        lock = threading.Lock()

        def start(address: str) -> None:
            server = start_sshd(self.tmp / "sshd" / address, self.client, address=address)
            with lock:
                self.servers.append(server)  # recorded at once, so that cleanup stops every one started

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for future in [pool.submit(start, a) for a in addresses]:
                future.result()
        self.servers.sort(key=lambda s: int(s.address.rsplit(".", 1)[1]))
        for server in self.servers:
            trust(server, self.client)
        self.host = self.servers[0]
        self.log(f"  {len(self.servers)} sshd on {addresses[0]}..{addresses[-1]} "
                 f"({time.monotonic() - t0:.1f} s)")
        t0 = time.monotonic()
        self.venv = make_venv(self.tmp / "venv")
        models = self.tmp / "models"
        r = run([sys.executable, "-c", FIXTURES, REPO, models], env=self.env, cwd=self.cwd)
        if r.code != 0:
            raise r.fail("building the model fixtures failed")
        self.model = models / "Kimi-K2.6"
        self.big = models / "Kimi-K2.5-INT4-sparse"
        self.big_params = int(json.loads(r.stdout)["params"])
        self.big_shards = len(list(self.big.glob("*.safetensors")))
        apparent = sum(p.stat().st_size for p in self.big.glob("*.safetensors"))
        self.log(f"  fixtures: Kimi-K2.6-like model, {self.big_shards}-shard sparse checkpoint "
                 f"({self.big_params / 1e12:.3f}T params, {apparent / 2**30:.0f} GiB apparent), one venv "
                 f"({time.monotonic() - t0:.1f} s)")

    # -- commands ----------------------------------------------------------------
    def ssh_argv(self, server: SSHServer, remote: str) -> list[str]:
        return [SSH, "-i", str(self.client.key), "-o", f"UserKnownHostsFile={self.client.known_hosts}",
                "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-p", str(server.port),
                "-F", "/dev/null", server.address, remote]

    def ssh(self, remote: str, *, stdin: bytes | None = None, server: SSHServer | None = None) -> Run:
        return run(self.ssh_argv(server or self.host, remote), env=self.env, cwd=self.cwd, stdin=stdin)

    def introspect(self, *args: str | Path) -> Run:
        return run([sys.executable, "-m", "introspect.cli.main", *map(str, args)], env=self.env, cwd=self.cwd)

    def probe(self, model: Path, *extra: str) -> Run:
        return run(self.probe_argv(self.host, model, *extra), env=self.env, cwd=self.cwd)

    def checked_probe(self, model: Path, *extra: str, tokenizer: bool, cache_hit: bool | None = None) -> Run:
        r = self.probe(model, *extra)
        try:
            profile = r.json()
        except ValueError:
            raise r.fail("introspect probe printed no profile") from None
        files = profile.get("files") or {}
        if r.code not in (0, 1) or files.get("status") != "ok":
            raise r.fail(f"introspect probe failed (files status {files.get('status')!r})")
        if tokenizer and not (profile.get("tokenizer") or {}).get("loaded"):
            raise r.fail("introspect probe did not load the tokenizer")
        if cache_hit is not None and bool((profile.get("cache") or {}).get("hit")) != cache_hit:
            raise r.fail(f"expected cache hit={cache_hit}, the profile says {profile.get('cache')}")
        self.last_profile = profile
        return r

    def hand_tokenizer(self) -> Run:
        hf = shlex.quote(str(self.tmp / "hand-hf"))
        r = self.ssh(f"HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HOME={hf} "
                     f"{shlex.quote(str(self.venv / 'bin' / 'python'))} -c {shlex.quote(HAND_TOKENIZER)} "
                     f"{shlex.quote(str(self.model))}")
        if r.code != 0 or b"163840" not in r.stdout:
            raise r.fail("the hand-run tokenizer load failed")
        return r

    def hand_config(self) -> Run:
        r = self.ssh(f"{shlex.quote(str(self.venv / 'bin' / 'python'))} -c {shlex.quote(HAND_CONFIG)} "
                     f"{shlex.quote(str(self.model))}")
        if r.code != 0 or not r.stdout.strip():
            raise r.fail("the hand-run config read failed")
        return r

    # -- 1 -----------------------------------------------------------------------
    def bench_full_probe(self) -> None:
        self.log("1. full probe (tokenizer) vs the hand-run pair of ssh commands")
        probe = Series("introspect probe --no-cache (full, with tokenizer)")
        pair = Series("hand-run pair: ssh tokenizer load, then ssh config read")
        timings: list[dict[str, Any]] = []

        def run_probe() -> Run:
            r = self.checked_probe(self.model, "--no-cache", tokenizer=True)
            timings.append(self.last_profile.get("timings") or {})
            return r

        def run_pair() -> Run:
            a = self.hand_tokenizer()
            b = self.hand_config()
            return Run(a.argv, a.seconds + b.seconds, 0, max(a.maxrss_kib, b.maxrss_kib), a.stdout + b.stdout, b"",
                       a.cpu_s + b.cpu_s, a.machine_cpu_s + b.machine_cpu_s)

        alternate(self.reps, [(probe, run_probe), (pair, run_pair)], self.log)
        self.series += [probe, pair]
        ratio = probe.median / pair.median
        keys = ("total", "model", "tokenizer", "tokenizer.supervisor", "tokenizer.load")
        med = {k: statistics.median(t[k] for t in timings if isinstance(t.get(k), (int, float)))
               for k in keys if any(isinstance(t.get(k), (int, float)) for t in timings)}
        why = (f"the tokenizer load alone takes {med.get('tokenizer.load', 0):.2f} s of the hand-run pair's "
               f"{pair.median:.2f} s; the probe's machine CPU is {probe.machine_cpu:.2f} CPU-s against the pair's "
               f"{pair.machine_cpu:.2f} on {os.cpu_count()} CPU(s)")
        self.rows.append(Row("1. full `probe` (Kimi-like, tokenizer, over SSH) / hand-run pair (2 × ssh)",
                             f"{ratio:.2f}× ({probe.median:.2f} s vs {pair.median:.2f} s)", "≤ 1.1×", ratio <= 1.1,
                             why))
        self.notes.append("1. inside the probe (median of the profile's own timings, s): "
                          + ", ".join(f"{k} {v:.2f}" for k, v in med.items())
                          + f"; the rest of the {probe.median:.2f} s is the CLI's start-up, connect and report. "
                          f"Machine-wide CPU: {probe.machine_cpu:.2f} CPU-s for the probe vs "
                          f"{pair.machine_cpu:.2f} for the hand-run pair (the file probe runs beside the "
                          f"tokenizer load, on {os.cpu_count()} CPU(s) shared with sshd)")
        self.probe_rss = probe

    # -- 2 -----------------------------------------------------------------------
    def bench_files_probe(self) -> None:
        self.log("2. files-only probe vs one bare `ssh host true` (and the CLI start-up alone)")
        probe = Series("introspect probe --no-tokenizer --no-model-code --no-cache (Kimi-like)")
        bare = Series("ssh host true")
        start = Series("introspect --help (CLI start-up, no host)")

        def run_bare() -> Run:
            r = self.ssh("true")
            if r.code != 0:
                raise r.fail("ssh host true failed")
            return r

        def run_help() -> Run:
            r = self.introspect("--help")
            if r.code != 0:
                raise r.fail("introspect --help failed")
            return r

        alternate(self.reps, [(probe, lambda: self.checked_probe(self.model, *FILES_ONLY,
                                                                   tokenizer=False)),
                              (bare, run_bare), (start, run_help)], self.log)
        self.series += [probe, bare, start]
        ratio = probe.median / bare.median
        beyond = probe.median - start.median
        self.rows.append(Row("2. `probe --no-tokenizer` (files only) / one bare `ssh host true`",
                             f"{ratio:.2f}× ({probe.median:.2f} s vs {bare.median:.2f} s)", "≤ 3×", ratio <= 3,
                             f"the CLI's start-up alone (`--help`) is {start.median:.2f} s; connect and remote "
                             f"file probe {beyond:.2f} s"))
        self.notes.append(f"2. the CLI's own start-up (`introspect --help`) takes {start.median:.2f} s of the "
                          f"files-only probe's {probe.median:.2f} s; the connect and the remote file probe "
                          f"take the remaining {beyond:.2f} s ({beyond / bare.median:.2f}× a bare `ssh true`)")

    # -- 3 -----------------------------------------------------------------------
    def bench_shards(self) -> None:
        self.log(f"3. safetensors headers of the {self.big_shards}-shard 1T-parameter sparse checkpoint")
        probe = Series(f"introspect probe --no-tokenizer --no-model-code --no-cache ({self.big_shards} sparse shards)")
        facts: list[tuple[int, float | None]] = []
        timings: list[dict[str, Any]] = []

        def run_probe() -> Run:
            r = self.checked_probe(self.big, *FILES_ONLY, tokenizer=False)
            files = self.last_profile.get("files") or {}
            read = files.get("safetensors_bytes_read")
            if not isinstance(read, int):
                raise r.fail(f"no files.safetensors_bytes_read in the profile: {files}")
            timings.append(self.last_profile.get("timings") or {})
            facts.append((read, timings[-1].get("model")))
            return r

        alternate(self.reps, [(probe, run_probe)], self.log)
        self.series.append(probe)
        per_shard = max(read for read, _ in facts) / self.big_shards
        self.rows.append(Row(f"3a. safetensors bytes read per shard ({self.big_shards} shards, "
                             f"{self.big_params / 1e12:.2f}T params)",
                             f"{per_shard / 1024:.0f} KiB", "< 1 MiB", per_shard < MiB))
        remote = [s for _, s in facts if isinstance(s, (int, float))]
        self.rows.append(Row("3b. `probe --no-tokenizer` of that checkpoint, wall (loopback)",
                             f"{probe.median:.2f} s", "< 1 s", probe.median < 1,
                             f"the remote file probe alone takes {statistics.median(remote or [0]):.2f} s; the CLI "
                             f"{statistics.median(probe.cpu_s):.2f} CPU-s; the run kept the machine busy for "
                             f"{probe.machine_cpu:.2f} CPU-s on {os.cpu_count()} CPU(s)"))
        if remote:
            self.notes.append(f"3. the remote file probe itself (config, index, {self.big_shards} headers) took "
                              f"{statistics.median(remote):.2f} s (median); all headers together: "
                              f"{max(r for r, _ in facts) / MiB:.1f} MiB read of "
                              f"{sum(p.stat().st_size for p in self.big.glob('*.safetensors')) / 2**40:.2f} TiB "
                              "apparent size; its sections (median s, run concurrently): " + ", ".join(
                                  f"{k[len('model.'):]} {statistics.median(t[k] for t in timings if k in t):.2f}"
                                  for k in sorted({k for t in timings for k in t if k.startswith("model.")})))
        self.big_rss = probe

    # -- 4 -----------------------------------------------------------------------
    def write_inventory(self, servers: Sequence[SSHServer] | None = None, name: str = "hosts.yaml") -> Path:
        lines = ["defaults:", f"  identity: {json.dumps(str(self.client.key))}",
                 f"  known_hosts: {json.dumps(str(self.client.known_hosts))}",
                 "  connect_timeout: 10", "  probe_timeout: 60", f"  parallel: {max(FLEET_SIZES)}",
                 "  remote_code: false", "hosts:"]
        for i, server in enumerate(servers or self.servers):
            lines += [f"  bench-{i:02d}:", f"    address: {server.address}", f"    port: {server.port}",
                      "    venvs:", f"      - path: {json.dumps(str(self.venv))}",
                      "        requires: [transformers, tiktoken, tokenizers]"]
        path = self.tmp / name
        path.write_text("\n".join(lines) + "\n")
        return path

    def health(self, inventory: Path, n: int) -> Run:
        names = ",".join(f"bench-{i:02d}" for i in range(n))
        r = self.introspect("health", "--hosts", inventory, "--only", names, "--parallel", str(max(FLEET_SIZES)),
                            "--ssh-config", "/dev/null", "--db", self.tmp / "health.db", "--json")
        try:
            doc = r.json()
        except ValueError:
            raise r.fail(f"introspect health over {n} host(s) printed no JSON") from None
        summary = doc.get("summary") or {}
        if summary.get("hosts") != n or summary.get("unreachable") or r.code not in (0, 1):
            raise r.fail(f"introspect health over {n} host(s): {summary}")
        self.last_fleet = doc.get("fleet") or {}
        return r

    def probe_argv(self, server: SSHServer, model: Path, *extra: str) -> list[str]:
        return [sys.executable, "-m", "introspect.cli.main", "probe", "--host", server.address, "--port",
                str(server.port), "--identity", str(self.client.key), "--known-hosts", str(self.client.known_hosts),
                "--ssh-config", "/dev/null", "--model", str(model), "--venv", str(self.venv), "--json", *extra]

    def concurrent_probes(self, n: int) -> Run:
        """Fallback fleet: N `probe --no-tokenizer` processes at once, one per host."""
        r = run_many([lambda s=s: run(self.probe_argv(s, self.model, *FILES_ONLY),
                                      env=self.env, cwd=self.cwd) for s in self.servers[:n]])
        if r.code not in (0, 1):
            raise r.fail(f"a concurrent probe of {n} failed")
        return r

    def concurrent_ssh_true(self, n: int) -> Run:
        """The floor of a fleet run on this machine: N bare `ssh host true` at once."""
        r = run_many([lambda s=s: self.ssh("true", server=s) for s in self.servers[:n]])
        if r.code != 0:
            raise r.fail(f"{n} concurrent `ssh host true` failed")
        return r

    def bench_fleet(self) -> None:
        inventory = self.write_inventory()
        mode = "health"
        try:
            self.health(inventory, 1)
        except BenchError as exc:
            mode = "probes"
            first = str(exc).strip().splitlines()
            self.log(f"4. `introspect health` is not usable here ({first[0]}): falling back to concurrent "
                     "`introspect probe --no-tokenizer` processes")
            self.notes.append("4. FALLBACK: `introspect health` was not usable in this run ("
                              + first[0] + "); the fleet rows time N concurrent `introspect probe "
                              "--no-tokenizer --no-model-code --no-cache` processes instead (one CLI process per host)")
        fleet_stats: dict[int, dict[str, Any]] = {}
        series: list[tuple[Series, Callable[[], Run]]] = []
        for n in FLEET_SIZES:
            if mode == "health":
                label = f"introspect health, {n} host(s), --parallel {max(FLEET_SIZES)}"

                def call(n: int = n) -> Run:
                    r = self.health(inventory, n)
                    fleet_stats[n] = self.last_fleet
                    return r
            else:
                label = f"{n} concurrent `introspect probe --no-tokenizer` process(es)"

                def call(n: int = n) -> Run:
                    return self.concurrent_probes(n)
            series.append((Series(label), call))
        floors = [(Series(f"reference: {n} concurrent `ssh host true` (one per host)"),
                   lambda n=n: self.concurrent_ssh_true(n)) for n in (FLEET_SIZES[0], FLEET_SIZES[-1])]
        self.log(f"4. fleet ({'introspect health' if mode == 'health' else 'fallback: concurrent probes'}) "
                 f"over {', '.join(map(str, FLEET_SIZES))} hosts, and {FLEET_SIZES[-1]} bare ssh at once")
        alternate(self.reps, series + floors, self.log)
        self.series += [s for s, _ in series + floors]
        one, most = series[0][0], series[-1][0]
        ratio = most.median / one.median
        what = "`health`" if mode == "health" else "concurrent `probe` processes (fallback)"
        floor_one, floor_most = floors[0][0], floors[1][0]
        cores = os.cpu_count() or 1
        self.rows.append(Row(f"4. fleet {what}: {FLEET_SIZES[-1]} hosts / 1 host, wall",
                             f"{ratio:.2f}× ({most.median:.2f} s vs {one.median:.2f} s; "
                             f"{FLEET_SIZES[1]} hosts {series[1][0].median:.2f} s)", "≤ 2×", ratio <= 2,
                             cpu_bound_why(most, one, FLEET_SIZES[-1], (floor_most, floor_one))))
        if mode == "health":
            bench_latency.controller_rows(self, [s for s, _ in series], FLEET_SIZES)
            stats = fleet_stats.get(FLEET_SIZES[-1], {})
            self.notes.append(f"4. each host: one venv, checks `requires: [transformers, tiktoken, tokenizers]` "
                              f"(installed metadata; no imports, no tokenizer loads); {FLEET_SIZES[-1]} hosts: "
                              f"at most {stats.get('max_open_connections', '?')} connection(s) open at once")
        self.notes.append(
            f"4. all {FLEET_SIZES[-1]} sshd, every remote interpreter and the controller share this machine's "
            f"{cores} CPU(s): the {FLEET_SIZES[-1]}-host run kept the machine busy for {most.machine_cpu:.1f} "
            f"CPU-s ({most.machine_cpu / most.median / cores:.0%} of {cores} CPU(s) over its "
            f"{most.median:.2f} s; controller {statistics.median(most.cpu_s):.1f} CPU-s), the 1-host run "
            f"{one.machine_cpu:.1f} CPU-s, i.e. {(most.machine_cpu - one.machine_cpu) / (FLEET_SIZES[-1] - 1):.2f} "
            f"CPU-s per extra host; even {FLEET_SIZES[-1]} bare `ssh host true` at once take "
            f"{floor_most.median / floor_one.median:.1f}× one ({floor_most.median:.2f} s vs {floor_one.median:.2f} s, "
            f"{floor_most.machine_cpu:.1f} CPU-s)")
        self.fleet_rss = series[-1][0]

    # -- 5 -----------------------------------------------------------------------
    def bench_cache(self) -> None:
        self.log("5. cached repeat probe vs a cold one (`--refresh`)")
        cold = Series("introspect probe --refresh (cold, full, with tokenizer)")
        warm = Series("introspect probe (cache hit: only the fingerprint check runs)")
        alternate(self.reps, [(cold, lambda: self.checked_probe(self.model, "--refresh", tokenizer=True,
                                                                 cache_hit=False)),
                              (warm, lambda: self.checked_probe(self.model, tokenizer=True, cache_hit=True))],
                  self.log)
        self.series += [cold, warm]
        ratio = warm.median / cold.median
        self.rows.append(Row("5. cached repeat `probe` / cold `probe --refresh` (full profile)",
                             f"{ratio:.2f}× ({warm.median:.2f} s vs {cold.median:.2f} s; "
                             f"{cold.median / warm.median:.1f}× faster)", "(informational)", None))

    # -- memory --------------------------------------------------------------------
    def remote_maxrss(self, task: str, request: dict[str, Any], isolate: bool) -> dict[str, Any]:
        python = str(self.venv / "bin" / "python")
        payload = (json.dumps(shipping.command_argv(python)).encode() + b"\n"
                   + shipping.envelope(task, request, isolate=isolate, timeout=120))
        r = self.ssh(f"{shlex.quote(python)} -c {shlex.quote(REMOTE_MAXRSS)}", stdin=payload)
        try:
            doc = json.loads(r.stdout.decode().strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise r.fail(f"the remote maxrss wrapper for {task} printed no JSON") from None
        if not doc.get("replied"):
            raise r.fail(f"the {task} task did not reply under the maxrss wrapper: {doc}")
        return doc

    def bench_memory(self) -> None:
        self.log("memory: remote peak RSS of the probe tasks (ru_maxrss of the remote task's processes)")
        model_req = {"model_path": str(self.model), "json_cap": 16 * MiB, "max_header": 100 * MiB, "deadline": 60}
        big_req = dict(model_req, model_path=str(self.big))
        tok_req = {"model_path": str(self.model), "trust_remote_code": True, "sample": True}
        remote = {
            "file probe (\"model\" task), Kimi-like": self.remote_maxrss("model", model_req, False),
            f"file probe (\"model\" task), {self.big_shards}-shard checkpoint": self.remote_maxrss(
                "model", big_req, False),
            "tokenizer probe (isolated; largest process)": self.remote_maxrss("tokenizer", tok_req, True),
        }
        local = {what: series for what, series in {  # the sections that ran (see --only)
            "`probe` full (tokenizer)": getattr(self, "probe_rss", None),
            f"`probe --no-tokenizer`, {self.big_shards} shards": getattr(self, "big_rss", None),
            f"fleet run, {FLEET_SIZES[-1]} hosts": getattr(self, "fleet_rss", None),
        }.items() if series is not None}
        floor = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        for what, series in local.items():
            peak = max(series.maxrss_kib)
            shown = f"≤ {floor / 1024:.0f} MiB" if peak <= floor else f"{peak / 1024:.0f} MiB"
            self.rows.append(Row(f"local peak RSS: {what} (the CLI process)", shown, "(informational)", None))
        for what, doc in remote.items():
            self.rows.append(Row(f"remote peak RSS: {what}", f"{doc['children_maxrss_kib'] / 1024:.0f} MiB",
                                 "(informational)", None))
        self.notes.append("memory: local = ru_maxrss of each introspect CLI process from wait4() (max over the "
                          "runs; Linux never reports a child below the peak RSS of the process that forked it, "
                          f"here the bench's own {floor / 1024:.0f} MiB: smaller values show as ≤ that); remote = the task run over SSH as the child of a tiny Python wrapper on the "
                          "host that prints getrusage(RUSAGE_CHILDREN).ru_maxrss, i.e. the peak RSS of the "
                          "largest process of the task (the interpreter running the file probe; for the isolated "
                          "tokenizer probe, its supervisor or the interpreter loading the tokenizer), same "
                          "shipped code and envelope as `introspect probe` sends")

    # -- report --------------------------------------------------------------------
    def report(self, elapsed: float) -> str:
        # Headings at docs/performance.md's levels: the output pastes there as is.
        out = ["", f"### One run of `scripts/bench`, --reps {self.reps} (medians of alternating runs)", "",
               f"Machine: {os.cpu_count()} CPU(s), Python {sys.version.split()[0]}, {os.uname().sysname} "
               f"{os.uname().release}; hosts are OpenSSH servers on 127.0.0.x of the same machine. "
               "Background load (CPUs busy with other work while the bench idled, before / after): "
               + " / ".join(f"{x:.2f}" for x in self.load) + (
                   " (NOTE: other work was running; timings and CPU-s include its interference)"
                   if any(x > 0.25 for x in self.load) else ""), "",
               "| metric | measured | target | met? | why not (measured in this run) |", "|---|---|---|---|---|"]
        for row in self.rows:
            met = "—" if row.met is None else ("yes" if row.met else "**no**")
            out.append(f"| {row.metric} | {row.measured} | {row.target} | {met} | {row.why if row.met is False else ''} |")
        floor = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out += ["", "#### Raw medians", "",
                "Wall time per process (or per set of concurrent processes); CPU-s: user + system CPU of the "
                "local process(es), and busy CPU-seconds of the whole machine meanwhile (sshd and the remote "
                "interpreters run here too, and so does any other work on the machine); peak RSS: the largest local "
                "process.", "",
                "| variant | median s | min s | max s | runs | CPU-s local | CPU-s machine | peak RSS MiB |",
                "|---|---|---|---|---|---|---|---|"]
        out += [s.raw_row(floor) for s in self.series]
        if self.peers_table:
            out += ["", "#### Peers (scripts/bench --peers)", "", self.peers_table]
        out += ["", "#### Notes", ""] + [f"- {n}" for n in self.notes]
        out += ["", f"bench: done in {elapsed:.0f} s"]
        return "\n".join(out)


def main() -> int:
    if "--fleet" in sys.argv[1:]:
        # A different bench: simulated hosts instead of real sshd (scripts/bench_fleet.py has its own options).
        import bench_fleet

        return bench_fleet.main([a for a in sys.argv[1:] if a != "--fleet"])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fleet", action="store_true", help="instead: the fleet bench on 10 to 1,000 simulated "
                        "hosts and its peers (scripts/bench_fleet.py; `scripts/bench --fleet --help`)")
    parser.add_argument("--reps", type=int, default=5, help="measured rounds per comparison (default 5)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (prints its path)")
    parser.add_argument("--peers", action="store_true",
                        help="also run the same version-check job by Ansible, pyinfra and parallel-ssh on the same hosts "
                        "(installs them once under ~/.cache/introspect-bench)")
    parser.add_argument("--only", default="", help="comma-separated sections to run (default: all): "
                        "full,files,shards,floor,fleet,latency,cache,memory")
    args = parser.parse_args()
    if args.reps < 1:
        parser.error("--reps must be at least 1")

    def on_signal(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    # SIGINT explicitly too: a shell starts background jobs with SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if not os.access(SSH, os.X_OK):
        log(f"bench: error: {SSH} not found: the hand-run baseline needs the OpenSSH client "
            "(apt-get install openssh-client)")
        return 1
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="introspect-bench-"))
    bench = Bench(tmp, args.reps, log)
    try:
        log(f"bench: setting up in {tmp}")
        bench.load.append(background_load())
        bench.setup()
        sections: list[tuple[str, Callable[[], None]]] = [
            ("full", bench.bench_full_probe), ("files", bench.bench_files_probe), ("shards", bench.bench_shards),
            ("floor", lambda: bench_latency.bench_floor(bench)), ("fleet", bench.bench_fleet),
            ("latency", lambda: bench_latency.bench_latency(bench)), ("cache", bench.bench_cache),
            ("memory", bench.bench_memory)]
        only = {w for w in args.only.split(",") if w}
        for name, section in sections:
            if not only or name in only:
                section()
        if args.peers:
            bench_peers.bench_peers(bench)
        bench.load.append(background_load())
        print(bench.report(time.monotonic() - started), flush=True)
        return 0
    except BenchError as exc:
        log(f"bench: error: {exc}")
        return 1
    except KeyboardInterrupt:
        log("bench: interrupted; cleaning up")
        return 130
    finally:
        # Ctrl-C again while cleaning up must not leave sshd or the temp dir behind.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        kill_live()
        for server in bench.servers:
            server.stop()
        if args.keep:
            log(f"bench: kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.modules.setdefault("bench", sys.modules["__main__"])  # scripts/bench_latency imports this module
    sys.exit(main())
