"""The CLI over the new transports: ``--host openssh://`` (the loopback sshd, through the system
ssh client) and ``--host podman://`` (a real container, tests/podman_host.py; skipped with
podman's own words where it cannot run). probe, health, preflight and models on each.
"""

from __future__ import annotations

import getpass
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO, CLIResult, assert_clean_error, run_cli
from tests.sshd_server import ClientKeys, SSHServer

pytestmark = pytest.mark.ssh


def _openssh_config(tmp: Path, keys: ClientKeys) -> Path:
    config = tmp / "ssh_config"
    config.write_text(f"Host *\n  IdentityFile {keys.key}\n  IdentitiesOnly yes\n  IdentityAgent none\n"
                      f"  UserKnownHostsFile {keys.known_hosts}\n")
    return config


@pytest.fixture(scope="module")
def openssh(sshd: SSHServer, client_keys: ClientKeys, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The flags of an openssh:// run against the loopback sshd (keys and known_hosts from its ssh_config)."""
    config = _openssh_config(tmp_path_factory.mktemp("openssh"), client_keys)
    return ["--host", f"openssh://{sshd.address}:{sshd.port}", "--ssh-config", str(config),
            "--ssh-option", "ServerAliveInterval=7"]


@pytest.fixture(scope="module")
def in_container(podman_container, shared_dir: Path) -> dict[str, Any]:
    """A model and a venv (of the container's own python3) under the dir the container shares."""
    base = shared_dir / "cli"
    model = base / "models" / "gpt2"
    shutil.copytree(REPO / "tests/data/realconfigs/gpt2", model)
    venv = base / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    return {"host": f"podman://{podman_container.name}", "name": podman_container.name, "model": model,
            "venv": venv, "base": base}


def _ok(result: CLIResult, *codes: int) -> CLIResult:
    assert result.code in (codes or (0,)), (result.code, result.stdout[-3000:], result.stderr[-3000:])
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    return result


# --------------------------------------------------------------------------- probe


def test_probe_over_openssh_gives_the_full_profile(openssh, sshd, kimi_model, venv_full) -> None:
    result = _ok(run_cli("probe", *openssh, "--model", str(kimi_model), "--venv", str(venv_full), "--json"))
    profile = result.json()
    assert profile["target"] == {"scheme": "openssh", "host": sshd.address, "port": sshd.port,
                                 "user": getpass.getuser(), "python": f"{venv_full}/bin/python",
                                 "venv": str(venv_full), "model_path": str(kimi_model)}
    assert profile["architecture"]["model_type"] == "kimi_k25" and profile["architecture"]["num_layers"] == 61
    assert profile["tokenizer"]["loaded"] is True and profile["tokenizer"]["class"] == "TikTokenTokenizer"


def test_transport_flag_sends_a_bare_name_through_openssh(sshd, client_keys, kimi_model, tmp_path) -> None:
    config = _openssh_config(tmp_path, client_keys)
    config.write_text(f"Host gpu-alias\n  HostName {sshd.address}\n  Port {sshd.port}\n" + config.read_text())
    result = _ok(run_cli("probe", "--host", "gpu-alias", "--transport", "openssh", "--ssh-config", str(config),
                         "--model", str(kimi_model), "--no-tokenizer", "--json"), 0, 1)  # 1: findings
    target = result.json()["target"]
    assert (target["scheme"], target["host"], target["port"]) == ("openssh", "gpu-alias", sshd.port)


def test_probe_over_podman_gives_the_full_profile(in_container) -> None:
    result = _ok(run_cli("probe", "--host", in_container["host"], "--model", str(in_container["model"]),
                         "--python", "/usr/bin/python3", "--json"), 0, 1)
    profile = result.json()
    assert profile["target"] == {"scheme": "podman", "host": None, "port": None, "user": None,
                                 "container": in_container["name"], "python": "/usr/bin/python3", "venv": None,
                                 "model_path": str(in_container["model"])}
    assert profile["architecture"]["model_type"] == "gpt2" and profile["architecture"]["num_layers"] == 12
    assert profile["files"]["status"] == "ok"
    # The container has no transformers: the tokenizer facts come from the files, and say why.
    assert profile["tokenizer"]["loaded"] is False


def test_missing_container_is_one_error_and_exit_3(podman_container) -> None:
    result = run_cli("probe", "--host", "podman://introspect-no-such-container", "--model", "/m")
    assert_clean_error(result, 3, "no such container", "podman ps")


def test_bad_url_is_a_usage_error_before_anything_runs() -> None:
    assert_clean_error(run_cli("probe", "--host", "kubectl://Bad_Pod", "--model", "/m"), 2,
                       "not a Kubernetes pod name")


# --------------------------------------------------------------------------- health


def test_health_over_openssh_and_podman_from_inventory_urls(sshd, client_keys, venv_full, in_container,
                                                            tmp_path) -> None:
    config = _openssh_config(tmp_path, client_keys)
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text(yaml.safe_dump({"hosts": {
        "via-openssh": {"url": f"openssh://{sshd.address}:{sshd.port}",
                        "venvs": [{"path": str(venv_full), "requires": ["tiktoken"]}]},
        "in-podman": {"address": in_container["host"], "venvs": [{"path": str(in_container["venv"])}]},
    }}, sort_keys=False))
    result = _ok(run_cli("health", "--hosts", str(inventory), "--db", str(tmp_path / "h.sqlite3"),
                         "--ssh-config", str(config), "--json", cwd=tmp_path), 0, 1)
    hosts = {h["name"]: h for h in result.json()["hosts"]}
    assert hosts["via-openssh"]["reachable"] is True and hosts["in-podman"]["reachable"] is True, hosts
    assert hosts["via-openssh"]["address"] == f"openssh://{sshd.address}:{sshd.port}"
    checks = {c["check"]: c for c in hosts["via-openssh"]["venvs"][0]["checks"]}
    assert checks["package:tiktoken"]["status"] == "pass", checks
    assert hosts["in-podman"]["venvs"][0]["checks"], hosts["in-podman"]


def test_inventory_url_errors_name_file_and_line(tmp_path) -> None:
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text("hosts:\n  ct:\n    url: 'pct://12'\n")
    result = run_cli("probe", "--hosts", str(inventory), "--host", "ct", "--model", "/m", cwd=tmp_path)
    assert_clean_error(result, 2, f"{inventory}:3", "hosts.ct.url", "not a Proxmox VMID")


# --------------------------------------------------------------------------- preflight, models


def test_preflight_over_openssh_and_podman(openssh, kimi_model, venv_full, in_container) -> None:
    over_ssh = _ok(run_cli("preflight", *openssh, "--model", str(kimi_model), "--venv", str(venv_full),
                           "--min-free-gb", "0", "--json"), 0, 1)
    assert over_ssh.json()["target"]["scheme"] == "openssh"
    in_pod = _ok(run_cli("preflight", "--host", in_container["host"], "--model", str(in_container["model"]),
                         "--python", "/usr/bin/python3", "--min-free-gb", "0", "--json"), 0, 1)
    report = in_pod.json()
    assert report["target"]["scheme"] == "podman" and report["target"]["container"] == in_container["name"]
    assert report["checks"], report


def test_models_over_openssh_and_podman(openssh, kimi_model, in_container) -> None:
    over_ssh = _ok(run_cli("models", *openssh, "--roots", str(kimi_model.parent), "--json"))
    [host] = over_ssh.json()["hosts"]
    assert host["ok"] and str(kimi_model) in {m["path"] for m in host["models"]}
    in_pod = _ok(run_cli("models", "--host", in_container["host"], "--roots", str(in_container["model"].parent),
                         "--python", "/usr/bin/python3", "--no-hf-scanner", "--json"))
    [host] = in_pod.json()["hosts"]
    assert host["ok"] and str(in_container["model"]) in {m["path"] for m in host["models"]}


def test_diff_takes_url_operands(openssh, sshd, kimi_model, in_container) -> None:
    a = f"openssh://{sshd.address}:{sshd.port}:{kimi_model}"
    b = f"{in_container['host']}:{in_container['model']}"
    result = _ok(run_cli("diff", a, b, "--ssh-config", openssh[3], "--python", "/usr/bin/python3",
                         "--no-tokenizer", "--json"), 0, 1)
    assert "model_type" in result.stdout


def test_the_report_names_the_container_not_local(in_container) -> None:
    result = _ok(run_cli("probe", "--host", in_container["host"], "--model", str(in_container["model"]),
                         "--python", "/usr/bin/python3", env={"COLUMNS": "400"}), 0, 1)
    assert f"{in_container['host']}:{in_container['model']}" in result.stdout, result.stdout[:3000]
    assert f"local:{in_container['model']}" not in result.stdout
