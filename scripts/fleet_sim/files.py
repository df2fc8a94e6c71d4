"""The files a controller needs to reach the simulated fleet: a client key, known_hosts, inventories.

Each virtual host has its own ed25519 host key (as a real fleet does: a controller that checked
every host against one shared key would do less work than it does in production); the client
authenticates with one real ed25519 key, written in OpenSSH's format for paramiko, OpenSSH,
libssh2 and asyncssh alike.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh


@dataclass(frozen=True)
class Endpoint:
    """One virtual host as a client sees it."""

    name: str
    address: str
    port: int
    role: str
    host_key: str  # "ssh-ed25519 AAAA..." (its public half)


def client_key(folder: Path) -> tuple[Path, asyncssh.SSHKey]:
    """The client's key pair in ``folder`` (made once, reused by later runs in the same folder)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "id_ed25519"
    if path.exists():
        return path, asyncssh.read_private_key(str(path))
    key = asyncssh.generate_private_key("ssh-ed25519", comment="fleet-sim-client")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key.export_private_key("openssh"))
    path.with_suffix(".pub").write_bytes(key.export_public_key("openssh"))
    return path, key


def known_hosts_line(endpoint: Endpoint) -> str:
    name = endpoint.address if endpoint.port == 22 else f"[{endpoint.address}]:{endpoint.port}"
    return f"{name} {endpoint.host_key}\n"


def write_known_hosts(path: Path, endpoints: list[Endpoint]) -> None:
    path.write_text("".join(known_hosts_line(e) for e in endpoints))


def write_inventory(path: Path, endpoints: list[Endpoint], *, key: Path, known_hosts: Path,
                    venv: str | None, requires: list[str], parallel: int = 64,
                    connect_timeout: float = 10, probe_timeout: float = 60) -> None:
    """An introspect inventory (hosts.yaml) of every virtual host, dead and silent ones included:
    the controller must find out for itself which hosts answer."""
    lines = ["defaults:", f"  identity: {json.dumps(str(key))}", f"  known_hosts: {json.dumps(str(known_hosts))}",
             f"  connect_timeout: {connect_timeout:g}", f"  probe_timeout: {probe_timeout:g}",
             f"  parallel: {parallel}", "  remote_code: false", "hosts:"]
    for e in endpoints:
        lines += [f"  {e.name}:", f"    address: {e.address}", f"    port: {e.port}"]
        if venv:
            lines += ["    venvs:", f"      - path: {json.dumps(venv)}",
                      f"        requires: {json.dumps(requires)}"]
    path.write_text("\n".join(lines) + "\n")


def write_ansible_inventory(path: Path, endpoints: list[Endpoint], *, key: Path, python: str) -> None:
    ini = ["[fleet]"] + [f"{e.name} ansible_host={e.address} ansible_port={e.port}" for e in endpoints]
    ini += ["[fleet:vars]", f"ansible_ssh_private_key_file={key}", f"ansible_python_interpreter={python}"]
    path.write_text("\n".join(ini) + "\n")


def write_pyinfra_inventory(path: Path, endpoints: list[Endpoint], *, key: Path, known_hosts: Path) -> None:
    hosts = [(e.name, {"ssh_hostname": e.address, "ssh_port": e.port, "ssh_key": str(key),
                       "ssh_known_hosts_file": str(known_hosts), "ssh_strict_host_key_checking": "yes"})
             for e in endpoints]
    path.write_text(f"fleet = {hosts!r}\n")


def manifest(endpoints: list[Endpoint], **paths: Any) -> dict[str, Any]:
    """The one JSON document the simulator prints when it is ready (and writes to fleet.json)."""
    return {"ready": True, **{k: str(v) for k, v in paths.items()},
            "hosts": [{"name": e.name, "address": e.address, "port": e.port, "role": e.role} for e in endpoints]}
