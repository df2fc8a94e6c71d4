"""The fleet simulator under test: recorded once per session from a real run, served in a thread.

The recordings come from scripts/fleet_sim/record.py driving the real ``introspect`` CLI against a
passthrough host (so the recorder itself is exercised on every run); each test then starts its own
small fleet on 127.1.x addresses (ephemeral ports) and talks to it with the product's own clients.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from introspect.transport.base import Executor
from introspect.transport.registry import create_executor
from introspect.transport.settings import ConnectionSettings
from scripts.fleet_sim.files import Endpoint, write_inventory, write_known_hosts
from scripts.fleet_sim.record import LoopThread, record
from scripts.fleet_sim.recordings import Recordings
from scripts.fleet_sim.server import Simulator
from scripts.fleet_sim.spec import FleetSpec

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> Recordings:
    reuse = os.environ.get("INTROSPECT_FLEET_SIM_RECORDINGS")
    if reuse:  # a recordings file made before (a faster rerun while developing; the test run records anew)
        return Recordings.load(Path(reuse))
    path = tmp_path_factory.mktemp("fleet-sim-recordings") / "recordings.json"
    record(path, light=True)  # the model dir holds config.json only: the recording, not the probe, is tested
    return Recordings.load(path)


@dataclass
class Fleet:
    sim: Simulator
    endpoints: list[Endpoint]
    known_hosts: Path
    loop: LoopThread

    def executor(self, index: int = 0, **settings: object) -> Executor:
        e = self.endpoints[index]
        base: dict[str, object] = {"banner_timeout": 5.0, "connect_timeout": 5.0, "known_hosts": str(self.known_hosts),
                                   "identity": str(self.sim.key_path)}
        base.update(settings)
        return create_executor(ConnectionSettings(scheme="ssh", host=e.address, port=e.port, ssh_config="/dev/null",
                                                  **base))  # type: ignore[arg-type]

    def inventory(self, path: Path, recordings: Recordings, endpoints: list[Endpoint] | None = None) -> Path:
        """A hosts.yaml of the fleet (or of ``endpoints`` on it), each venv checked as the recordings were."""
        hosts = self.endpoints if endpoints is None else endpoints
        write_inventory(path, hosts, key=self.sim.key_path, known_hosts=self.known_hosts,
                        venv=recordings.meta["venv"], requires=recordings.meta["requires"], parallel=len(hosts))
        return path

    def by_role(self, role: str) -> list[int]:
        return [i for i, e in enumerate(self.endpoints) if e.role == role]


def run_module(argv: list[str], folder: Path, timeout: float) -> subprocess.CompletedProcess[bytes]:
    """``python -m *argv`` from this checkout, in ``folder``, as a user runs it: offline, no user
    config, no ssh-agent."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO), INTROSPECT_CONFIG=str(folder / "none"))
    env.pop("SSH_AUTH_SOCK", None)
    return subprocess.run([sys.executable, "-m", *argv], capture_output=True, env=env, cwd=folder, timeout=timeout,
                          check=False)


@contextlib.contextmanager
def fleet(spec: FleetSpec, recordings: Recordings, folder: Path) -> Iterator[Fleet]:
    """``spec``'s fleet listening until the block ends (its files in ``folder``)."""
    sim = Simulator(spec, recordings, folder)
    loop = LoopThread()
    try:
        endpoints = loop.call(sim.start())
        known = folder / "known_hosts"
        write_known_hosts(known, endpoints)
        yield Fleet(sim, endpoints, known, loop)
    finally:
        loop.call(sim.close())
        loop.stop()
