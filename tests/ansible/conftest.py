"""Fixtures of the Ansible tests: the real ansible-core (a venv from the registry, see
tests/fixtures/ansible_venv.py), the collection built from this checkout and installed
into a temporary collections path, and two loopback sshd hosts Ansible reaches.

Ansible's own state (ANSIBLE_HOME, local temp, control sockets) lives in pytest's tmp;
ControlMaster is off so no master process outlives a test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.fixtures.ansible_venv import ansible_venv
from tests.fixtures.engine_venv import venv_or_skip
from tests.sshd_server import ClientKeys, SSHServer, start_sshd, trust


@pytest.fixture(scope="session")
def ansible_dir() -> Path:
    return venv_or_skip(ansible_venv, "ansible-core")


@dataclass
class Ansible:
    bin: Path
    home: Path
    collections: Path | None = None

    def env(self, known_hosts: Path | None = None) -> dict[str, str]:
        env = dict(os.environ, ANSIBLE_HOME=str(self.home), ANSIBLE_LOCAL_TEMP=str(self.home / "tmp"),
                   ANSIBLE_NOCOLOR="1", ANSIBLE_PIPELINING="1", ANSIBLE_STDOUT_CALLBACK="default",
                   ANSIBLE_PYTHON_INTERPRETER=sys.executable, ANSIBLE_SSH_CONTROL_PATH_DIR=str(self.home / "cp"),
                   ANSIBLE_RETRY_FILES_ENABLED="0", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        if self.collections is not None:
            env["ANSIBLE_COLLECTIONS_PATH"] = str(self.collections)
        if known_hosts is not None:
            env["ANSIBLE_SSH_ARGS"] = f"-o ControlMaster=no -o UserKnownHostsFile={known_hosts} -F /dev/null"
        return env

    def run(self, tool: str, *args: str, known_hosts: Path | None = None, timeout: float = 180,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.bin / tool), *args], capture_output=True, text=True, timeout=timeout,
                              env=self.env(known_hosts), cwd=cwd, check=False)


@pytest.fixture(scope="session")
def ansible(ansible_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Ansible:
    return Ansible(ansible_dir / "bin", tmp_path_factory.mktemp("ansible-home"))


@pytest.fixture(scope="session")
def collection(ansible: Ansible, tmp_path_factory: pytest.TempPathFactory) -> Ansible:
    """The collection built by integrations/ansible/build.py and installed with ansible-galaxy."""
    out = tmp_path_factory.mktemp("collection")
    built = subprocess.run([sys.executable, str(REPO / "integrations" / "ansible" / "build.py"), "--output-dir",
                            str(out / "dist"), "--ansible-galaxy", str(ansible.bin / "ansible-galaxy")],
                           capture_output=True, text=True, timeout=120, check=False)
    assert built.returncode == 0, built.stderr
    tarball = Path(built.stdout.strip())
    assert tarball.is_file() and tarball.name.startswith("introspect-models-")
    installed = ansible.run("ansible-galaxy", "collection", "install", str(tarball), "-p", str(out / "cp"))
    assert installed.returncode == 0, installed.stderr
    return Ansible(ansible.bin, ansible.home, out / "cp")


@dataclass
class Hosts:
    servers: list[SSHServer]
    keys: ClientKeys


@pytest.fixture(scope="session")
def ansible_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hosts]:
    keys = ClientKeys(tmp_path_factory.mktemp("ansible-client"))
    servers = [start_sshd(tmp_path_factory.mktemp(f"ansible-sshd{i}"), keys, address=f"127.0.0.{31 + i}")
               for i in range(2)]
    for server in servers:
        trust(server, keys)
    yield Hosts(servers, keys)
    for server in servers:
        server.stop()
