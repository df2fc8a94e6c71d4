"""`introspect health --host` for one ad-hoc host (no inventory), against a real sshd on loopback.

The connection comes from the command line alone (--port, --identity, --known-hosts,
--ssh-config /dev/null): nothing reads ~/.ssh, the repo's hosts.yaml or a user config.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import CLIResult, run_cli
from tests.sshd_server import ClientKeys, SSHServer, free_port, start_sshd, trust

ADDRESS = "127.0.0.2"


@pytest.fixture(scope="module")
def adhoc_client(tmp_path_factory: pytest.TempPathFactory) -> ClientKeys:
    return ClientKeys(tmp_path_factory.mktemp("adhoc-client"))


@pytest.fixture(scope="module")
def adhoc_server(tmp_path_factory: pytest.TempPathFactory, adhoc_client: ClientKeys) -> Iterator[SSHServer]:
    server = start_sshd(tmp_path_factory.mktemp("adhoc-sshd"), adhoc_client, address=ADDRESS)
    trust(server, adhoc_client)
    yield server
    server.stop()


def adhoc_health(client: ClientKeys, port: int, tmp: Path, *args: str) -> CLIResult:
    return run_cli("health", "--host", ADDRESS, "--port", str(port), "--identity", str(client.key),
                   "--known-hosts", str(client.known_hosts), "--ssh-config", "/dev/null",
                   "--db", str(tmp / "history.sqlite3"), "--json", *args, cwd=tmp,
                   unset=("INTROSPECT_HOSTS",))


@pytest.mark.ssh
def test_adhoc_host_gets_reachability_venv_disk_and_gpu_checks(adhoc_server: SSHServer, adhoc_client: ClientKeys,
                                                               venv_full: Path, tmp_path: Path) -> None:
    result = adhoc_health(adhoc_client, adhoc_server.port, tmp_path, "--venv", str(venv_full))
    assert result.code == 0, (result.stdout[-3000:], result.stderr[-3000:])
    (host,) = result.json()["hosts"]
    assert host["name"] == ADDRESS and host["reachable"] is True and host["connections"] == 1
    assert [c["check"] for c in host["checks"]] == ["reachable"]
    (venv,) = host["venvs"]
    assert venv["path"] == str(venv_full)
    checks = {c["check"]: c for c in venv["checks"]}
    assert checks["python"]["status"] == "pass"
    # No min_free_gb for an ad-hoc venv: the free space is reported (info), never judged.
    disk = checks[f"disk:{venv_full}"]
    assert disk["status"] == "info" and disk["evidence"]["free_bytes"] > 0, disk
    assert checks["gpus"]["status"] in ("pass", "info", "warn")


@pytest.mark.ssh
def test_adhoc_host_missing_venv_fails_its_python_check(adhoc_server: SSHServer, adhoc_client: ClientKeys,
                                                        tmp_path: Path) -> None:
    missing = tmp_path / "no-such-venv"
    result = adhoc_health(adhoc_client, adhoc_server.port, tmp_path, "--venv", str(missing))
    assert result.code == 1, (result.stdout[-3000:], result.stderr[-3000:])
    (venv,) = result.json()["hosts"][0]["venvs"]
    assert {c["check"]: c["status"] for c in venv["checks"]}["python"] == "fail"


@pytest.mark.ssh
def test_adhoc_host_wrong_port_is_unreachable_exit_3(adhoc_server: SSHServer, adhoc_client: ClientKeys,
                                                     venv_full: Path, tmp_path: Path) -> None:
    closed = free_port(ADDRESS)  # nothing listens there
    result = adhoc_health(adhoc_client, closed, tmp_path, "--venv", str(venv_full), "--connect-timeout", "3")
    assert result.code == 3, (result.stdout[-3000:], result.stderr[-3000:])
    (host,) = result.json()["hosts"]
    assert host["reachable"] is False
    (reach,) = host["checks"]
    assert reach["check"] == "reachable" and reach["status"] == "fail" and str(closed) in reach["message"] + (
        reach["fix"] or "")


def test_venv_without_host_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli("health", "--venv", "/opt/venv", "--db", str(tmp_path / "h.sqlite3"), cwd=tmp_path)
    assert result.code == 2
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("error: --venv") and lines[1].startswith("fix: introspect health --host")


def test_venv_narrows_an_inventory_entry_and_keeps_its_venv_settings(tmp_path: Path) -> None:
    from introspect.cli.cmd_health import _select
    from introspect.cli.options import HostSelection

    inventory = tmp_path / "hosts.yaml"
    inventory.write_text("hosts:\n  gpu1:\n    address: 127.0.0.3\n    venvs:\n"
                         "      - {path: /opt/a, requires: [tiktoken]}\n      - {path: /opt/b}\n")
    _inv, (entry,) = _select(HostSelection("gpu1", str(inventory)), ["/opt/a", "/opt/c"])
    assert [(v.path, v.requires) for v in entry.venvs] == [("/opt/a", ("tiktoken",)), ("/opt/c", ())]
    assert entry.address == "127.0.0.3"
