"""Throwaway OpenSSH servers on loopback for tests, the demo and the benchmark.

Each server is a real ``/usr/sbin/sshd`` with its own generated host key,
config, PidFile and authorized client key, listening on an unprivileged port
of a 127.0.0.x address. Only loopback addresses are accepted.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def _require_loopback(address: str) -> None:
    if not address.startswith("127."):
        raise ValueError(f"test sshd only listens on 127.0.0.0/8, not {address}")


def free_port(address: str) -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        return sock.getsockname()[1]


@dataclass
class ClientKeys:
    """A client key pair and the known_hosts file the tests connect with."""

    root: Path
    key: Path = field(init=False)
    known_hosts: Path = field(init=False)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.key = self.root / "id_ed25519"
        self.known_hosts = self.root / "known_hosts"
        if not self.key.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.key)],
                           check=True)
        self.known_hosts.touch()


@dataclass
class SSHServer:
    address: str
    port: int
    root: Path
    host_key: Path
    proc: subprocess.Popen | None = None

    @property
    def known_hosts_line(self) -> str:
        kind, blob = Path(str(self.host_key) + ".pub").read_text().split()[:2]
        return f"[{self.address}]:{self.port} {kind} {blob}\n"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def kill(self) -> None:
        """SIGKILL sshd and every sshd process of its sessions (a host's sshd going away).
        The session's own commands are left alone: they must notice by themselves."""
        if self.proc is None:
            return
        table = subprocess.run(["ps", "-eo", "pid=,ppid=,comm="], capture_output=True, text=True).stdout
        children: dict[int, list[tuple[int, str]]] = {}
        for line in table.splitlines():
            pid, ppid, comm = line.split(None, 2)
            children.setdefault(int(ppid), []).append((int(pid), comm.strip()))
        doomed, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            doomed.append(pid)
            todo.extend(child for child, comm in children.get(pid, []) if comm.startswith("sshd"))
        for pid in doomed:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        self.proc = None


def start_sshd(root: Path, client: ClientKeys, address: str = "127.0.0.1", port: int | None = None,
               extra_config: str = "", authorized: bool = True) -> SSHServer:
    """Start sshd in the foreground of a child process and wait until it accepts connections."""
    _require_loopback(address)
    if not Path(SSHD).exists():
        raise RuntimeError("sshd not found: run scripts/setup (apt-get install openssh-server)")
    root.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation dir
    host_key = root / "ssh_host_ed25519_key"
    if not host_key.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key)], check=True)
    authorized_keys = root / "authorized_keys"
    authorized_keys.write_text(Path(str(client.key) + ".pub").read_text() if authorized else "")
    port = port or free_port(address)
    config = root / "sshd_config"
    config.write_text(f"""\
ListenAddress {address}
Port {port}
HostKey {host_key}
PidFile {root}/sshd.pid
AuthorizedKeysFile {authorized_keys}
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
AllowTcpForwarding yes
MaxSessions 64
MaxStartups 200:30:400
LogLevel ERROR
{extra_config}
""")
    with open(root / "sshd.log", "ab") as log:
        proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=log)
    server = SSHServer(address, port, root, host_key, proc)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited: {(root / 'sshd.log').read_text()[-2000:]}")
        try:
            with socket.create_connection((address, port), timeout=0.5):
                return server
        except OSError:
            time.sleep(0.05)
    server.stop()
    raise RuntimeError(f"sshd on {address}:{port} did not start")


def trust(server: SSHServer, client: ClientKeys) -> None:
    """Record the server's host key in the client's known_hosts."""
    with open(client.known_hosts, "a") as fh:
        fh.write(server.known_hosts_line)
