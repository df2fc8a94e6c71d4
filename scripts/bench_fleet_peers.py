"""The peers' version job on the simulated fleet (``scripts/bench --fleet --peers``).

The same one-liner scripts/bench_peers.py runs on real sshd (``python -c 'import sys;
print(sys.version)'``), here on every host of the simulated fleet, dead and silent ones included:

- Ansible ad hoc ``-m raw`` with ``-f 50`` and ``-f 200`` (OpenSSH, one ssh process per host,
  ControlMaster off as in bench_peers.py, host keys checked against the fleet's known_hosts);
- pyinfra ``exec`` (paramiko under gevent), ``--parallel`` as introspect's;
- parallel-ssh's ``ParallelSSHClient`` (libssh2), pool as introspect's parallel, 10 s timeout.

Installed once per machine by bench_peers.peers_venv() (pinned, from the package registry).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path

import bench_peers
from bench_fleet_measure import Measured, SimProc, measure

ANSIBLE_FORKS = (50, 200)

PSSH = """\
import json, sys
from pssh.clients import ParallelSSHClient
from pssh.config import HostConfig
spec = json.loads(open(sys.argv[1]).read())
hosts = [h["address"] for h in spec["hosts"]]
config = [HostConfig(port=h["port"], private_key=spec["key"]) for h in spec["hosts"]]
client = ParallelSSHClient(hosts, host_config=config, pool_size=spec["pool"], timeout=10, num_retries=1)
output = client.run_command(spec["command"], stop_on_errors=False)
client.join(output, timeout=120)
answered = sum(1 for o in output if o.exception is None and o.exit_code == 0 and list(o.stdout or []))
print(json.dumps({"hosts": len(output), "answered": answered}))
"""


def _answered_lines(stdout: bytes, version: bytes) -> int:
    return sum(1 for line in stdout.splitlines() if line.startswith(version))


def _pssh_answered(out: bytes) -> int:
    lines = [line for line in out.splitlines() if line.startswith(b'{"hosts"')]
    return int(json.loads(lines[-1])["answered"]) if lines else 0


def peer_jobs(sim: SimProc, venv: Path, tmp: Path, parallel: int) -> list[tuple[str, Callable[[], list[str]],
                                                                             dict[str, str], Callable[[bytes], int]]]:
    """(label, argv maker, extra env, answered-hosts counter) for every peer."""
    m = sim.manifest
    command = f"{m['python']} -c {shlex.quote(bench_peers.JOB)}"
    version = b"3."  # every answer is a Python 3 version line
    spec = tmp / "pssh.json"
    spec.write_text(json.dumps({"key": m["key"], "command": command, "pool": parallel,
                                "hosts": [{"address": h["address"], "port": h["port"]}
                                          for h in json.loads(Path(m["dir"], "fleet.json").read_text())["hosts"]]}))
    (tmp / "pssh_job.py").write_text(PSSH)
    ansible_env = {"ANSIBLE_HOME": str(tmp / "ah"), "ANSIBLE_NOCOLOR": "1", "ANSIBLE_HOST_KEY_CHECKING": "1",
                   "ANSIBLE_RETRY_FILES_ENABLED": "0", "ANSIBLE_TIMEOUT": "10",
                   "ANSIBLE_SSH_ARGS": f"-o ControlMaster=no -o UserKnownHostsFile={m['known_hosts']} -F /dev/null"}
    bin_ = venv / "bin"
    jobs: list[tuple[str, Callable[[], list[str]], dict[str, str], Callable[[bytes], int]]] = []
    def ansible(forks: int) -> Callable[[], list[str]]:
        return lambda: [str(bin_ / "ansible"), "fleet", "-i", m["ansible_inventory"], "-f", str(forks), "-m", "raw",
                        "-a", command]

    for forks in ANSIBLE_FORKS:
        jobs.append((f"ansible -m raw -f {forks}", ansible(forks), ansible_env,
                     lambda out: _answered_lines(out, version)))
    jobs.append((f"pyinfra exec --parallel {parallel}",
                 lambda: [str(bin_ / "pyinfra"), "-y", "--parallel", str(parallel), m["pyinfra_inventory"], "exec",
                          "--", command], {}, lambda out: out.count(b"] 3.")))
    jobs.append((f"parallel-ssh (pool {parallel})", lambda: [str(bin_ / "python"), str(tmp / "pssh_job.py"),
                                                             str(spec)], {},
                 _pssh_answered))
    return jobs


def run_peers(sim: SimProc, *, hosts: int, rtt_ms: float, env: dict[str, str], tmp: Path, parallel: int,
              log: Callable[[str], None]) -> list[Measured]:
    """Every peer once on the running fleet; [] (with a log line) when the peers cannot be installed."""
    try:
        venv = bench_peers.peers_venv()
    except (RuntimeError, OSError) as exc:
        log(f"  peers: not run, their venv could not be built: {exc}")
        return []
    out: list[Measured] = []
    for label, argv, extra, answered in peer_jobs(sim, venv, tmp, parallel):
        m = measure(label, argv(), env=dict(env, **extra), cwd=tmp, sim=sim, hosts=hosts, rtt_ms=rtt_ms, tree=True)
        try:
            m.answered_hosts = answered(m.stdout + b"\n" + m.stderr)
        except (ValueError, IndexError) as exc:
            m.notes.append(f"could not count its answers: {exc}")
        log(f"    {label}: {m.wall:.1f} s wall, {m.cpu:.1f} CPU-s, {m.answered_hosts} of {hosts} answered")
        out.append(m)
    return out

