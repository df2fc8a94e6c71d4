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
