"""FleetSSHClient: paramiko's key-file tries, each read once per run while the file is unchanged."""

from __future__ import annotations

import subprocess
from pathlib import Path

import paramiko
import pytest

from introspect.transport import ssh_client
from introspect.transport.ssh_client import FleetSSHClient


def _client() -> FleetSSHClient:
    client = FleetSSHClient()
    client._log = lambda *a: None  # type: ignore[method-assign]  # paramiko logs through the transport a login has
    return client


def _key(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


def test_each_try_reads_the_file_once_and_a_changed_file_again(tmp_path: Path, monkeypatch) -> None:
    # paramiko's SSHClient._auth tries RSAKey, ECDSAKey, Ed25519Key on each key_filename
    # (https://github.com/paramiko/paramiko/blob/5.1.0/paramiko/client.py#L686-L703).
    reads: list[str] = []
    real = paramiko.PKey.from_private_key_file.__func__  # type: ignore[attr-defined]

    def counted(cls, filename, password=None):
        reads.append(cls.__name__)
        return real(cls, filename, password)

    monkeypatch.setattr(paramiko.PKey, "from_private_key_file", classmethod(counted))
    monkeypatch.setattr(ssh_client, "_tries", {})
    path = str(_key(tmp_path / "id"))
    for _ in range(3):  # three logins
        client = _client()
        for klass in (paramiko.RSAKey, paramiko.ECDSAKey):
            with pytest.raises(paramiko.SSHException):
                client._key_from_filepath(path, klass, None)
        key = client._key_from_filepath(path, paramiko.Ed25519Key, None)
        assert isinstance(key, paramiko.Ed25519Key)
    assert reads == ["RSAKey", "ECDSAKey", "Ed25519Key"], "one read per class for three logins"
    Path(path).unlink()
    _key(Path(path))  # a new key in the same file: read again, and it is the new one
    again = _client()._key_from_filepath(path, paramiko.Ed25519Key, None)
    assert reads[-1] == "Ed25519Key" and len(reads) == 4
    assert again.get_base64() == Path(path + ".pub").read_text().split()[1]


def test_a_missing_file_is_paramikos_own_error_every_time(tmp_path: Path) -> None:
    for _ in range(2):
        with pytest.raises(FileNotFoundError):
            _client()._key_from_filepath(str(tmp_path / "absent"), paramiko.Ed25519Key, None)


def test_a_loaded_key_is_handed_over_as_pkey_with_the_other_files_after_it(tmp_path: Path, monkeypatch) -> None:
    # paramiko's _auth tries ``pkey`` first, then each key_filename: the same keys in the same
    # order, without the other key classes' failing tries (and the exceptions _auth keeps).
    seen: list[dict] = []
    monkeypatch.setattr(paramiko.SSHClient, "connect", lambda self, *a, **k: seen.append(k))
    monkeypatch.setattr(ssh_client, "_tries", {})
    monkeypatch.setattr(ssh_client, "_loaded", {})
    first, second = str(_key(tmp_path / "a")), str(_key(tmp_path / "b"))
    FleetSSHClient().connect(hostname="h", key_filename=[first, second])
    assert seen[-1]["key_filename"] == [first, second] and seen[-1].get("pkey") is None, "nothing loaded yet"
    key = _client()._key_from_filepath(first, paramiko.Ed25519Key, None)  # what the first login's _auth did
    FleetSSHClient().connect(hostname="h", key_filename=[first, second])
    assert seen[-1]["pkey"] is key and seen[-1]["key_filename"] == [second]
    FleetSSHClient().connect(hostname="h", key_filename=[first], passphrase="other")
    assert seen[-1].get("pkey") is None, "another passphrase is another load"
    Path(first).unlink()
    _key(Path(first))
    FleetSSHClient().connect(hostname="h", key_filename=[first])
    assert seen[-1].get("pkey") is None, "a changed file is read again"
