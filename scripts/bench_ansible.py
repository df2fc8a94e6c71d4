"""``introspect health`` natively vs the same work through the introspect.models collection.

Run through ``scripts/bench_ansible`` (which sets up .venv first). Everything lives in a
temp dir removed at the end: a client key, 32 throwaway OpenSSH servers on
127.0.0.80..127.0.0.111 (loopback only), one venv, and the real ansible-core from the
package registry (the test fixture's venv under ~/.cache/introspect-tests).

Variants, each over all 32 hosts, one venv per host (requires + imports checked):

- ``native``: ``introspect health --hosts hosts.yaml --parallel 32`` (paramiko, one
  connection per host);
- ``ansible``: ``ansible-playbook -f 32`` running ``introspect.models.venv_health``
  (Ansible's default OpenSSH with ControlMaster=auto, ControlPersist=60s), then
  ``introspect health --ansible-tree`` on its results;
- ``ansible+pipelining``: the same with ``ANSIBLE_PIPELINING=1``.

One warm-up run of each (it also opens the ControlPersist masters that later runs
reuse, as repeated Ansible runs do), then ``--reps`` rounds in alternating order;
medians. Controller CPU is user+system of the command and every child it waited for
(``wait4``); ControlPersist masters detach, so their CPU is not in it (it shows in the
machine's busy CPU, printed per run on stderr with the hosts' side and any neighbour's
load). A measurement, not a test: prints a markdown table and exits 0.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fixtures.ansible_venv import ANSIBLE_CORE_VERSION, ansible_venv  # noqa: E402
from tests.fixtures.venvs import make_venv  # noqa: E402
from tests.sshd_server import ClientKeys, SSHServer, start_sshd, trust  # noqa: E402

HOSTS = 32
BASE = 80  # 127.0.0.80 .. 127.0.0.111
PLAYBOOK = """\
- name: introspect venv health
  hosts: all
  gather_facts: false
  tasks:
    - name: venv health
      introspect.models.venv_health:
        venvs: "{{ introspect_venvs }}"
"""


def busy_s() -> float:
    """Busy CPU-seconds of the whole machine so far (/proc/stat, all CPUs)."""
    with open("/proc/stat") as fh:
        fields = [int(v) for v in fh.readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


@dataclass
class Sample:
    wall: float
    cpu: float
    machine: float


@dataclass
class Series:
    name: str
    samples: list[Sample] = field(default_factory=list)

    def median(self, attr: str) -> float:
        return statistics.median(getattr(s, attr) for s in self.samples)


def run(argv: list[str], env: dict[str, str], cwd: Path, ok: tuple[int, ...] = (0, 1)) -> Sample:
    busy, started = busy_s(), time.perf_counter()
    with open(cwd / "last.out", "wb") as out, open(cwd / "last.err", "wb") as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code not in ok:
        lines = (cwd / "last.out").read_text(errors="replace").splitlines()
        tail = "\n".join([line for line in lines if "fatal:" in line or "msg" in line][:5] or lines[-20:])
        tail += "\n" + (cwd / "last.err").read_text(errors="replace")[-1000:]
        raise SystemExit(f"error: {' '.join(argv[:3])} ... exited {code}\n{tail}")
    return Sample(time.perf_counter() - started, usage.ru_utime + usage.ru_stime, busy_s() - busy)


class Bench:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.keys = ClientKeys(tmp / "client")
        self.servers: list[SSHServer] = []
        self.ansible = ansible_venv() / "bin"

    def setup(self) -> None:
        def start(i: int) -> SSHServer:
            # sftp as on a real host: without pipelining Ansible copies each module over it.
            return start_sshd(self.tmp / f"sshd{i}", self.keys, address=f"127.0.0.{BASE + i}",
                              extra_config="Subsystem sftp internal-sftp")

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            self.servers = list(pool.map(start, range(HOSTS)))
        for server in self.servers:
            trust(server, self.keys)
        venv = make_venv(self.tmp / "venv")
        spec = [{"path": str(venv), "requires": ["transformers", "tiktoken", "tokenizers"], "imports": ["json"]}]
        yaml_lines = ["defaults:", f"  identity: {json.dumps(str(self.keys.key))}",
                      f"  known_hosts: {json.dumps(str(self.keys.known_hosts))}", "  connect_timeout: 10",
                      f"  parallel: {HOSTS}", "hosts:"]
        ini = ["[bench]"]
        for i, s in enumerate(self.servers):
            yaml_lines += [f"  bench-{i:02d}:", f"    address: {s.address}", f"    port: {s.port}",
                           f"    venvs: {json.dumps(spec)}"]
            ini.append(f"bench-{i:02d} ansible_host={s.address} ansible_port={s.port}")
        ini += ["[bench:vars]", f"ansible_ssh_private_key_file={self.keys.key}",
                f"ansible_python_interpreter={sys.executable}", f"introspect_venvs={json.dumps(spec)}"]
        (self.tmp / "hosts.yaml").write_text("\n".join(yaml_lines) + "\n")
        (self.tmp / "inventory.ini").write_text("\n".join(ini) + "\n")
        (self.tmp / "play.yml").write_text(PLAYBOOK)
        built = subprocess.run([sys.executable, str(REPO / "integrations/ansible/build.py"), "--output-dir",
                                str(self.tmp / "dist"), "--ansible-galaxy", str(self.ansible / "ansible-galaxy")],
                               capture_output=True, text=True, check=True)
        subprocess.run([str(self.ansible / "ansible-galaxy"), "collection", "install", built.stdout.strip(), "-p",
                        str(self.tmp / "collections")], capture_output=True, check=True, env=self.env(False))

    def env(self, pipelining: bool) -> dict[str, str]:
        return dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", ANSIBLE_HOME=str(self.tmp / "ah"),
                    ANSIBLE_COLLECTIONS_PATH=str(self.tmp / "collections"), ANSIBLE_NOCOLOR="1",
                    ANSIBLE_SSH_CONTROL_PATH_DIR=str(self.tmp / "cp"), ANSIBLE_PIPELINING=str(int(pipelining)),
                    # Ansible's default ssh_args, plus this run's known_hosts.
                    ANSIBLE_SSH_ARGS="-C -o ControlMaster=auto -o ControlPersist=60s "
                                     f"-o UserKnownHostsFile={self.keys.known_hosts} -F /dev/null",
                    ANSIBLE_CALLBACKS_ENABLED="ansible.builtin.tree",
                    ANSIBLE_CALLBACK_TREE_DIR=str(self.tmp / "tree"), ANSIBLE_RETRY_FILES_ENABLED="0")

    def native(self) -> Sample:
        return run([str(REPO / ".venv/bin/introspect"), "health", "--hosts", str(self.tmp / "hosts.yaml"),
                    "--ssh-config", "/dev/null", "--db", str(self.tmp / "native.db"), "--json"],
                   self.env(False), self.tmp)

    def through_ansible(self, pipelining: bool) -> Sample:
        env = self.env(pipelining)
        shutil.rmtree(self.tmp / "tree", ignore_errors=True)  # only this run's results
        play = run([str(self.ansible / "ansible-playbook"), "-f", str(HOSTS), "-i", str(self.tmp / "inventory.ini"),
                    str(self.tmp / "play.yml")], env, self.tmp, ok=(0,))
        report = run([str(REPO / ".venv/bin/introspect"), "health", "--ansible-tree", str(self.tmp / "tree"),
                      "--inventory", str(self.tmp / "inventory.ini"), "--db", str(self.tmp / "tree.db"), "--json"],
                     env, self.tmp)
        summary = json.loads((self.tmp / "last.out").read_text())["summary"]
        if summary["hosts"] != HOSTS or summary["unreachable"]:
            raise SystemExit(f"error: the Ansible run did not reach every host: {summary}")
        return Sample(play.wall + report.wall, play.cpu + report.cpu, play.machine + report.machine)

    def close(self) -> None:
        # ControlPersist masters detach from ansible: stop each one through its own socket.
        for sock in (self.tmp / "cp").glob("*") if (self.tmp / "cp").is_dir() else ():
            subprocess.run(["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "bench"], capture_output=True,
                           check=False, timeout=10)
        for server in self.servers:
            server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="introspect-bench-ansible-") as tmp:
        bench = Bench(Path(tmp))
        try:
            bench.setup()
            variants: list[tuple[Series, Callable[[], Sample]]] = [
                (Series("native (paramiko pool, --parallel 32)"), bench.native),
                (Series("ansible-playbook -f 32 (OpenSSH, ControlPersist)"), lambda: bench.through_ansible(False)),
                (Series("ansible-playbook -f 32, pipelining on"), lambda: bench.through_ansible(True))]
            idle = busy_s()
            time.sleep(1.0)
            load = busy_s() - idle
            for _, call in variants:
                call()  # warm-up (ControlPersist masters open here)
            for rep in range(args.reps):
                for series, call in (variants if rep % 2 == 0 else variants[::-1]):
                    series.samples.append(call())
                    print(f"# {series.name}: {series.samples[-1]}", file=sys.stderr)
        finally:
            bench.close()
    print(f"{HOSTS} loopback hosts, ansible-core {ANSIBLE_CORE_VERSION}, {os.cpu_count()} CPUs, "
          f"background load {load:.1f} CPUs, medians of {args.reps} runs\n")
    # The machine's busy CPU (stderr, per run) holds the hosts' side and any neighbour's load too,
    # so only the controller's own CPU goes into the table.
    print("| variant | wall s | wall ms/host | controller CPU s | controller CPU ms/host |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for series, _ in variants:
        print(f"| {series.name} | {series.median('wall'):.1f} | {1000 * series.median('wall') / HOSTS:.0f} | "
              f"{series.median('cpu'):.1f} | {1000 * series.median('cpu') / HOSTS:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
