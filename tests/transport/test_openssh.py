"""openssh:// against real sshd servers on loopback: connection reuse, ssh_config honoured,
and OpenSSH's failures mapped to the same errors (and exit codes) as paramiko's."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from introspect.errors import (
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    AuthenticationFailed,
    ClientNotFound,
    ConnectionLost,
    HostKeyError,
    HostUnreachable,
    UsageError,
)
from introspect.transport.openssh import OpenSSHExecutor, check_options
from introspect.transport.openssh_errors import SSHContext, classify
from introspect.transport.ssh_dial import StartupsRefused
from tests.sshd_server import ClientKeys, SSHServer, free_port, start_sshd, trust

pytestmark = pytest.mark.ssh
PY = os.path.realpath(sys.executable)
# sshd logs "Accepted publickey" once per connection and "Starting session" once per session
# at VERBOSE; a Match block overrides the fixture's LogLevel ERROR.
VERBOSE = "Match all\n    LogLevel VERBOSE\n"


@pytest.fixture()
def logged_sshd(tmp_path: Path, client_keys: ClientKeys) -> Iterator[SSHServer]:
    server = start_sshd(tmp_path / "sshd", client_keys, address="127.0.0.4", extra_config=VERBOSE)
    trust(server, client_keys)
    yield server
    server.stop()


def log_lines(server: SSHServer, needle: str) -> list[str]:
    time.sleep(0.2)  # sshd writes its log lines asynchronously to the test
    return [line for line in (server.root / "sshd.log").read_text().splitlines() if needle in line]


def config_file(tmp: Path, keys: ClientKeys, body: str = "", known_hosts: Path | None = None) -> Path:
    path = tmp / f"ssh_config-{len(list(tmp.glob('ssh_config-*')))}"
    path.write_text(f"{body}\nHost *\n  IdentityFile {keys.key}\n  IdentitiesOnly yes\n  IdentityAgent none\n"
                    f"  UserKnownHostsFile {known_hosts or keys.known_hosts}\n")
    return path


def executor(server: SSHServer, config: Path, **kwargs) -> OpenSSHExecutor:
    return OpenSSHExecutor(server.address, port=server.port, ssh_config=str(config), **kwargs)


def masters_for(server: SSHServer) -> list[str]:
    out = subprocess.run(["ps", "-eo", "args="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "ControlMaster=yes" in line and f"-p {server.port} " in line]


# -- connection reuse ---------------------------------------------------------------------------

def test_one_control_master_carries_every_session(logged_sshd, client_keys, tmp_path):
    ex = executor(logged_sshd, config_file(tmp_path, client_keys))
    with ex:
        control = ex._dir
        assert control is not None and (control.stat().st_mode & 0o777) == 0o700
        ex.run_python(PY, "echo", {}, timeout=30)
        replies: list[object] = []
        threads = [threading.Thread(target=lambda: replies.append(
            ex.run_python(PY, "echo", {"sleep": 1}, timeout=30))) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(replies) == 2
    assert len(log_lines(logged_sshd, "Accepted publickey")) == 1
    sessions = log_lines(logged_sshd, "Starting session: command")
    assert len(sessions) == 3
    assert len({line.split(" port ")[1].split()[0] for line in sessions}) == 1  # one TCP connection
    assert ex.connections_opened == 1
    assert not control.exists(), "the private control directory was left behind"
    assert not masters_for(logged_sshd), "the master outlived close()"


def test_each_executor_has_its_own_master(logged_sshd, client_keys, tmp_path):
    config = config_file(tmp_path, client_keys)
    for _ in range(2):
        with executor(logged_sshd, config) as ex:
            ex.run_python(PY, "echo", {}, timeout=30)
    assert len(log_lines(logged_sshd, "Accepted publickey")) == 2


def test_control_persist_leaves_the_master_for_the_next_run(logged_sshd, client_keys, tmp_path, monkeypatch):
    runtime = Path(tempfile.mkdtemp(prefix="rt-", dir="/tmp"))  # short: a socket path has ~100 bytes
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    config = config_file(tmp_path, client_keys)
    try:
        for _ in range(2):
            with executor(logged_sshd, config, control_persist="60") as ex:
                ex.run_python(PY, "echo", {}, timeout=30)
        assert len(log_lines(logged_sshd, "Accepted publickey")) == 1
        assert len(log_lines(logged_sshd, "Starting session: command")) == 2
        assert (runtime / f"introspect-ssh-{os.getuid()}").stat().st_mode & 0o777 == 0o700
    finally:
        ex = executor(logged_sshd, config, control_persist="60")
        ex._ssh, ex._dir = "ssh", runtime / f"introspect-ssh-{os.getuid()}"
        subprocess.run([*ex._base_argv(extra=ex._socket_options()), "-O", "exit", "--", ex.host],
                       capture_output=True, timeout=10)
        subprocess.run(["rm", "-rf", str(runtime)], check=True)


# -- ssh_config honoured ------------------------------------------------------------------------

def test_match_block_of_ssh_config_is_honoured(logged_sshd, client_keys, tmp_path):
    body = f"Match originalhost gpu-node-7\n  HostName {logged_sshd.address}\n  Port {logged_sshd.port}\n"
    with OpenSSHExecutor("gpu-node-7", ssh_config=str(config_file(tmp_path, client_keys, body))) as ex:
        reply = ex.run_python(PY, "echo", {"a": 1}, timeout=30)
        assert ex.target.port == logged_sshd.port and ex.target.host == "gpu-node-7"
    assert reply.facts["request"] == {"a": 1}


def test_proxy_jump_of_ssh_config_is_honoured(logged_sshd, client_keys, tmp_path):
    # Through the jump, the jump's sshd sees one login and no session (ProxyJump forwards a TCP
    # stream, ssh -W); without it, the jump's sshd would see nothing at all.
    target = start_sshd(tmp_path / "target", client_keys, address="127.0.0.11", extra_config=VERBOSE)
    try:
        trust(target, client_keys)
        body = (f"Host gpu-behind-jump\n  HostName {target.address}\n  Port {target.port}\n  ProxyJump jumpbox\n"
                f"Host jumpbox\n  HostName {logged_sshd.address}\n  Port {logged_sshd.port}\n")
        with OpenSSHExecutor("gpu-behind-jump", ssh_config=str(config_file(tmp_path, client_keys, body))) as ex:
            ex.run_python(PY, "echo", {}, timeout=30)
        assert len(log_lines(logged_sshd, "Accepted publickey")) == 1
        assert log_lines(logged_sshd, "Starting session") == []
        assert len(log_lines(target, "Accepted publickey")) == 1
        assert len(log_lines(target, "Starting session: command")) == 1
    finally:
        target.stop()


def test_user_known_hosts_file_of_ssh_config_is_honoured(sshd, client_keys, tmp_path):
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    with pytest.raises(HostKeyError) as info:
        executor(sshd, config_file(tmp_path, client_keys, known_hosts=empty)).connect()
    assert str(empty) in info.value.message and str(empty) in (info.value.hint or "")
    good = tmp_path / "good_known_hosts"
    good.write_text(sshd.known_hosts_line)
    with executor(sshd, config_file(tmp_path, client_keys, known_hosts=good)) as ex:
        assert ex.run_python(PY, "echo", {}, timeout=30).errors == []


def test_ssh_option_passthrough_reaches_ssh(sshd, client_keys, tmp_path):
    # An option ssh refuses proves it got there; a good one must not disturb the run.
    with executor(sshd, config_file(tmp_path, client_keys), options=["ServerAliveInterval=7"]) as ex:
        assert ex.run_python(PY, "echo", {}, timeout=30).errors == []
    with pytest.raises(UsageError) as info:
        executor(sshd, config_file(tmp_path, client_keys), options=["NoSuchOption=1"]).connect()
    assert "Bad configuration option: nosuchoption" in info.value.message
    assert info.value.exit_code == EXIT_USAGE


@pytest.mark.parametrize("option", ["ControlPath=/tmp/x", "batchmode no", "ConnectTimeout=1", "novalue"])
def test_options_introspect_owns_are_refused(option):
    with pytest.raises(UsageError):
        check_options([option])


# -- failures, mapped like paramiko's ----------------------------------------------------------

def test_port_closed(client_keys, tmp_path):
    port = free_port("127.0.0.6")
    with pytest.raises(HostUnreachable) as info:
        OpenSSHExecutor("127.0.0.6", port=port, ssh_config=str(config_file(tmp_path, client_keys))).connect()
    assert info.value.message == f"connection refused by 127.0.0.6:{port}"
    assert "sshd" in (info.value.hint or "") and info.value.exit_code == EXIT_UNREACHABLE


def test_auth_refused(tmp_path, client_keys):
    server = start_sshd(tmp_path / "sshd", client_keys, address="127.0.0.7", authorized=False)
    try:
        trust(server, client_keys)
        ex = executor(server, config_file(tmp_path, client_keys))
        with pytest.raises(AuthenticationFailed) as info:
            ex.connect()
        assert ex._dir is None and not masters_for(server), "a failed connect left its master behind"
        assert f"authentication refused for user 'root' at 127.0.0.7:{server.port}" in info.value.message
        assert "--identity" in (info.value.hint or "") and info.value.exit_code == EXIT_UNREACHABLE
    finally:
        server.stop()


def test_unknown_host_key_names_the_fingerprint(sshd, client_keys, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(HostKeyError) as info:
        executor(sshd, config_file(tmp_path, client_keys), known_hosts=str(empty)).connect()
    fingerprint = subprocess.run(["ssh-keygen", "-lf", f"{sshd.host_key}.pub"], capture_output=True,
                                 text=True, check=True).stdout.split()[1]
    assert f"unknown host key for [{sshd.address}]:{sshd.port}: ssh-ed25519 {fingerprint}" in info.value.message
    assert "ssh-keyscan" in (info.value.hint or "") and "--accept-new" in (info.value.hint or "")


def test_accept_new_records_a_new_key(sshd, client_keys, tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text("")
    with executor(sshd, config_file(tmp_path, client_keys), known_hosts=str(known), accept_new=True) as ex:
        ex.run_python(PY, "echo", {}, timeout=30)
    assert f"[{sshd.address}]:{sshd.port}" in known.read_text()


def test_changed_host_key_is_always_refused(sshd, client_keys, tmp_path):
    known = tmp_path / "known_hosts"
    wrong = " ".join(Path(f"{client_keys.key}.pub").read_text().split()[:2])  # some other ed25519 key
    known.write_text(f"[{sshd.address}]:{sshd.port} {wrong}\n")
    for accept_new in (False, True):
        with pytest.raises(HostKeyError) as info:
            executor(sshd, config_file(tmp_path, client_keys), known_hosts=str(known),
                     accept_new=accept_new).connect()
        assert "HOST KEY CHANGED" in info.value.message and "ssh-keygen -R" in (info.value.hint or "")
    assert known.read_text() == f"[{sshd.address}]:{sshd.port} {wrong}\n"


def test_banner_never_comes(client_keys, tmp_path):
    with socket.socket() as listener:
        listener.bind(("127.0.0.12", 0))
        listener.listen(4)
        port = listener.getsockname()[1]
        with pytest.raises(HostUnreachable) as info:
            OpenSSHExecutor("127.0.0.12", port=port, connect_timeout=2,
                            ssh_config=str(config_file(tmp_path, client_keys))).connect()
    assert info.value.message == f"no SSH banner from 127.0.0.12:{port} within 2 s"


def test_sshd_killed_mid_probe_is_connection_lost(tmp_path, client_keys):
    server = start_sshd(tmp_path / "sshd", client_keys, address="127.0.0.5")
    trust(server, client_keys)
    ex = executor(server, config_file(tmp_path, client_keys))
    errors: list[BaseException] = []

    def run() -> None:
        try:
            ex.run_python(PY, "echo", {"sleep": 60}, timeout=60)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            errors.append(exc)

    with ex:
        worker = threading.Thread(target=run)
        worker.start()
        time.sleep(1.5)
        server.kill()
        worker.join(60)
    assert errors and isinstance(errors[0], ConnectionLost), errors
    assert errors[0].exit_code == EXIT_UNREACHABLE


def test_missing_ssh_client_is_a_usage_error_with_the_install_hint(tmp_path):
    with pytest.raises(ClientNotFound) as info:
        OpenSSHExecutor("gpu1", binary=str(tmp_path / "no-ssh")).connect()
    assert info.value.exit_code == EXIT_USAGE and "apt-get install openssh-client" in (info.value.hint or "")


@pytest.mark.parametrize("kwargs", [{"host": "-oProxyCommand=touch /tmp/pwned"},
                                    {"host": "gpu1", "jump": "-oProxyCommand=x"}, {"host": "gpu1", "user": "-x"},
                                    {"host": "gpu 1"}])
def test_hostile_names_are_refused_before_ssh_sees_them(kwargs):
    with pytest.raises(UsageError):
        OpenSSHExecutor(**kwargs)


# OpenSSH 9.2's exact lines for the failures a loopback test cannot make without leaving 127/8.
CTX = SSHContext("gpu1", "10.1.2.3", 22, "root", 5.0, "/home/u/.ssh/known_hosts")


@pytest.mark.parametrize(("stderr", "kind", "message"), [
    ("ssh: Could not resolve hostname gpu9: Name or service not known", HostUnreachable,
     "cannot resolve host name 'gpu9': Name or service not known"),
    ("ssh: connect to host 10.1.2.3 port 22: Connection timed out", HostUnreachable,
     "TCP connect to 10.1.2.3:22 timed out after 5 s"),
    ("ssh: connect to host 10.1.2.3 port 22: No route to host", HostUnreachable,
     "cannot connect to 10.1.2.3:22: No route to host"),
    # sshd past MaxStartups (sshd.c drop_connection(), https://github.com/openssh/openssh-portable/blob/
    # 0ef0f5a839831c213f24e3f2ae434765c607fb50/sshd.c#L588-L638): a refusal the fleet runner retries.
    ("kex_exchange_identification: read: Connection reset by peer\r\nConnection reset by 10.1.2.3 port 22",
     StartupsRefused, "10.1.2.3:22 closed the connection before its SSH banner"),
    ("kex_exchange_identification: Connection closed by remote host", StartupsRefused, "MaxStartups"),
    ("channel 0: open failed: connect failed: Connection refused\nstdio forwarding failed\n"
     "kex_exchange_identification: Connection closed by remote host", HostUnreachable, "handshake"),
    ("root@10.1.2.3: Permission denied (publickey,gssapi-with-mic).", AuthenticationFailed,
     "authentication refused for user 'root' at 10.1.2.3:22 (Permission denied (publickey,gssapi-with-mic))"),
    ("Connection to 10.1.2.3 closed by remote host.", ConnectionLost, "the SSH connection dropped"),
    ("/home/u/.ssh/config: line 3: Bad configuration option: forwardagnet", UsageError,
     "ssh rejected its configuration: /home/u/.ssh/config: line 3: Bad configuration option: forwardagnet"),
])
def test_openssh_messages_map_to_the_paramiko_errors(stderr, kind, message):
    error = classify(stderr, CTX)
    assert type(error) is kind and message in error.message and error.hint


def test_a_run_that_is_not_sshs_failure_is_not_classified():
    assert classify("Traceback (most recent call last):\nValueError: boom", CTX) is None


def test_the_remote_command_is_the_quoted_boot_line(sshd, client_keys, tmp_path, monkeypatch):
    from introspect.transport import openssh, shipping

    seen: list[list[str]] = []
    real = openssh.ClientProcess

    def recording(argv, **kwargs):
        seen.append(argv)
        return real(argv, **kwargs)

    monkeypatch.setattr(openssh, "ClientProcess", recording)
    with executor(sshd, config_file(tmp_path, client_keys)) as ex:
        ex.run_python(PY, "echo", {}, timeout=30)
    argv = seen[-1]
    assert argv[-1] == shipping.command_line(PY) and argv[-3:-1] == ["--", sshd.address]
    assert "BatchMode=yes" in argv and "ControlMaster=no" in argv
