"""``preflight --all-hosts``: each host's checklist under its inventory name, then one line per host
(verdict and counts, or why it was not gated) and "N of M hosts ready"; the JSON carries the same
counts. A job scheduler's operator reads the summary first."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import run_cli
from tests.sshd_server import free_port

pytestmark = pytest.mark.ssh


def _inventory(tmp_path: Path, sshd, client_keys, venv: Path) -> Path:
    hosts = {"gpu-good": {"address": sshd.address, "port": sshd.port, "venvs": [{"path": str(venv)}]},
             "gpu-down": {"address": "127.0.0.19", "port": free_port("127.0.0.19"), "venvs": [{"path": str(venv)}]}}
    path = tmp_path / "hosts.yaml"
    path.write_text(yaml.safe_dump({"defaults": {"identity": str(client_keys.key),
                                                 "known_hosts": str(client_keys.known_hosts)},
                                    "hosts": hosts}))
    return path


def test_fleet_preflight_ends_with_a_per_host_summary(sshd, client_keys, kimi_model, venv_full, tmp_path):
    inventory = _inventory(tmp_path, sshd, client_keys, venv_full)
    args = ["preflight", "--all-hosts", "--hosts", str(inventory), "--model", str(kimi_model), "--min-free-gb", "0",
            "--ssh-config", "/dev/null"]
    text = run_cli(*args, env={"COLUMNS": "80"}, timeout=240)
    assert "Traceback" not in text.stderr and text.code == 3, (text.code, text.stderr[-2000:])  # one host is down
    lines = text.stdout.splitlines()
    assert "== gpu-good ==" in lines, text.stdout[-3000:]
    good = next(line for line in lines if "gpu-good" in line and ("READY" in line) and "==" not in line)
    down = next(line for line in lines if "gpu-down" in line)
    assert "NOT CHECKED" in down and "refused" in down, down
    ready = "NOT READY" not in good
    # The summary ends the report; only the fleet's one To fix: block (every host's fixes) follows it.
    report = [line for line in lines[:lines.index("To fix:") if "To fix:" in lines else None] if line]
    assert report[-1] == f"{1 if ready else 0} of 2 hosts ready", lines[-5:]
    document = run_cli(*args, "--json", timeout=240).json()
    assert document["schema"] == "introspect.fleet-preflight/v1"
    assert document["total"] == 2 and document["ready"] == (1 if ready else 0)
    assert sorted(h["host"] for h in document["hosts"]) == ["gpu-down", "gpu-good"]
