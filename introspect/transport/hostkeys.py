"""known_hosts checking, strict by default, loaded once per run.

paramiko's ``SSHClient`` would accept whatever fabric's AutoAddPolicy says
(everything). Here an unknown key is refused with its fingerprint and the
command that accepts it, ``accept_new`` records new keys like OpenSSH's
``StrictHostKeyChecking=accept-new``, and a changed key is always refused.
The file is parsed once and shared by every connection of the run (parsing a
big known_hosts per host is what makes some fleet tools slow).
"""

from __future__ import annotations

import base64
import hashlib
import os
import shlex
import threading
from pathlib import Path

import paramiko

from introspect.errors import HostKeyError


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH's SHA256 fingerprint (``ssh-keygen -lf`` style)."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


def entry_name(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


def _split_entry(name: str) -> tuple[str, int]:
    if name.startswith("[") and "]:" in name:
        host, port = name[1:].split("]:", 1)
        return host, int(port)
    return name, 22


class KnownHosts:
    """A known_hosts file shared by all connections of one run."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, accept_new: bool = False) -> None:
        self.path = Path(path).expanduser() if path else Path("~/.ssh/known_hosts").expanduser()
        self.accept_new = accept_new
        self._lock = threading.Lock()
        self._keys = paramiko.HostKeys()
        self.load_count = 0
        if self.path.exists():
            try:
                self._keys.load(str(self.path))
            except (OSError, paramiko.SSHException) as exc:
                raise HostKeyError(f"cannot read known_hosts file {self.path}: {exc}",
                                   hint="fix or remove that file, or pass --known-hosts FILE") from exc
            self.load_count = 1

    def known_for(self, name: str) -> dict[str, paramiko.PKey]:
        with self._lock:
            found = self._keys.lookup(name)
            return dict(found) if found else {}

    def seed(self, client: paramiko.SSHClient, host: str, port: int) -> None:
        """Give a client the keys known for this host, so paramiko prefers their types
        and raises BadHostKeyException on a mismatch itself."""
        name = entry_name(host, port)
        store = client.get_host_keys()
        for keytype, key in self.known_for(name).items():
            store.add(name, keytype, key)

    def policy(self) -> paramiko.MissingHostKeyPolicy:
        return _Policy(self)

    def record(self, name: str, key: paramiko.PKey) -> None:
        with self._lock:
            self._keys.add(name, key.get_name(), key)
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with open(self.path, "a", encoding="ascii") as fh:
                fh.write(f"{name} {key.get_name()} {key.get_base64()}\n")

    def unknown_error(self, name: str, key: paramiko.PKey) -> HostKeyError:
        host, port = _split_entry(name)
        known_types = sorted(self.known_for(name))
        scan = f"ssh-keyscan -p {port} {shlex.quote(host)} >> {shlex.quote(str(self.path))}"
        if known_types:
            msg = (f"host key of {name} is a {key.get_name()} key ({fingerprint(key)}), but known_hosts "
                   f"({self.path}) only lists {', '.join(known_types)} keys for it")
        else:
            msg = f"unknown host key for {name}: {key.get_name()} {fingerprint(key)} (not in {self.path})"
        return HostKeyError(msg, hint=f"verify the fingerprint, then rerun with --accept-new or run: {scan}",
                            host=name, stage="host-key")

    def changed_error(self, name: str, key: paramiko.PKey, expected: paramiko.PKey | None) -> HostKeyError:
        was = f" (known_hosts has {fingerprint(expected)})" if expected is not None else ""
        return HostKeyError(
            f"HOST KEY CHANGED for {name}: server offers {key.get_name()} {fingerprint(key)}{was}; "
            "refusing to connect (possible man-in-the-middle)",
            hint=f"if the host was really reinstalled: ssh-keygen -R {shlex.quote(name)} -f "
                 f"{shlex.quote(str(self.path))}",
            host=name, stage="host-key")


class _Policy(paramiko.MissingHostKeyPolicy):
    def __init__(self, known: KnownHosts) -> None:
        self.known = known

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        known = self.known.known_for(hostname)
        if known.get(key.get_name()) is not None and known[key.get_name()] != key:
            raise self.known.changed_error(hostname, key, known[key.get_name()])
        if known or not self.known.accept_new:
            # accept-new, like OpenSSH, only adds keys for hosts it has never seen.
            raise self.known.unknown_error(hostname, key)
        self.known.record(hostname, key)
