"""The public Python API: its docstring examples run against the loopback sshd, as written."""

from __future__ import annotations

import doctest
from pathlib import Path
from typing import Any

import pytest
import yaml

import introspect
from introspect import api
from introspect.errors import HostUnreachable, ModelPathError
from tests.sshd_server import ClientKeys, SSHServer, free_port

pytestmark = pytest.mark.ssh


@pytest.fixture(scope="module")
def globs(sshd: SSHServer, client_keys: ClientKeys, kimi_model: Path, venv_full: Path,
          tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    inventory = tmp_path_factory.mktemp("api") / "hosts.yaml"
    inventory.write_text(yaml.safe_dump({
        "defaults": {"identity": str(client_keys.key), "known_hosts": str(client_keys.known_hosts)},
        "hosts": {"gpu-1": {"address": sshd.address, "port": sshd.port, "venvs": [{"path": str(venv_full)}]}},
    }))
    return {"MODEL": str(kimi_model), "HOST": sshd.address, "PORT": sshd.port, "KEY": str(client_keys.key),
            "KNOWN_HOSTS": str(client_keys.known_hosts), "VENV": str(venv_full), "INVENTORY": str(inventory)}


def _examples() -> list[doctest.DocTest]:
    tests = [t for t in doctest.DocTestFinder().find(api) if t.examples]
    assert {t.name.rsplit(".", 1)[-1] for t in tests} == {"probe", "preflight", "health"}
    return tests


@pytest.mark.parametrize("name", ["probe", "preflight", "health"])
def test_docstring_examples_run_as_written(name: str, globs: dict[str, Any]) -> None:
    (test,) = [t for t in _examples() if t.name.endswith("." + name)]
    test.globs = dict(globs)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test, out=lambda text: pytest.fail(text, pytrace=False))
    assert runner.tries == len(test.examples) and runner.failures == 0


def test_the_package_exports_the_api_lazily() -> None:
    assert introspect.probe is api.probe and introspect.health is api.health
    assert introspect.preflight is api.preflight and introspect.SSH is api.SSH
    with pytest.raises(AttributeError):
        introspect.nothing_here  # noqa: B018 - the attribute access is the test


def test_failures_raise_the_cli_errors(tmp_path: Path, client_keys: ClientKeys) -> None:
    with pytest.raises(ModelPathError) as missing:
        api.probe(str(tmp_path / "no-such-model"), cache=False)
    assert missing.value.exit_code == 2 and "config.json" in (missing.value.hint or "")
    port = free_port("127.0.0.2")
    with pytest.raises(HostUnreachable) as down:
        api.probe("/m", host="127.0.0.2", ssh=api.SSH(port=port, identity=str(client_keys.key),
                                                      known_hosts=str(client_keys.known_hosts),
                                                      ssh_config="/dev/null"))
    assert down.value.exit_code == 3
