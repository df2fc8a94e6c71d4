"""Hostile host, user and port names: refused before any lookup, never seen by a shell.

ssh_config's ``Match exec`` runs a shell command with ``%h``/``%n``/``%r`` substituted as
they are, by paramiko (``SSHConfig._tokenize`` then ``invoke.run``:
https://github.com/paramiko/paramiko/blob/main/paramiko/config.py) and by OpenSSH
before 9.6 (https://github.com/openssh/openssh-portable/blob/master/ssh.c, valid_hostname).
Each case here has a real ssh_config with such a line and a control run showing that the
line really runs for a plain name, so that "no marker" means "refused", not "never evaluated".
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from introspect.errors import InputError, UsageError
from introspect.inventory import InventoryError, load_inventory_file
from introspect.transport.hostspec import parse_host
from introspect.transport.names import (
    check_destination,
    check_jump,
    check_port,
    check_user,
    host_problem,
    user_problem,
)
from introspect.transport.ssh_config import Resolver, load_config
from tests.conftest import REPO, CLIResult, assert_clean_error, run_cli
from tests.sshd_server import free_port

# Each would run `touch M...` in the cwd if substituted into `Match exec "test %h = ..."`.
HOSTILE_HOSTS = [
    "x;touch${IFS}M1;#",
    "x$(touch${IFS}M2)",
    "x`touch${IFS}M3`",
    "x|touch${IFS}M4",
    "x&&touch${IFS}M5",
    "x'$(touch${IFS}M6)'",
    'x"$(touch${IFS}M7)"',
    "x>M8",
]
CLOSED = "127.0.0.9"  # where every plain name of these configs goes: a loopback port nobody listens on


def _config(dest: Path, port: int) -> Path:
    """A user's ordinary ssh_config with `Match exec` lines naming %h and %n; ``safe`` proves they run."""
    dest.write_text(
        'Match exec "test %n = safe && touch CONTROL_N"\n'
        '  ConnectTimeout 2\n'
        'Match exec "test %h = safe && touch CONTROL_H"\n'
        '  ConnectTimeout 2\n'
        f"Host *\n  HostName {CLOSED}\n  Port {port}\n")
    return dest


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    """A HOME whose ~/.ssh/config has the Match exec lines (paramiko reads ~ from $HOME)."""
    ssh_dir = tmp_path / "home" / ".ssh"
    ssh_dir.mkdir(parents=True)
    _config(ssh_dir / "config", free_port(CLOSED))
    return tmp_path / "home"


def _run(cwd: Path, *args: str, home: Path | None = None) -> CLIResult:
    env = {"HOME": str(home)} if home is not None else None
    return run_cli(*args, "--model", "/models/none", "--connect-timeout", "2", timeout=60, env=env, cwd=cwd)


def _markers(cwd: Path) -> list[str]:
    return sorted(p.name for p in cwd.iterdir() if p.name.startswith(("M", "CONTROL")))


# -- the CLI: --host, through ~/.ssh/config (ssh://) and -F (openssh://) -----------------------------

def test_control_match_exec_runs_for_a_plain_name(tmp_path: Path, home: Path) -> None:
    """Without this, the refusals below could pass against a config that never runs a command."""
    result = _run(tmp_path, "probe", "--host", "safe", "--known-hosts", str(tmp_path / "kh"), home=home)
    assert result.code == 3, result.stderr
    assert _markers(tmp_path) == ["CONTROL_H", "CONTROL_N"], _markers(tmp_path)
    if shutil.which("ssh"):
        cwd = tmp_path / "openssh"
        cwd.mkdir()
        config = _config(tmp_path / "ssh_config", free_port(CLOSED))
        result = _run(cwd, "probe", "--host", "openssh://safe", "--ssh-config", str(config))
        assert result.code == 3, result.stderr
        assert "CONTROL_N" in _markers(cwd), _markers(cwd)


@pytest.mark.parametrize("name", HOSTILE_HOSTS[:5])
def test_hostile_host_is_refused_before_any_lookup_ssh(tmp_path: Path, home: Path, name: str) -> None:
    for text in (name, f"ssh://{name}", f"root@{name}"):
        result = _run(tmp_path, "probe", "--host", text, home=home)
        assert_clean_error(result, 2, repr(text)[1:-1])  # the value named (a trailing '#' is named as such)
        assert _markers(tmp_path) == [], (text, _markers(tmp_path))


@pytest.mark.parametrize("name", HOSTILE_HOSTS[:5])
def test_hostile_host_is_refused_before_ssh_runs_openssh(tmp_path: Path, name: str) -> None:
    config = _config(tmp_path / "ssh_config", free_port(CLOSED))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    for args in (["--host", f"openssh://{name}"], ["--host", name, "--transport", "openssh"]):
        result = _run(cwd, "probe", *args, "--ssh-config", str(config))
        assert_clean_error(result, 2, repr(name)[1:-1])
        assert "ssh -G failed" not in result.stderr  # ours, not OpenSSH's
        assert _markers(cwd) == [], (args, _markers(cwd))


@pytest.mark.parametrize("transport", ["ssh", "openssh"])
@pytest.mark.parametrize(("flag", "value", "needle"), [
    ("--user", "root;touch${IFS}M1", "user name"),
    ("--user", "$(touch${IFS}M2)", "user name"),
    ("--user", "-oProxyCommand=touch${IFS}M3", "starts with '-'"),
    ("--jump", "b$(touch${IFS}M4)", "jump host"),
    ("--jump", "ok,x;touch${IFS}M5", "jump host"),
    ("--port", "70000", "65535"),
    ("--port", "0", "65535"),
])
def test_hostile_user_jump_and_port_flags(tmp_path: Path, home: Path, transport: str, flag: str, value: str,
                                          needle: str) -> None:
    result = _run(tmp_path, "probe", "--host", "gpu", "--transport", transport, flag, value,
                  "--known-hosts", str(tmp_path / "kh"), home=home)
    assert_clean_error(result, 2, needle)
    assert _markers(tmp_path) == [], _markers(tmp_path)


# -- inventories: hosts.yaml, Ansible INI, an inventory script -------------------------------------

@pytest.mark.parametrize(("name", "text"), [
    ("hosts.yaml", 'hosts:\n  evil:\n    address: "x$(touch${IFS}M1)"\n'),
    ("hosts.yaml", 'hosts:\n  evil:\n    address: "x;touch${IFS}M2;#"\n'),
    ("hosts.yaml", 'hosts:\n  evil:\n    url: "openssh://x$(touch${IFS}M3)"\n'),
    ("hosts.yaml", 'hosts:\n  evil:\n    address: gpu1\n    user: "r$(touch${IFS}M4)"\n'),
    ("hosts.yaml", 'hosts:\n  evil:\n    address: gpu1\n    jump: "b`touch${IFS}M5`"\n'),
    ("inventory.ini", "[gpus]\nevil ansible_host=x$(touch${IFS}M6)\n"),
    ("inventory.ini", "[gpus]\nevil ansible_host=gpu1 ansible_user=x`touch${IFS}M7`\n"),
])
def test_hostile_inventory_values_are_refused_at_load(tmp_path: Path, home: Path, name: str, text: str) -> None:
    inventory = tmp_path / name
    inventory.write_text(text)
    for transport in ("ssh", "openssh"):
        result = _run(tmp_path, "probe", "--hosts", str(inventory), "--host", "evil", "--transport", transport,
                      home=home)
        assert_clean_error(result, 2, str(inventory), "not a plain name")
        assert _markers(tmp_path) == [], _markers(tmp_path)


def test_hostile_address_from_an_inventory_script(tmp_path: Path, home: Path) -> None:
    """Ansible inventory scripts are often fed from cloud tags: the address is untrusted data."""
    script = tmp_path / "cloud_inventory"
    script.write_text(f"#!{sys.executable}\nimport json\nprint(json.dumps({{'gpus': {{'hosts': ['evil']}}, "
                      "'_meta': {'hostvars': {'evil': {'ansible_host': 'x$(touch${IFS}M1)'}}}}))\n")
    script.chmod(0o755)
    result = _run(tmp_path, "probe", "--hosts", str(script), "--host", "evil", home=home)
    assert_clean_error(result, 2, "not a plain name", "ansible_host")
    assert _markers(tmp_path) == [], _markers(tmp_path)
    with pytest.raises(InventoryError, match="contains '\\$'"):
        load_inventory_file(script)


# -- values that come out of ssh_config ------------------------------------------------------------

@pytest.mark.parametrize(("line", "needle"), [
    ("HostName x$(id)", "hostname 'x$(id)' for gpu"),
    ("User r;id", "user 'r;id' for gpu"),
    ("Port 99999", "port '99999' for gpu"),
])
def test_expanded_ssh_config_values_are_checked(tmp_path: Path, line: str, needle: str) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(f"Host gpu\n  {line}\n")
    with pytest.raises(InputError) as caught:
        Resolver(*load_config(str(config))).target("gpu")
    assert needle in caught.value.message and caught.value.hint


def test_match_exec_never_runs_for_a_refused_name(tmp_path: Path) -> None:
    """The API path too: Resolver.lookup checks the name before paramiko's lookup runs anything."""
    config = _config(tmp_path / "ssh_config", free_port(CLOSED))
    code = ("import sys\nfrom introspect.transport.ssh_config import Resolver, load_config\n"
            "r = Resolver(*load_config(sys.argv[1]))\nr.lookup('safe')\n"
            "try:\n    r.lookup('x;touch M1;#')\nexcept Exception as exc:\n    print(type(exc).__name__)\n")
    done = subprocess.run([sys.executable, "-c", code, str(config)], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.stdout.split() == ["UsageError"], done.stderr
    assert _markers(tmp_path) == ["CONTROL_H", "CONTROL_N"]


# -- the validator ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["gpu1", "10.1.2.200", "::1", "fe80::1", "[::1]", "gpu-a1.example.com",
                                  "node_7", "GPU.Example.", "a" * 255])
def test_valid_host_names(name: str) -> None:
    assert host_problem(name.strip("[]")) is None


@pytest.mark.parametrize(("name", "why"), [
    ("", "empty"), ("-oProxyCommand=x", "starts with '-'"), ("a;b", "';'"), ("a$b", "'$'"), ("a`b`", "'`'"),
    ("a b", "blank"), ("a\tb", "blank"), ("a\nb", "blank"), ("a'b", "\"'\""), ('a"b', "'\"'"), ("a%hb", "'%'"),
    ("a|b", "'|'"), ("a&b", "'&'"), ("a(b)", "'('"), ("a{b}", "'{'"), ("a<b", "'<'"), ("a\\b", "'\\\\'"),
    ("a,b", "','"), ("a*", "'*'"), ("a?", "'?'"), ("a!b", "'!'"), ("a/b", "'/'"), ("a@b", "'@'"),
    ("a\x1b[2Jb", "control"), ("a\x00b", "control"), ("a" * 256, "longer than 255"),
])
def test_invalid_host_names(name: str, why: str) -> None:
    problem = host_problem(name)
    assert problem is not None and why in problem, (name, problem)


@pytest.mark.parametrize("name", ["ubuntu", "root", "ec2-user", "ml.ops", "svc_probe", "ml@CORP.EXAMPLE",
                                  "CORP\\ml"])
def test_valid_user_names(name: str) -> None:
    assert user_problem(name) is None


@pytest.mark.parametrize(("name", "why"), [
    ("", "empty"), ("-l", "starts with '-'"), ("r;id", "';'"), ("$USER", "'$'"), ("`id`", "'`'"), ("a b", "blank"),
    ("a\nb", "blank"), ("a'", "\"'\""), ('a"', "'\"'"), ("a%r", "'%'"), ("ml\\", "ends with"), ("a:b", "':'"),
])
def test_invalid_user_names(name: str, why: str) -> None:
    problem = user_problem(name)
    assert problem is not None and why in problem, (name, problem)


def test_ports_destinations_and_jumps() -> None:
    assert check_port(22) == 22 and check_port("65535") == 65535
    for bad in (0, 65536, -1, "22a", "²", True, None, "1" * 7):
        with pytest.raises(UsageError, match="1 to 65535"):
            check_port(bad)
    assert check_destination("ops@edge:2200") == ("ops", "edge", 2200)
    assert check_destination("u@[::1]:2222") == ("u", "::1", 2222)
    assert check_destination("fe80::1") == (None, "fe80::1", None)
    assert check_jump("a,ops@b:2200,ssh://c:22") == "a,ops@b:2200,ssh://c:22"
    assert check_user("ubuntu") == "ubuntu"
    for bad in ("a,", "a,b;c", "ssh://x$(id)"):
        with pytest.raises(UsageError, match="jump host"):
            check_jump(bad)
    with pytest.raises(UsageError, match="port"):
        check_destination("[::1]junk")


@pytest.mark.parametrize("text", ["ssh://gpu1#", "ssh://x%3Bid", "openssh://a%24b@gpu1", "x%hy", "ns/pod;id"])
def test_host_specs_refuse_hidden_shell_characters(text: str) -> None:
    with pytest.raises(UsageError):
        parse_host(text)


# `docker|podman exec --user` takes "<name|uid>[:<group|gid>]"
# (https://docs.docker.com/reference/cli/docker/container/exec/).
@pytest.mark.parametrize("text", ["podman://vllm?user=root;id", "docker://vllm?user=$(id)", "docker://vllm?user=-u0",
                                  "docker://vllm?user=a`id`", "podman://vllm?user=a:b:c"])
def test_container_users_are_plain_names(text: str) -> None:
    with pytest.raises(UsageError, match="container user"):
        parse_host(text)


@pytest.mark.parametrize(("text", "user"), [("docker://vllm?user=1000:1000", "1000:1000"),
                                            ("podman://vllm?user=app", "app"), ("docker://v?user=nobody:ml", "nobody:ml")])
def test_container_users_that_docker_takes(text: str, user: str) -> None:
    assert parse_host(text).user == user



# -- --accept-new with a known_hosts that cannot be written ----------------------------------------

def _ro_mount_works(tmp_path: Path) -> bool:
    probe = tmp_path / "ro-probe"
    probe.mkdir()
    done = subprocess.run(["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o ro,size=64k tmpfs "$1"', "sh",
                           str(probe)], capture_output=True, timeout=30) if shutil.which("unshare") else None
    return done is not None and done.returncode == 0


def _accept_new_args(sshd, client_keys, known_hosts: Path) -> list[str]:
    return ["probe", "--host", sshd.address, "--port", str(sshd.port), "--identity", str(client_keys.key),
            "--known-hosts", str(known_hosts), "--accept-new", "--ssh-config", "/dev/null",
            "--model", "/models/none"]


@pytest.mark.ssh
def test_accept_new_into_a_read_only_file_system_names_the_file(tmp_path: Path, sshd, client_keys) -> None:
    """root writes through any mode bits, so the file lies on a read-only tmpfs, mounted in a
    private mount namespace of the CLI's own (nothing outside it sees the mount)."""
    if not _ro_mount_works(tmp_path):
        pytest.skip("no private mount namespace here (unshare -m / mount not permitted)")
    ro_dir = tmp_path / "ro"
    ro_dir.mkdir()
    known_hosts = ro_dir / "known_hosts"
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO), TMPDIR=str(tmp_path),
               INTROSPECT_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run(["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o ro,size=64k tmpfs "$1" && shift && '
                           'exec "$@"', "sh", str(ro_dir), sys.executable, "-m", "introspect.cli.main",
                           *_accept_new_args(sshd, client_keys, known_hosts)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    result = CLIResult(done.returncode, done.stdout, done.stderr)
    assert_clean_error(result, 2, f"known_hosts {known_hosts} is on a read-only file system", "ssh-keyscan",
                       "--known-hosts")
    assert "[connect]" not in result.stderr and "cannot connect" not in result.stderr


@pytest.mark.ssh
def test_accept_new_under_a_parent_that_is_a_file_names_the_file(tmp_path: Path, sshd, client_keys) -> None:
    parent = tmp_path / "not-a-dir"
    parent.write_text("a file where a directory was expected\n")
    known_hosts = parent / "known_hosts"
    result = run_cli(*_accept_new_args(sshd, client_keys, known_hosts), timeout=120, cwd=tmp_path)
    assert_clean_error(result, 2, f"known_hosts {known_hosts} has a parent that is not a directory",
                       "ssh-keyscan -p")
    assert parent.read_text().startswith("a file")
