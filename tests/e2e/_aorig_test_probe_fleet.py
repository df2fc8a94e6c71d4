"""`introspect probe --tags/--only/--all-hosts`: one model, many inventory hosts, bounded pool."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli
from tests.sshd_server import free_port, start_sshd, trust

pytestmark = pytest.mark.ssh


@pytest.fixture()
def fleet(tmp_path, client_keys):
    servers = [start_sshd(tmp_path / f"sshd{i}", client_keys, address=f"127.0.0.{12 + i}") for i in range(3)]
    for server in servers:
        trust(server, client_keys)
    yield servers
    for server in servers:
        server.stop()


def test_probe_over_inventory_hosts(fleet, client_keys, kimi_model, venv_full, tmp_path):
    down_port = free_port("127.0.0.15")
    lines = ["defaults:", f"  identity: {client_keys.key}", f"  known_hosts: {client_keys.known_hosts}",
             "  parallel: 2", "hosts:"]
    for i, server in enumerate(fleet):
        lines += [f"  gpu-{i}:", f"    address: {server.address}", f"    port: {server.port}",
                  "    tags: [serving]", "    venvs:", f"      - path: {venv_full}"]
    lines += ["  gone:", "    address: 127.0.0.15", f"    port: {down_port}", "    tags: [serving]"]
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text("\n".join(lines) + "\n")

    # The file facts answer what is asserted (which hosts, their venv, the pool); no witness.
    result = run_cli("probe", "--hosts", str(inventory), "--ssh-config", "/dev/null", "--tags", "serving",
                     "--model", str(kimi_model), "--no-tokenizer", "--json")
    assert result.code == 3, result.stderr  # the worst host decides: one is down
    doc = result.json()
    by_host = {item["host"]: item for item in doc["hosts"]}
    assert list(by_host) == ["gpu-0", "gpu-1", "gpu-2", "gone"]
    for name in ("gpu-0", "gpu-1", "gpu-2"):
        assert by_host[name]["exit_code"] == 0
        assert by_host[name]["profile"]["architecture"]["num_layers"] == 61
        assert by_host[name]["profile"]["target"]["venv"] == str(venv_full)  # the entry's venv
    assert by_host["gone"]["profile"] is None and "refused" in by_host["gone"]["error"]["message"]
    assert doc["fleet"]["max_open_connections"] <= 2
    assert "error: gone:" in result.stderr and "Traceback" not in result.stderr

    only = run_cli("probe", "--hosts", str(inventory), "--ssh-config", "/dev/null", "--only", "gpu-1",
                   "--model", str(kimi_model), "--no-tokenizer", "--json")
    assert only.code == 0 and [h["host"] for h in only.json()["hosts"]] == ["gpu-1"]

    unknown = run_cli("probe", "--hosts", str(inventory), "--only", "nope", "--model", str(kimi_model))
    assert unknown.code == 2 and "nope" in unknown.stderr
