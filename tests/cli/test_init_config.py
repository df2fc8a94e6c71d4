"""``introspect init`` and the user config's keys: the files init writes load with the real
readers, nothing is overwritten without --force, the remote-code policy decides in the
documented order (and a real probe reports which key decided), and a bad config is exit 2
with the file, the key and an editor command."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from introspect.cli.connect import ConnectionFlags, _known_hosts_file, host_spec
from introspect.cli.main import main
from introspect.inventory import load_inventory_file
from introspect.transport.base import Target
from introspect.userconfig import (
    Chosen,
    _load,
    choose_remote_code,
    config_parallel,
    config_venv,
    user_config,
)
from tests.conftest import assert_clean_error, run_cli

SSH_CONFIG = """\
Host *
  ServerAliveInterval 30
Host gpu1 gpu2 !gpu3
  User root
Host bad;name
  HostName 10.0.0.9
Host bastion
  HostName 10.0.0.1
  Port 2200
"""


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return code, out, err


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home with an ~/.ssh/config, and the user config where the fresh user has none yet."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(SSH_CONFIG)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("INTROSPECT_CONFIG", str(home / "cfg" / "introspect" / "config.yaml"))
    return home


def test_init_from_the_users_ssh_config_writes_files_the_real_readers_load(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "init")
    assert code == 0, err
    config, inventory = home / "cfg" / "introspect" / "config.yaml", home / "cfg" / "introspect" / "hosts.yaml"
    for path in (config, inventory):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE(config.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "cfg").stat().st_mode) == 0o700  # every directory init made
    # Concrete names only (no `*`, no `!gpu3`); the alias alone, ~/.ssh/config keeps its settings.
    loaded = load_inventory_file(str(inventory))
    assert {(h.name, h.address, h.user, h.port) for h in loaded.hosts} == {
        ("bastion", "bastion", None, None), ("gpu1", "gpu1", None, None), ("gpu2", "gpu2", None, None)}
    settings = user_config()
    assert settings.path == config and settings.hosts == str(inventory)
    assert (settings.remote_code, settings.transport, settings.parallel) == (False, "ssh", 8)
    assert "skipped host 'bad;name'" in err and "contains ';'" in err
    assert f"wrote {inventory} (3 hosts from ~/.ssh/config)" in " ".join(out.split())  # folded to the width
    assert "introspect probe --host bastion --model /path/to/model" in out
    # The config explains each key, and `env` says where each setting came from.
    text = config.read_text()
    for key in ("hosts:", "remote_code:", "transport:", "parallel:", "# known_hosts:", "# venv:"):
        line = next(i for i, line in enumerate(text.splitlines()) if line.startswith(key))
        assert text.splitlines()[line - 1].startswith("#"), key
    code, out, _ = _run(capsys, "env", "--json")
    shown = json.loads(out)["settings"]
    assert shown["remote_code"] == {"value": False, "source": "config", "where": f"{config}: remote_code.default"}
    assert shown["inventory"]["value"] == str(inventory) and shown["parallel"]["source"] == "config"


def test_init_never_overwrites_without_force(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = home / "cfg" / "introspect" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("remote_code: true\n")
    config.chmod(0o644)
    code, out, err = _run(capsys, "init")
    assert code == 2 and "already exists" in err and "nothing was written" in err, err
    assert "fix: introspect init --force" in err
    assert config.read_text() == "remote_code: true\n" and not (config.parent / "hosts.yaml").exists()
    code, out, err = _run(capsys, "init", "--force")
    assert code == 0, err
    assert "default: false" in config.read_text() and stat.S_IMODE(config.stat().st_mode) == 0o600


def test_print_writes_nothing(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "init", "--print")
    assert code == 0, err
    assert not (home / "cfg").exists()
    assert "# ==> " in out and "hosts:\n  bastion: {}\n" in out and "  default: false" in out


def test_without_an_ssh_config_init_writes_the_config_alone(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (home / ".ssh" / "config").unlink()
    code, out, err = _run(capsys, "init")
    assert code == 0, err
    written = sorted(p.name for p in (home / "cfg" / "introspect").iterdir())
    assert written == ["config.yaml"] and "no host names in ~/.ssh/config" in err
    assert user_config().hosts is None and user_config().remote_code is False
    assert "introspect health" not in out  # no inventory to check yet


def test_init_from_a_named_ssh_config_writes_each_hosts_settings(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ssh_config = tmp_path / "fleet_ssh_config"
    ssh_config.write_text("Host gpu9\n  HostName 10.9.9.9\n  User ubuntu\n  Port 2201\n"
                          "  IdentityFile /keys/fleet\n  ProxyJump bastion.example.com\n"
                          "Host spaced\n  HostName \"a b\"\n")
    out_dir = tmp_path / "out"
    code, out, err = _run(capsys, "init", "--ssh-config", str(ssh_config), "--config", str(out_dir / "c.yaml"),
                          "--inventory", str(out_dir / "fleet.yaml"))
    assert code == 0, err
    (host,) = load_inventory_file(str(out_dir / "fleet.yaml")).hosts
    assert (host.name, host.address, host.user, host.port, host.identity, host.jump) == (
        "gpu9", "10.9.9.9", "ubuntu", 2201, "/keys/fleet", "bastion.example.com")
    assert "skipped host 'spaced'" in err and "its address 'a b'" in err
    assert _load(str(out_dir / "c.yaml")).hosts == str(out_dir / "fleet.yaml")


def test_init_from_an_ansible_ini_inventory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ini = tmp_path / "inventory.ini"
    ini.write_text("[gpu]\ngpu-a1 ansible_host=10.1.2.3 ansible_user=root ansible_port=2222\n"
                   "gpu-a2 ansible_host=10.1.2.4 introspect_remote_code=False\n\n"
                   "[gpu:vars]\nansible_python_interpreter=/usr/bin/python3\n")
    out_dir = tmp_path / "out"
    code, out, err = _run(capsys, "init", "--from-ansible", str(ini), "--config", str(out_dir / "config.yaml"))
    assert code == 0, err
    original, written = load_inventory_file(str(ini)), load_inventory_file(str(out_dir / "hosts.yaml"))

    def facts(inventory):  # type: ignore[no-untyped-def]
        return [(h.name, h.address, h.port, h.user, h.python, h.tags, h.remote_code) for h in inventory.hosts]

    assert facts(written) == facts(original)
    assert facts(written)[1][-1] is False and facts(written)[0][:4] == ("gpu-a1", "10.1.2.3", 2222, "root")
    assert f"2 hosts from {ini}" in " ".join(out.split())


def _config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    monkeypatch.setenv("INTROSPECT_CONFIG", str(path))
    return path


POLICY = """\
remote_code:
  default: false
  models: {"/m/Kimi-*": true, "*/untrusted/*": false}
  hosts: {"gpu-*": true, "gpu-bad": false}
"""


@pytest.mark.parametrize(("hosts", "model", "allowed", "key"), [
    (("x",), "/m/Kimi-1", True, 'remote_code.models["/m/Kimi-*"]'),
    (("x",), "/m/Kimi-1/untrusted/z", False, 'remote_code.models["*/untrusted/*"]'),  # a refusal wins
    (("GPU-1.example",), "/other", True, 'remote_code.hosts["gpu-*"]'),  # host names: any case
    (("gpu-bad",), "/other", False, 'remote_code.hosts["gpu-bad"]'),
    (("gpu-bad",), "/m/Kimi-1", True, 'remote_code.models["/m/Kimi-*"]'),  # models before hosts
    (("x", "gpu-2"), "/other", True, 'remote_code.hosts["gpu-*"]'),  # the name or the address
    (("x",), "/other", False, "remote_code.default"),
])
def test_remote_code_patterns_decide_in_the_documented_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hosts: tuple[str, ...], model: str, allowed: bool,
        key: str) -> None:
    path = _config(tmp_path, monkeypatch, POLICY)
    assert choose_remote_code(False, hosts=hosts, model=model) == Chosen(allowed, "config", f"{path}: {key}")
    # The flag and the inventory still come first.
    assert choose_remote_code(True, hosts=hosts, model=model) == Chosen(False, "flag", "--no-remote-code")
    said = Chosen(True, "inventory", "hosts.yaml: x")
    assert choose_remote_code(False, said, hosts=hosts, model=model) is said


def test_a_plain_bool_and_no_config_keep_working(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _config(tmp_path, monkeypatch, "remote_code: false\n")
    assert choose_remote_code(False, model="/m") == Chosen(False, "config", f"{path}: remote_code")
    monkeypatch.setenv("INTROSPECT_CONFIG", str(tmp_path / "absent.yaml"))
    assert choose_remote_code(False, model="/m").source == "default"


def test_a_real_probe_reports_the_model_pattern_that_allowed_its_code(tmp_path: Path) -> None:
    model = tmp_path / "models" / "Kimi-tiny"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps({"model_type": "llama"}))
    config = tmp_path / "config.yaml"
    pattern = f"{tmp_path}/models/Kimi-*"
    config.write_text(f'remote_code:\n  default: false\n  models: {{"{pattern}": true}}\n')
    result = run_cli("probe", "--model", str(model), "--no-tokenizer", "--no-model-code", "--no-cache", "--json",
                     env={"INTROSPECT_CONFIG": str(config)})
    assert result.code == 0, result.stderr
    assert result.json()["settings"]["remote_code"] == {
        "value": True, "source": "config", "where": f'{config}: remote_code.models["{pattern}"]'}


def test_the_other_keys_reach_the_places_that_use_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _config(tmp_path, monkeypatch, "transport: openssh\nknown_hosts: kh\nparallel: 3\nvenv: /opt/venvs/serve/\n")
    flags = ConnectionFlags(host="gpu1", port=None, user=None, identity=None, jump=None, known_hosts=None,
                            accept_new=False, ssh_config=None, connect_timeout=None, hosts_file=None)
    spec = host_spec(flags, None)
    assert spec is not None and spec.scheme == "openssh"  # a bare name: the config's transport
    from dataclasses import replace

    assert getattr(host_spec(replace(flags, transport="ssh"), None), "scheme", None) == "ssh"  # the flag wins
    assert getattr(host_spec(replace(flags, host="ssh://gpu1"), None), "scheme", None) == "ssh"  # a URL says
    assert _known_hosts_file(flags, None) == str(path.parent / "kh")  # relative to the config file
    assert _known_hosts_file(replace(flags, known_hosts="/flag/kh"), None) == "/flag/kh"
    assert config_venv(Target("ssh", "gpu1")) == "/opt/venvs/serve"
    assert config_venv(Target("local")) is None  # a local run keeps its own interpreter
    plain, own = tmp_path / "plain.yaml", tmp_path / "own.yaml"
    plain.write_text("hosts:\n  a: {}\n")
    own.write_text("defaults:\n  parallel: 4\nhosts:\n  a: {}\n")
    assert config_parallel(load_inventory_file(str(plain))).defaults.parallel == 3
    assert config_parallel(load_inventory_file(str(own))).defaults.parallel == 4  # the inventory's own wins


@pytest.mark.parametrize(("text", "named"), [
    ("transprt: ssh\n", "transprt"),
    ("transport: telnet\n", "transport: unknown transport 'telnet'"),
    ("parallel: '8'\n", "parallel: must be a whole number"),
    ("venv: venvs/serve\n", "venv: must be an absolute path"),
    ("remote_code: yes please\n", "remote_code: must be true, false or a mapping"),
    ("remote_code:\n  hosts: [gpu-1]\n", "remote_code.hosts: must map patterns"),
    ('remote_code:\n  models: {"/m/*": "yes"}\n', 'remote_code.models["/m/*"]: must be true or false'),
    ("remote_code:\n  defualt: false\n", "remote_code.defualt: unknown key"),
])
def test_a_bad_config_is_exit_2_naming_file_and_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str], text: str, named: str) -> None:
    path = _config(tmp_path, monkeypatch, text)
    code, out, err = _run(capsys, "models", "--all-hosts")
    assert code == 2, err
    error = next(line for line in err.splitlines() if line.startswith("error: "))
    assert f"config file {path}: " in error and named in error, error
    fix = next(line for line in err.splitlines() if line.startswith("fix: "))[len("fix: "):]
    assert fix.startswith(f"${{EDITOR:-vi}} {path}  # ")
    assert subprocess.run(["bash", "-n", "-c", fix], timeout=10).returncode == 0


def test_a_bad_config_through_the_cli_process(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("transport: telnet\n")
    result = run_cli("probe", "--model", str(tmp_path), env={"INTROSPECT_CONFIG": str(config)})
    assert_clean_error(result, 2, f"{config}: transport", "${EDITOR:-vi}")
    assert os.path.exists(config)
