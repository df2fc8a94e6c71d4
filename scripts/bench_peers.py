"""``scripts/bench --peers``: the same version-check job by introspect's peers, on the bench's hosts.

Each peer runs ``<venv>/bin/python -c 'import sys; print(sys.version)'`` on 1, 8 and 32 of the
bench's loopback sshd (its client key and known_hosts), alternating with the others:

- Ansible ad hoc, ``ansible -f 32 -m raw`` and ``-m command`` with pipelining (one ssh per host);
- pyinfra ``exec`` (paramiko under gevent);
- parallel-ssh's ``ParallelSSHClient`` (libssh2), from a short script;
- and ``introspect health --json`` over the same hosts for reference (a bigger job: it also
  reads the venv's installed metadata and checks three requirements).

The peers are installed from the package registry once per machine into a venv under
``~/.cache/introspect-bench/`` (ansible-core pinned like tests/fixtures/ansible_venv.py).
Ansible's default ``ControlPersist=60s`` is turned off (``ControlMaster=no``): a persisted master
would carry the connection from one run to the next and its CPU would escape wait4, while every
other variant here connects afresh. parallel-ssh checks no host keys (ssh2-python has no
known_hosts check in ``ParallelSSHClient``); the others check them against the bench's file.
Controller CPU is user + system of the command and every child it waited for (the ssh clients).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench import Bench, Run, Series

PINS = ("ansible-core==2.19.14", "pyinfra==3.10.0", "parallel-ssh==2.16.0.post1")
SIZES = (1, 8, 32)
JOB = "import sys; print(sys.version)"

PSSH = """\
import json, sys
from pssh.clients import ParallelSSHClient
from pssh.config import HostConfig
spec = json.loads(sys.argv[1])
hosts = [h["address"] for h in spec["hosts"]]
config = [HostConfig(port=h["port"], private_key=spec["key"]) for h in spec["hosts"]]
client = ParallelSSHClient(hosts, host_config=config, pool_size=len(hosts), timeout=30)
output = client.run_command(spec["command"], stop_on_errors=True)
client.join(output)
lines = [list(o.stdout) for o in output]
bad = [o.host for o, out in zip(output, lines) if o.exit_code != 0 or not out]
print(json.dumps({"hosts": len(lines), "failed": bad}))
print("\\n".join(out[0] for out in lines if out))
sys.exit(1 if bad else 0)
"""


def peers_venv() -> Path:
    """The peers' venv, built from the registry once per machine and pin set."""
    key = hashlib.sha256(f"{sys.version}|{'|'.join(PINS)}".encode()).hexdigest()[:12]
    dest = Path.home() / ".cache" / "introspect-bench" / f"peers-{key}"
    if (dest / "BUILT").exists():
        return dest
    building = dest.with_name(dest.name + f".building-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(building)], check=True)
    pip = subprocess.run([str(building / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", *PINS],
                         capture_output=True, text=True, timeout=900, check=False)
    if pip.returncode != 0:
        shutil.rmtree(building, ignore_errors=True)
        raise RuntimeError(f"pip install {' '.join(PINS)} failed: {pip.stderr.strip()[-300:]}")
    # venv scripts name their interpreter by absolute path: point them at the final name.
    for script in (building / "bin").iterdir():
        if script.is_file() and not script.is_symlink():
            text = script.read_bytes()
            if text.startswith(b"#!") and str(building).encode() in text.split(b"\n", 1)[0]:
                script.write_bytes(text.replace(str(building).encode(), str(dest).encode(), 1))
    (building / "BUILT").write_text("\n".join(PINS) + "\n")
    os.replace(building, dest)
    return dest


class Peers:
    def __init__(self, bench: Bench, venv: Path) -> None:
        self.bench = bench
        self.bin = venv / "bin"
        self.dir = bench.tmp / "peers"
        self.dir.mkdir(exist_ok=True)
        self.python = str(bench.venv / "bin" / "python")  # the hosts' interpreter (same machine)
        self.command = f"{self.python} -c {shlex.quote(JOB)}"
        self.version = subprocess.run([self.python, "-c", JOB], capture_output=True, check=True).stdout.strip()
        known = bench.client.known_hosts
        ini = ["[bench]"] + [f"bench-{i:02d} ansible_host={s.address} ansible_port={s.port}"
                             for i, s in enumerate(bench.servers)]
        ini += ["[bench:vars]", f"ansible_ssh_private_key_file={bench.client.key}",
                f"ansible_python_interpreter={self.python}"]
        (self.dir / "inventory.ini").write_text("\n".join(ini) + "\n")
        hosts = [(f"bench-{i:02d}", {"ssh_hostname": s.address, "ssh_port": s.port, "ssh_key": str(bench.client.key),
                                     "ssh_known_hosts_file": str(known), "ssh_strict_host_key_checking": "yes"})
                 for i, s in enumerate(bench.servers)]
        # One group per size: pyinfra's --limit takes a group (or one name/glob), not a list.
        (self.dir / "pyinfra_inventory.py").write_text("".join(f"first{n} = {hosts[:n]!r}\n" for n in SIZES))
        (self.dir / "pssh_job.py").write_text(PSSH)
        self.env = dict(bench.env, ANSIBLE_HOME=str(self.dir / "ah"), ANSIBLE_NOCOLOR="1",
                        ANSIBLE_HOST_KEY_CHECKING="1", ANSIBLE_RETRY_FILES_ENABLED="0",
                        ANSIBLE_SSH_ARGS=f"-o ControlMaster=no -o UserKnownHostsFile={known} -F /dev/null")

    def _run(self, argv: list[str], n: int, what: str, env: dict[str, str] | None = None) -> Run:
        from bench import run

        r = run(argv, env=env or self.env, cwd=self.dir, timeout=600)
        if r.code != 0 or (r.stdout + r.stderr).count(self.version) < n:
            raise r.fail(f"{what} over {n} host(s) did not answer on every host")
        return r

    def limit(self, n: int) -> str:
        return ",".join(f"bench-{i:02d}" for i in range(n))

    def ansible_raw(self, n: int) -> Run:
        return self._run([str(self.bin / "ansible"), "bench", "-i", str(self.dir / "inventory.ini"), "-l",
                          self.limit(n), "-f", "32", "-m", "raw", "-a", self.command], n, "ansible -m raw")

    def ansible_command(self, n: int) -> Run:
        return self._run([str(self.bin / "ansible"), "bench", "-i", str(self.dir / "inventory.ini"), "-l",
                          self.limit(n), "-f", "32", "-m", "command", "-a", self.command], n, "ansible -m command",
                         env=dict(self.env, ANSIBLE_PIPELINING="1"))

    def pyinfra(self, n: int) -> Run:
        return self._run([str(self.bin / "pyinfra"), "-y", "--parallel", "32", "--limit", f"first{n}",
                          str(self.dir / "pyinfra_inventory.py"), "exec", "--", self.command], n, "pyinfra exec")

    def pssh(self, n: int) -> Run:
        spec = {"key": str(self.bench.client.key), "command": self.command,
                "hosts": [{"address": s.address, "port": s.port} for s in self.bench.servers[:n]]}
        r = self._run([str(self.bin / "python"), str(self.dir / "pssh_job.py"), json.dumps(spec)], n, "pssh")
        if json.loads(r.stdout.splitlines()[0]).get("hosts") != n:
            raise r.fail(f"parallel-ssh did not run on {n} host(s)")
        return r


def _marginal(series: dict[int, Series], attr: str) -> float:
    values = {n: statistics.median(getattr(s, attr)) for n, s in series.items()}
    return (values[SIZES[-1]] - values[SIZES[0]]) / (SIZES[-1] - SIZES[0])


def bench_peers(bench: Bench) -> None:
    """Append the peers' table (``bench.peers_table``) and their raw series to the report."""
    from bench import Series, alternate, background_load

    bench.log("7. peers: Ansible, pyinfra, parallel-ssh (installing them once under ~/.cache/introspect-bench)")
    t0 = time.monotonic()
    try:
        peers = Peers(bench, peers_venv())
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        bench.notes.append(f"peers: not run, the peers' venv could not be built: {exc}")
        return
    bench.log(f"  peers' venv ready ({time.monotonic() - t0:.1f} s)")
    inventory = bench.write_inventory(name="peers-hosts.yaml")
    tools: list[tuple[str, Callable[[int], Run]]] = [
        ("introspect health --json (reference: metadata + 3 requirements)", lambda n: bench.health(inventory, n)),
        ("ansible -m raw", peers.ansible_raw),
        ("ansible -m command, pipelining", peers.ansible_command),
        ("pyinfra exec", peers.pyinfra),
        ("parallel-ssh (ParallelSSHClient)", peers.pssh)]
    load_before = background_load()
    table: dict[str, dict[int, Series]] = {name: {} for name, _ in tools}
    for n in SIZES:
        variants = []
        for name, call in tools:
            table[name][n] = Series(f"peers: {name}, {n} host(s)")
            variants.append((table[name][n], lambda call=call, n=n: call(n)))
        bench.log(f"  {n} host(s)")
        alternate(bench.reps, variants, bench.log)
    load_after = background_load()
    lines = [f"Job: `{JOB}` on each host (introspect: its health job). Background load before / after: "
             f"{load_before:.2f} / {load_after:.2f} CPUs of {os.cpu_count()}; medians of {bench.reps} alternating "
             "runs; controller CPU-s = user + system of the command and the children it waited for.", "",
             "| tool | wall 1 / 8 / 32 hosts, s | controller CPU-s 1 / 8 / 32 | wall per extra host, ms | "
             "controller CPU per extra host, ms |", "|---|---|---|---|---|"]
    for name, _ in tools:
        by_n = table[name]
        walls = " / ".join(f"{by_n[n].median:.2f}" for n in SIZES)
        cpus = " / ".join(f"{statistics.median(by_n[n].cpu_s):.2f}" for n in SIZES)
        lines.append(f"| {name} | {walls} | {cpus} | {1000 * _marginal(by_n, 'seconds'):.0f} | "
                     f"{1000 * _marginal(by_n, 'cpu_s'):.1f} |")
    bench.peers_table = "\n".join(lines)
    bench.series += [s for by_n in table.values() for s in by_n.values()]
