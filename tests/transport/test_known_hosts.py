"""known_hosts read as OpenSSH reads it: markers, hashed names, patterns, bad lines skipped.

The unit cases follow sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT"; the loopback cases connect to a
real sshd with files that paramiko's own loader refuses as a whole
(https://github.com/paramiko/paramiko/issues/1219).
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import paramiko
import pytest

from introspect.errors import HostKeyError
from introspect.transport.hostkeys import KnownHosts
from introspect.transport.known_hosts_file import hashed_name, parse_line, read_known_hosts
from introspect.transport.ssh import SSHExecutor, SSHTarget

PY = os.path.realpath(sys.executable)


def _keypair(tmp_path: Path, name: str) -> tuple[str, str]:
    path = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    kind, blob = (tmp_path / f"{name}.pub").read_text().split()[:2]
    return kind, blob


def test_plain_wildcard_negated_and_port_patterns(tmp_path: Path) -> None:
    kind, blob = _keypair(tmp_path, "k")
    line, warning = parse_line(f"gpu*.lab,!gpu7.lab,[10.0.0.5]:2222 {kind} {blob} comment", "kh", 3)
    assert warning is None and line is not None
    assert line.matches("gpu1.lab") and line.matches("GPU2.LAB")
    assert not line.matches("gpu7.lab"), "a negated pattern wins over a positive one"
    assert line.matches("[10.0.0.5]:2222") and not line.matches("10.0.0.5")
    assert not line.matches("cpu1.lab")


def test_hashed_names_match_only_their_host() -> None:
    salt = b"0123456789abcdefghij"
    blob = base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519" + b"\x00" * 36).decode()
    line, _ = parse_line(f"{hashed_name('[127.0.0.2]:2200', salt)} ssh-ed25519 {blob}", "kh", 1)
    assert line is not None
    assert line.matches("[127.0.0.2]:2200")
    assert not line.matches("[127.0.0.2]:2201") and not line.matches("127.0.0.2")


def test_bad_lines_are_skipped_with_file_and_line(tmp_path: Path) -> None:
    kind, blob = _keypair(tmp_path, "k")
    path = tmp_path / "known_hosts"
    path.write_bytes("\n".join([
        "# a comment",
        "",
        f"good.lab {kind} {blob}",
        f"corrupt.lab {kind} !!!notbase64!!!",
        f"wrongtype.lab ssh-rsa {blob}",
        f"@bogus-marker x.lab {kind} {blob}",
        "truncated.lab ssh-ed25519",
        f"@cert-authority *.lab {kind} {blob}",
        f"@revoked old.lab {kind} {blob}",
    ]).encode() + b"\nbad\xff.lab ssh-ed25519 AAAA\n")
    lines, warnings = read_known_hosts(path)
    assert [(x.lineno, x.marker) for x in lines] == [(3, ""), (8, "@cert-authority"), (9, "@revoked")]
    assert [w.split(": ", 1)[0] for w in warnings] == [f"{path}:{n}" for n in (4, 5, 6, 7, 10)]
    assert "not valid base64" in warnings[0] and "not a ssh-rsa key" in warnings[1]


def test_lines_found_by_name_are_the_lines_a_full_scan_finds_in_file_order(tmp_path: Path) -> None:
    """Plain names are looked up, wildcard/negated/hashed lines scanned: same lines, same order."""
    kind, blob = _keypair(tmp_path, "k")
    salt = b"0123456789abcdefghij"
    path = tmp_path / "known_hosts"
    path.write_text("\n".join([
        f"GPU1.lab,[10.0.0.5]:2222 {kind} {blob}",
        f"gpu*.lab,!gpu7.lab {kind} {blob}",
        f"{hashed_name('gpu1.lab', salt)} {kind} {blob}",
        f"@revoked gpu1.lab {kind} {blob}",
        f"gpu7.lab,gpu1.lab {kind} {blob}",
        f"@cert-authority *.lab {kind} {blob}",
    ]) + "\n")
    known = KnownHosts(path, global_files=[])
    for name in ("gpu1.lab", "GPU1.LAB", "gpu7.lab", "[10.0.0.5]:2222", "10.0.0.5", "x.lab", "other"):
        for marker in ("", "@revoked", "@cert-authority"):
            scan = [x for x in known.lines if x.marker == marker and x.matches(name)]
            assert known._matching(name, marker) == scan, (name, marker)
    assert [x.lineno for x in known._matching("gpu1.lab", "")] == [1, 2, 3, 5]
    known.record("new.lab", paramiko.PKey.from_type_string(kind, base64.b64decode(blob)))
    assert [x.lineno for x in known._matching("NEW.lab", "")] == [0], "a recorded key is found by name too"


def test_missing_file_is_empty(tmp_path: Path) -> None:
    assert read_known_hosts(tmp_path / "absent") == ([], [])


def _executor(sshd, client_keys, known: KnownHosts) -> SSHExecutor:
    return SSHExecutor(SSHTarget(host=sshd.address, port=sshd.port, identity=str(client_keys.key),
                                 ssh_config="/dev/null"), known)


def test_marker_hashed_and_corrupt_lines_against_a_real_sshd(sshd, client_keys, tmp_path: Path) -> None:
    """The file that stops paramiko's loader: the hashed entry is used, the rest is reported."""
    kind, blob = sshd.known_hosts_line.split()[1:3]
    ca_kind, ca_blob = _keypair(tmp_path, "ca")
    name = f"[{sshd.address}]:{sshd.port}"
    path = tmp_path / "known_hosts"
    path.write_text("\n".join([
        f"@cert-authority * {ca_kind} {ca_blob}",
        f"other.lab {kind} AAAA====broken",
        f"{hashed_name(name, os.urandom(20))} {kind} {blob}",
    ]) + "\n")
    with pytest.raises(paramiko.hostkeys.InvalidHostKey):
        paramiko.HostKeys(str(path))  # what paramiko alone does with this file
    known = KnownHosts(path, global_files=())
    with _executor(sshd, client_keys, known) as executor:
        reply = executor.run_python(PY, "echo", {"a": 1}, timeout=30)
    assert reply.facts["request"] == {"a": 1}
    assert any(w.startswith(f"{path}:2: ") and "base64" in w for w in known.warnings)
    ca_warnings = [w for w in known.warnings if "@cert-authority" in w]
    assert len(ca_warnings) == 1 and ca_warnings[0].startswith(f"{path}:1: ")


def test_revoked_key_is_refused_even_with_a_plain_line(sshd, client_keys, tmp_path: Path) -> None:
    kind, blob = sshd.known_hosts_line.split()[1:3]
    path = tmp_path / "known_hosts"
    path.write_text(sshd.known_hosts_line + f"@revoked * {kind} {blob}\n")
    known = KnownHosts(path, global_files=())
    with pytest.raises(HostKeyError, match="@revoked") as caught, _executor(sshd, client_keys, known) as ex:
        ex.connect()
    assert f"{path}:2" in caught.value.message


def test_ca_only_host_is_unknown_and_says_why(sshd, client_keys, tmp_path: Path) -> None:
    ca_kind, ca_blob = _keypair(tmp_path, "ca")
    path = tmp_path / "known_hosts"
    path.write_text(f"@cert-authority * {ca_kind} {ca_blob}\n")
    known = KnownHosts(path, global_files=())
    with pytest.raises(HostKeyError, match="cannot verify host certificates"), \
            _executor(sshd, client_keys, known) as ex:
        ex.connect()


def test_global_file_is_read_and_new_keys_go_to_the_user_file(sshd, client_keys, tmp_path: Path) -> None:
    global_file = tmp_path / "ssh_known_hosts"
    global_file.write_text(sshd.known_hosts_line)
    user_file = tmp_path / "user_known_hosts"
    known = KnownHosts(user_file, global_files=[global_file])
    with _executor(sshd, client_keys, known) as executor:
        executor.connect()
    assert not user_file.exists(), "a key known globally is not written again"


# -- through the CLI: warnings printed once by main, exit codes, ssh_config's files ------------------

def _cli_probe(sshd, client_keys, kimi_model, venv_full, *flags: str):
    from tests.conftest import run_cli

    return run_cli("probe", "--host", sshd.address, "--port", str(sshd.port), "--identity", str(client_keys.key),
                   "--model", str(kimi_model), "--venv", str(venv_full), "--json", *flags)


def test_cli_probes_with_marker_hashed_and_corrupt_lines_and_warns_once(sshd, client_keys, kimi_model, venv_full,
                                                                      tmp_path: Path) -> None:
    kind, blob = sshd.known_hosts_line.split()[1:3]
    ca_kind, ca_blob = _keypair(tmp_path, "ca")
    path = tmp_path / "known_hosts"
    path.write_text("\n".join([
        f"@cert-authority * {ca_kind} {ca_blob}",
        f"other.lab {kind} AAAA====broken",
        f"{hashed_name(f'[{sshd.address}]:{sshd.port}', os.urandom(20))} {kind} {blob}",
    ]) + "\n")
    # The subject is which known_hosts lines the connection reads: the tokenizer load and the
    # model-code witness (about 4 CPU-s together) add no warning and no error line to check.
    result = _cli_probe(sshd, client_keys, kimi_model, venv_full, "--known-hosts", str(path),
                        "--ssh-config", "/dev/null", "--no-tokenizer", "--no-model-code")
    assert result.code == 0, result.stderr[-3000:]
    assert result.json()["target"]["scheme"] == "ssh"
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len([w for w in warnings if w.startswith(f"warning: {path}:2: ") and "base64" in w]) == 1, warnings
    assert len([w for w in warnings if w.startswith(f"warning: {path}:1: ") and "@cert-authority" in w]) == 1
    assert not [line for line in result.stderr.splitlines() if line.startswith("error: ")], result.stderr


def test_cli_revoked_key_is_exit_3_with_one_error_and_fix(sshd, client_keys, kimi_model, venv_full,
                                                         tmp_path: Path) -> None:
    kind, blob = sshd.known_hosts_line.split()[1:3]
    path = tmp_path / "known_hosts"
    path.write_text(sshd.known_hosts_line + f"@revoked * {kind} {blob}\n")
    result = _cli_probe(sshd, client_keys, kimi_model, venv_full, "--known-hosts", str(path),
                        "--ssh-config", "/dev/null")
    lines = result.stderr.splitlines()
    assert result.code == 3, result.stderr
    assert len([x for x in lines if x.startswith("error: ")]) == 1 and "@revoked" in result.stderr, result.stderr
    assert len([x for x in lines if x.startswith("fix: ")]) == 1 and "Traceback" not in result.stderr


def test_cli_honours_ssh_config_known_hosts_files(sshd, client_keys, kimi_model, venv_full, tmp_path: Path) -> None:
    user_file, global_file = tmp_path / "user_known_hosts", tmp_path / "global_known_hosts"
    user_file.write_text("")
    global_file.write_text(sshd.known_hosts_line)
    config = tmp_path / "ssh_config"
    config.write_text(f"Host {sshd.address}\n  UserKnownHostsFile {user_file}\n  GlobalKnownHostsFile {global_file}\n")
    result = _cli_probe(sshd, client_keys, kimi_model, venv_full, "--ssh-config", str(config), "--no-tokenizer",
                        "--no-model-code")  # which known_hosts files are read: the connection's
    assert result.code in (0, 1) and result.json()["target"]["host"] == sshd.address, result.stderr[-2000:]
    global_file.write_text("")  # the key is in neither file now: unknown, refused, and the fix names the user file
    refused = _cli_probe(sshd, client_keys, kimi_model, venv_full, "--ssh-config", str(config))
    assert refused.code == 3 and str(user_file) in refused.stderr, refused.stderr
