"""known_hosts checking, strict by default, loaded once per run.

paramiko's ``SSHClient`` would accept whatever an AutoAddPolicy says
(everything). Here an unknown key is refused with its fingerprint and the
command that accepts it, ``accept_new`` records new keys like OpenSSH's
``StrictHostKeyChecking=accept-new``, and a changed key is always refused.
The files are parsed once (OpenSSH's rules: see known_hosts_file.py) and shared by
every connection of the run (parsing a big known_hosts per host is what makes some
fleet tools slow). ``@revoked`` keys are refused for good.

paramiko is imported only where a key is turned into a paramiko key or a config is read
with its parser (from ``paramiko_lib``, which keeps invoke out): a fleet over the openssh
transport loads these files without it.
"""

from __future__ import annotations

import base64
import errno
import functools
import hashlib
import os
import shlex
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from introspect.errors import HostKeyError, InputError
from introspect.transport.known_hosts_file import HASH_MAGIC, KnownHostLine, parse_line, read_known_hosts

if TYPE_CHECKING:
    import paramiko


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


# OpenSSH's defaults for UserKnownHostsFile and GlobalKnownHostsFile (ssh_config(5)).
USER_FILES = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
GLOBAL_FILES = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")


SSH_CONFIG_FILES = ("~/.ssh/config", "/etc/ssh/ssh_config")


def files_from_ssh_config(host: str | None, ssh_config: str | None = None
                          ) -> tuple[list[str] | None, list[str] | None]:
    """``UserKnownHostsFile`` and ``GlobalKnownHostsFile`` that ssh_config sets for ``host``
    (paramiko's lookup; ``*`` when no one host is meant), None where it sets none."""
    from introspect.transport.ssh_config import Resolver, load_config, split_hop

    try:
        # The lookup checks the name (a bare `[user@]host[:port]` is looked up by its host, as
        # the ssh transport does); a name it refuses is reported by that transport.
        found = Resolver(*load_config(ssh_config)).lookup(split_hop(host)[1] if host else "*")
    except Exception:  # noqa: BLE001 - a config paramiko cannot read: the ssh transport reports it when it connects
        return None, None

    def files(key: str) -> list[str] | None:
        value = found.get(key)
        words = value.split() if isinstance(value, str) else list(value or [])
        return [os.path.expanduser(word) for word in words if word.lower() != "none"] or None

    return files("userknownhostsfile"), files("globalknownhostsfile")


class KnownHosts:
    """The known_hosts files of one run, parsed once and shared by all its connections.

    ``path`` (``--known-hosts``) replaces the user files, as ``UserKnownHostsFile`` does;
    new keys (``accept_new``) are written to the first user file. The global files are
    read too, as OpenSSH reads them. Lines paramiko cannot use are skipped with a warning
    in ``warnings`` (file and line), never an error.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, accept_new: bool = False,
                 user_files: Sequence[str | os.PathLike[str]] | None = None,
                 global_files: Sequence[str | os.PathLike[str]] | None = None) -> None:
        users = [path] if path else list(user_files or USER_FILES)
        self.files = [Path(p).expanduser() for p in users]
        self.path = self.files[0]
        self.files += [Path(p).expanduser() for p in (GLOBAL_FILES if global_files is None else global_files)]
        self.accept_new = accept_new
        self._lock = threading.Lock()
        self.lines: list[KnownHostLine] = []
        # A fleet's known_hosts holds a line per host: scanning all of them for each host made a
        # run quadratic (1.75 ms per host at 1,000). Lines whose patterns are all plain names are
        # found by name; only wildcard, negated and hashed ones are scanned, as OpenSSH does.
        self._by_name: dict[str, list[int]] = {}
        self._scanned: list[int] = []
        self.warnings: list[str] = []
        self._noted: set[str] = set()
        for file in self.files:
            lines, warnings = read_known_hosts(file)
            for line in lines:
                self._add(line)
            self.warnings += warnings
        self.load_count = 1 if any(file.exists() for file in self.files) else 0

    def _add(self, line: KnownHostLine) -> None:
        index = len(self.lines)
        self.lines.append(line)
        if any(p.startswith(("!", HASH_MAGIC)) or any(c in p for c in "*?") for p in line.patterns):
            self._scanned.append(index)
            return
        for pattern in {p.lower() for p in line.patterns}:
            self._by_name.setdefault(pattern, []).append(index)

    def _matching(self, name: str, marker: str) -> list[KnownHostLine]:
        with self._lock:
            found = self._by_name.get(name.lower(), [])
            scanned = [i for i in self._scanned if self.lines[i].matches(name)]
            return [self.lines[i] for i in sorted({*found, *scanned}) if self.lines[i].marker == marker]

    def known_for(self, name: str) -> dict[str, paramiko.PKey]:
        """The plain (not revoked) keys known for ``name``, by key type."""
        from introspect.transport.paramiko_lib import paramiko

        revoked = {line.blob for line in self._matching(name, "@revoked")}
        out: dict[str, paramiko.PKey] = {}
        for line in self._matching(name, ""):
            if line.blob in revoked or line.keytype in out:
                continue
            try:
                out[line.keytype] = paramiko.PKey.from_type_string(line.keytype, line.blob)
            except (paramiko.SSHException, ValueError, TypeError):
                self._note(line.where, f"{line.where}: paramiko cannot use a {line.keytype} key, line skipped")
        return out

    def revoked_line(self, name: str, key: paramiko.PKey) -> KnownHostLine | None:
        blob = key.asbytes()
        return next((line for line in self._matching(name, "@revoked") if line.blob == blob), None)

    def _note(self, once_key: str, warning: str) -> None:
        with self._lock:
            if once_key not in self._noted:
                self._noted.add(once_key)
                self.warnings.append(warning)

    def seed(self, client: paramiko.SSHClient, host: str, port: int) -> None:
        """Give a client the keys known for this host, so paramiko prefers their types
        and raises BadHostKeyException on a mismatch itself."""
        name = entry_name(host, port)
        for line in self._matching(name, "@cert-authority"):
            # paramiko has no host-certificate verification
            # (https://github.com/paramiko/paramiko/issues/771): the plain key lines decide.
            self._note(line.where, f"{line.where}: @cert-authority line for {name} not verified (paramiko "
                                   "cannot check host certificates); the host's plain key lines are used")
        store = client.get_host_keys()
        for keytype, key in self.known_for(name).items():
            store.add(name, keytype, key)

    def policy(self) -> paramiko.MissingHostKeyPolicy:
        return _policy_class()(self)

    def record(self, name: str, key: paramiko.PKey) -> None:
        with self._lock:
            line = f"{name} {key.get_name()} {key.get_base64()}"
            try:
                self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                with open(self.path, "a", encoding="ascii") as fh:
                    fh.write(line + "\n")
            except OSError as exc:
                # Raised inside paramiko's connect: left as an OSError it read as a network failure.
                raise self.unwritable_error(name, key, exc) from None
            parsed, _ = parse_line(line, str(self.path), 0)
            if parsed is not None:
                self._add(parsed)

    def unwritable_error(self, name: str, key: paramiko.PKey, exc: OSError) -> InputError:
        """--accept-new could not write the new key: the file named, the key not trusted unrecorded
        (the next run would accept whatever key it is then offered)."""
        why = {errno.EROFS: "is on a read-only file system", errno.ENOTDIR: "has a parent that is not a directory",
               errno.EEXIST: "has a parent that is not a directory", errno.EACCES: "is not writable by this user",
               errno.EPERM: "is not writable by this user", errno.ENOSPC: "is on a full file system",
               errno.EISDIR: "is a directory"}.get(exc.errno or 0, f"cannot be written ({exc.strerror or exc})")
        host, port = _split_entry(name)
        # Another file to keep the key in: the user's own, unless that is the one that failed.
        default = Path(USER_FILES[0]).expanduser()
        writable = USER_FILES[0] if self.path != default else "~/introspect_known_hosts"
        return InputError(
            f"cannot record the new host key of {name} ({key.get_name()} {fingerprint(key)}) for --accept-new: "
            f"known_hosts {self.path} {why}",
            hint=f"ssh-keyscan -p {port} {shlex.quote(host)} >> {writable}  # then verify it and rerun with "
                 f"--known-hosts {writable} (a file this user can write)",
            host=name, stage="host-key")

    def revoked_error(self, name: str, key: paramiko.PKey, line: KnownHostLine) -> HostKeyError:
        return HostKeyError(
            f"host key of {name} ({key.get_name()} {fingerprint(key)}) is marked @revoked in {line.where}; "
            "refusing to connect",
            hint="# ask the host's admin for its new key; never remove the @revoked line to get in",
            host=name, stage="host-key")

    def unknown_error(self, name: str, key: paramiko.PKey) -> HostKeyError:
        host, port = _split_entry(name)
        known_types = sorted(self.known_for(name))
        scan = f"ssh-keyscan -p {port} {shlex.quote(host)} >> {shlex.quote(str(self.path))}"
        if known_types:
            msg = (f"host key of {name} is a {key.get_name()} key ({fingerprint(key)}), but known_hosts "
                   f"({self.path}) only lists {', '.join(known_types)} keys for it")
        else:
            msg = f"unknown host key for {name}: {key.get_name()} {fingerprint(key)} (not in {self.path})"
            if self._matching(name, "@cert-authority"):
                msg += ("; a @cert-authority line matches, but paramiko cannot verify host certificates "
                        "(use --host openssh://... or add the host's plain key)")
        return HostKeyError(msg, hint=f"{scan}  # once the fingerprint is verified (or rerun with --accept-new)",
                            host=name, stage="host-key")

    def changed_error(self, name: str, key: paramiko.PKey, expected: paramiko.PKey | None) -> HostKeyError:
        revoked = self.revoked_line(name, key)
        if revoked is not None:
            return self.revoked_error(name, key, revoked)
        was = f" (known_hosts has {fingerprint(expected)})" if expected is not None else ""
        return HostKeyError(
            f"HOST KEY CHANGED for {name}: server offers {key.get_name()} {fingerprint(key)}{was}; "
            "refusing to connect (possible man-in-the-middle)",
            hint=f"ssh-keygen -R {shlex.quote(name)} -f {shlex.quote(str(self.path))}  # only if the host "
                 "was really reinstalled",
            host=name, stage="host-key")


@functools.cache
def _policy_class() -> Callable[[KnownHosts], paramiko.MissingHostKeyPolicy]:
    """The missing-key policy, a paramiko class: defined on first use, when paramiko connects."""
    from introspect.transport.paramiko_lib import paramiko

    class _Policy(paramiko.MissingHostKeyPolicy):
        def __init__(self, known: KnownHosts) -> None:
            self.known = known

        def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
            revoked = self.known.revoked_line(hostname, key)
            if revoked is not None:
                raise self.known.revoked_error(hostname, key, revoked)
            known = self.known.known_for(hostname)
            if known.get(key.get_name()) is not None and known[key.get_name()] != key:
                raise self.known.changed_error(hostname, key, known[key.get_name()])
            if known or not self.known.accept_new:
                # accept-new, like OpenSSH, only adds keys for hosts it has never seen.
                raise self.known.unknown_error(hostname, key)
            self.known.record(hostname, key)

    return _Policy
