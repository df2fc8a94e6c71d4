"""~/.ssh/config aliases and ProxyJump (through a second loopback sshd as the bastion)."""

from __future__ import annotations

import pytest

from tests.conftest import assert_clean_error, run_cli
from tests.sshd_server import start_sshd, trust

pytestmark = pytest.mark.ssh


@pytest.fixture()
def bastion(tmp_path, client_keys):
    server = start_sshd(tmp_path / "bastion", client_keys, address="127.0.0.16")
    yield server
    server.stop()


def _config(tmp_path, sshd, bastion, client_keys, jump: bool):
    lines = ["Host gpu-box", f"    HostName {sshd.address}", f"    Port {sshd.port}",
             f"    IdentityFile {client_keys.key}"]
    if jump:
        lines.append(f"    ProxyJump {bastion.address}:{bastion.port}")
    lines += [f"Host {bastion.address}", f"    IdentityFile {client_keys.key}"]
    path = tmp_path / "ssh_config"
    path.write_text("\n".join(lines) + "\n")
    return path


# What these tests assert is the connection (aliases, jumps, host keys): the probes read the file
# facts only, without the tokenizer load and the model-code witness.


def test_alias_from_ssh_config(sshd, bastion, client_keys, kimi_model, venv_full, tmp_path):
    config = _config(tmp_path, sshd, bastion, client_keys, jump=False)
    result = run_cli("probe", "--host", "gpu-box", "--ssh-config", str(config), "--known-hosts",
                     str(client_keys.known_hosts), "--model", str(kimi_model), "--venv", str(venv_full),
                     "--json", "--no-tokenizer")
    assert result.code == 0, result.stderr
    assert result.json()["target"]["host"] == "gpu-box"


def test_proxyjump_checks_both_host_keys(sshd, bastion, client_keys, kimi_model, venv_full, tmp_path):
    config = _config(tmp_path, sshd, bastion, client_keys, jump=True)
    args = ["probe", "--host", "gpu-box", "--ssh-config", str(config), "--known-hosts",
            str(client_keys.known_hosts), "--model", str(kimi_model), "--venv", str(venv_full), "--json",
            "--no-tokenizer"]
    # The bastion's key is not trusted yet: the jump hop is refused like any other host.
    refused = run_cli(*args)
    assert_clean_error(refused, 3, "unknown host key", bastion.address)
    trust(bastion, client_keys)
    result = run_cli(*args)
    assert result.code == 0, result.stderr
    assert result.json()["architecture"]["num_layers"] == 61


def test_jump_flag(sshd, bastion, client_keys, kimi_model, venv_full):
    trust(bastion, client_keys)
    result = run_cli("probe", "--host", sshd.address, "--port", str(sshd.port), "--identity", str(client_keys.key),
                     "--jump", f"{bastion.address}:{bastion.port}", "--known-hosts", str(client_keys.known_hosts),
                     "--ssh-config", "/dev/null", "--model", str(kimi_model), "--venv", str(venv_full), "--json",
                     "--no-tokenizer")
    assert result.code == 0, result.stderr
    stopped = run_cli("probe", "--host", sshd.address, "--port", str(sshd.port), "--identity", str(client_keys.key),
                      "--jump", f"{bastion.address}:1", "--known-hosts", str(client_keys.known_hosts),
                      "--ssh-config", "/dev/null", "--model", str(kimi_model), "--no-tokenizer")
    assert_clean_error(stopped, 3, "refused")  # the jump host's port is closed: no silent direct fallback
