"""``introspect gpus``: nvidia-smi facts across hosts without a model, over the real sshd on 127.0.0.2.

Each inventory host is the same sshd with another interpreter: a wrapper that runs this
Python with PATH set to a directory holding a fake nvidia-smi (8 x H200, the outputs of
tests/engines/nvidia_smi_outputs.py), a broken one, or none. A fourth host listens nowhere.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.conftest import assert_clean_error, run_cli, ssh_flags
from tests.engines import nvidia_smi_outputs as smi
from tests.engines.test_gpu_facts import _fake_nvidia_smi
from tests.sshd_server import ClientKeys, SSHServer, free_port

pytestmark = pytest.mark.ssh

BROKEN = "#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\" >&2\nexit 9\n"


def _python_with_path(path: Path, bin_dir: Path) -> Path:
    """An interpreter that sees only ``bin_dir`` on PATH (what decides whether nvidia-smi is there)."""
    path.write_text(f"#!/bin/sh\nPATH={shlex.quote(str(bin_dir))} exec {shlex.quote(sys.executable)} \"$@\"\n")
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, sshd: SSHServer, client_keys: ClientKeys) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("gpus")
    gpu_bin, broken_bin, empty_bin = base / "gpu-bin", base / "broken-bin", base / "empty-bin"
    for folder in (gpu_bin, broken_bin, empty_bin):
        folder.mkdir()
    _fake_nvidia_smi(gpu_bin, smi.H200_CSV, smi.HEADER_560, smi.H100_TOPO)
    (broken_bin / "nvidia-smi").write_text(BROKEN)
    (broken_bin / "nvidia-smi").chmod(0o755)
    pythons = {name: _python_with_path(base / f"python-{name}", folder)
               for name, folder in (("gpu", gpu_bin), ("broken", broken_bin), ("none", empty_bin))}
    inventory = base / "hosts.yaml"
    entry = f"    address: {sshd.address}\n    port: {sshd.port}\n"
    inventory.write_text(
        f"defaults:\n  identity: {client_keys.key}\n  known_hosts: {client_keys.known_hosts}\n"
        f"hosts:\n"
        f"  h200:\n{entry}    python: {pythons['gpu']}\n    tags: [gpu]\n"
        f"  cpu-only:\n{entry}    python: {pythons['none']}\n"
        f"  bad-driver:\n{entry}    python: {pythons['broken']}\n    tags: [gpu]\n"
        f"  down:\n    address: 127.0.0.4\n    port: {free_port('127.0.0.4')}\n")
    return {"base": base, "inventory": inventory, **pythons}


def test_every_inventory_host_as_json_with_one_down(fleet: dict[str, Path]) -> None:
    result = run_cli("gpus", "--hosts", str(fleet["inventory"]), "--ssh-config", "/dev/null",
                     "--connect-timeout", "3", "--json")
    assert result.code == 3, (result.stdout, result.stderr)  # one unreachable host: the run is 3
    document = result.json()
    assert document["schema"] == "introspect.gpus/v1"
    hosts = {h["host"]: h for h in document["hosts"]}
    assert list(hosts) == ["h200", "cpu-only", "bad-driver", "down"]  # inventory order
    h200 = hosts["h200"]["gpus"]
    assert h200["available"] and h200["count"] == 8
    assert {d["name"] for d in h200["devices"]} == {"NVIDIA H200"}
    assert h200["devices"][0]["memory_total_mib"] == 143771 and h200["devices"][0]["memory_used_mib"] == 1
    assert (h200["driver_version"], h200["cuda_version"]) == ("560.35.03", "12.6")
    assert hosts["cpu-only"]["ok"] and hosts["cpu-only"]["gpus"] == {"available": False,
                                                                   "reason": "nvidia-smi is not on PATH"}
    assert hosts["bad-driver"]["gpus"]["error"]["type"] == "nvidia-smi-failed"
    down = hosts["down"]
    assert not down["ok"] and down["gpus"] is None and down["error"]["exit_code"] == 3
    assert any(line.startswith("error: down: ") for line in result.stderr.splitlines()), result.stderr
    assert "Traceback" not in result.stderr


def test_table_rows_no_gpu_and_a_pasteable_fix(fleet: dict[str, Path], sshd: SSHServer) -> None:
    result = run_cli("gpus", "--hosts", str(fleet["inventory"]), "--only", "h200,cpu-only,bad-driver",
                     "--ssh-config", "/dev/null", "--wide")
    assert result.code == 0, (result.stdout, result.stderr)  # a broken nvidia-smi is a warning
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[1:] if line.strip()}
    h200 = rows["h200"].split()
    assert h200[1] == "8" and "NVIDIA H200" in rows["h200"]
    assert "140.4 GiB" in rows["h200"] and "8.0 MiB / 1.1 TiB" in rows["h200"]  # 143771 MiB each, 1 MiB used on each of 8
    assert "560.35.03" in h200 and "12.6" in h200
    assert "no GPU" in rows["cpu-only"] and "nvidia-smi is not on PATH" in rows["cpu-only"]
    lines = result.stderr.splitlines()
    warning = next(i for i, line in enumerate(lines) if line.startswith("warning: bad-driver: nvidia-smi failed"))
    fix = lines[warning + 1]
    # The command runs on that host, through its transport: pasted here it asks the right machine.
    assert fix.startswith(f"fix: ssh -p {sshd.port} {sshd.address} nvidia-smi"), fix
    shlex.split(fix[len("fix: "):], comments=True)


def test_ad_hoc_hosts_by_tag_and_by_repeated_host(fleet: dict[str, Path], sshd: SSHServer,
                                                  client_keys: ClientKeys) -> None:
    by_tag = run_cli("gpus", "--hosts", str(fleet["inventory"]), "--tags", "gpu", "--ssh-config", "/dev/null",
                     "--json")
    assert [h["host"] for h in by_tag.json()["hosts"]] == ["h200", "bad-driver"], by_tag.stderr
    flags = ssh_flags(sshd, client_keys)
    address = flags[1]
    adhoc = run_cli("gpus", *flags, "--host", f"{address},{address}", "--python", str(fleet["gpu"]), "--json")
    assert adhoc.code == 0, adhoc.stderr
    [host] = adhoc.json()["hosts"]  # the same host named twice is asked once
    assert host["host"] == address and host["gpus"]["count"] == 8


def test_hosts_given_as_a_list_is_a_usage_error_with_the_right_flag() -> None:
    result = run_cli("gpus", "--hosts", "gpu-a1,gpu-a2")
    assert_clean_error(result, 2, "no such inventory file")
    fix = next(line for line in result.stderr.splitlines() if line.startswith("fix: "))
    assert shlex.split(fix[len("fix: "):], comments=True) == ["introspect", "gpus", "--host", "gpu-a1,gpu-a2"]


def test_help_has_examples_and_the_command_is_listed() -> None:
    result = run_cli("gpus", "--help")
    assert result.code == 0 and "Examples:" in result.stdout
    assert "  introspect gpus --host gpu-a1 --host gpu-a2" in result.stdout  # kept verbatim (click's \b)
    assert "gpus" in run_cli("--help").stdout


def test_remote_task_is_shipped_and_stdlib_only(tmp_path: Path) -> None:
    # The same task under a bare interpreter, as a host runs it: no introspect installed.
    from introspect.transport.local import LocalExecutor

    exe = _fake_nvidia_smi(tmp_path, smi.H100_CSV, smi.HEADER_550, smi.H100_TOPO)
    python = _python_with_path(tmp_path / "python", exe.parent)
    with LocalExecutor() as executor:
        reply = executor.run_python(str(python), "gpus", {}, timeout=60)
    facts = json.loads(json.dumps(reply.facts))
    assert facts["count"] == 8 and facts["cuda_version"] == "12.4" and facts["errors"] == []
    assert facts["topology"]["links"]["GPU0"]["GPU1"] == "NV18"
