"""paramiko's client side as the ssh executor uses it: the login client and a channel as a process.

:class:`FleetSSHClient` is paramiko's ``SSHClient`` with the run's identity files read once, not
once per host.

For each ``key_filename`` paramiko's ``SSHClient._auth`` tries the key classes in turn (RSA,
ECDSA, Ed25519) and ``_key_from_filepath`` reads and parses the file for each try, so an
Ed25519 key is read three times per login, twice to fail
(https://github.com/paramiko/paramiko/blob/5.1.0/paramiko/client.py#L686-L703). A fleet logs in
with the same few files to every host: :class:`FleetSSHClient` keeps each try's outcome, the
key or the error, per file, class and passphrase while the key file and its ``-cert.pub`` are
unchanged, and replays it. The order of tries, the errors and the certificate loading stay
paramiko's own; only the repeated reads go. A loaded key is only read after loading (signing),
which its libraries do safely from several threads.

Once a file's key has loaded, the next logins hand it to paramiko as ``pkey``, which ``_auth``
tries before the files, and the other files as ``key_filename``: the same keys in the same order,
without the failing tries of the other key classes. Each of those raised an exception that
``_auth`` keeps (``saved_exception``) while its traceback holds the frames of the whole login, up
to the fleet worker's: a reference cycle that kept every host's reply alive until the cyclic
collector ran (measured: about 190 lists and dicts per host).
"""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

from introspect.errors import ConnectionLost
from introspect.transport.base import RemoteProcess
from introspect.transport.paramiko_lib import paramiko
from introspect.transport.ssh_config import file_stamp

CERT_SUFFIX = "-cert.pub"  # paramiko's cert_suffix in _key_from_filepath
_MAX = 256  # distinct (file, class, passphrase) tries remembered; a run uses a handful

_DRAIN_POLL_S = 0.25  # a bound on a missed wake-up, never the pace: data and closes set the event
_lock = threading.Lock()
_tries: dict[tuple[Any, ...], paramiko.PKey | Exception] = {}
_loaded: dict[tuple[Any, ...], paramiko.PKey] = {}  # (file, passphrase, stamps) -> the key it loaded


def _paramiko_load(client: paramiko.SSHClient, filename: str, klass: type[paramiko.PKey],
                   password: str | None) -> paramiko.PKey:
    key: paramiko.PKey = paramiko.SSHClient._key_from_filepath(  # type: ignore[attr-defined]  # private, not in the stubs
        client, filename, klass, password)
    return key


def _stamps(filename: str) -> tuple[tuple[int, int, int] | None, tuple[int, int, int] | None]:
    """The key file's and its certificate's stamps (paramiko's pairing in _key_from_filepath)."""
    key_path = filename[:-len(CERT_SUFFIX)] if filename.endswith(CERT_SUFFIX) else filename
    cert_path = filename if filename.endswith(CERT_SUFFIX) else filename + CERT_SUFFIX
    return file_stamp(key_path), file_stamp(cert_path)


class FleetSSHClient(paramiko.SSHClient):
    """``paramiko.SSHClient`` whose key-file loads are shared by the process (module docstring)."""

    def connect(self, *args: Any, **kwargs: Any) -> None:
        files = kwargs.get("key_filename")
        if kwargs.get("pkey") is None and isinstance(files, list) and files:
            passphrase = kwargs.get("passphrase")
            passphrase = kwargs.get("password") if passphrase is None else passphrase  # as _auth does
            with _lock:
                key = _loaded.get((files[0], passphrase, _stamps(files[0])))
            if key is not None:
                kwargs = {**kwargs, "pkey": key, "key_filename": files[1:] or None}
        super().connect(*args, **kwargs)

    def _key_from_filepath(self, filename: str, klass: type[paramiko.PKey], password: str | None) -> paramiko.PKey:
        stamp = _stamps(filename)
        if stamp[0] is None:  # no file: paramiko's own error, uncached
            return _paramiko_load(self, filename, klass, password)
        memo = (filename, klass, password, stamp)
        with _lock:
            found = _tries.get(memo)
        if found is None:
            try:
                found = _paramiko_load(self, filename, klass, password)
            except (paramiko.SSHException, ValueError) as exc:  # the classes paramiko's _auth goes past
                found = exc
            with _lock:
                if len(_tries) >= _MAX:
                    _tries.clear()
                _tries[memo] = found
        if isinstance(found, Exception):
            raise copy.copy(found).with_traceback(None)  # a fresh one per login: threads raise it at once
        with _lock:
            if len(_loaded) >= _MAX:
                _loaded.clear()
            _loaded[(filename, password, stamp)] = found
        return found


class SSHProcess(RemoteProcess):
    def __init__(self, channel: paramiko.Channel, transport: paramiko.Transport, label: str) -> None:
        self._channel = channel
        self._transport = transport
        self._label = label

    def write_stdin(self, data: bytes) -> None:
        try:
            self._channel.sendall(data)
        except (OSError, EOFError, paramiko.SSHException):
            pass  # the command died at once; its stderr and exit status say why

    def read_stdout(self) -> bytes:
        return self._channel.recv(65536)

    def read_stderr(self) -> bytes:
        return self._channel.recv_stderr(65536)

    drains_in_caller = True

    def drain(self, out: list[bytes], err: list[bytes], deadline: float) -> bool:
        """Both streams read here, not by two threads per exec (each started, switched to and
        joined: a fleet's thousands of them contend for the interpreter lock). paramiko sets one
        event for data or a close on either stream (``BufferedPipe.set_event``, as its own
        ``Channel.fileno`` does); each read that empties a stream clears it, so both are looked
        at again after every read and the wait is bounded."""
        channel = self._channel
        ready = threading.Event()
        channel.in_buffer.set_event(ready)
        channel.in_stderr_buffer.set_event(ready)
        while True:
            got = False
            if channel.recv_ready():
                out.append(channel.recv(65536))
                got = True
            if channel.recv_stderr_ready():
                err.append(channel.recv_stderr(65536))
                got = True
            if got:
                continue
            if channel.eof_received or channel.closed:
                # Set after the last data was fed: what came just before it is read first.
                if channel.recv_ready() or channel.recv_stderr_ready():
                    continue
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            ready.wait(min(remaining, _DRAIN_POLL_S))

    def wait(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while not self._channel.exit_status_ready():
            if not self._transport.is_active():
                raise ConnectionLost("the SSH connection dropped while a probe was running",
                                     hint="# check that the host and its sshd are up, then rerun",
                                     host=self._label, stage="probe")
            if time.monotonic() > deadline:
                return None
            self._channel.status_event.wait(0.25)  # set by the exit status or the close: no 50 Hz poll per channel
        status = self._channel.recv_exit_status()
        if status == -1:
            # paramiko's "closed without an exit status": the session or the whole
            # connection died under us. Give the transport a moment to notice which.
            for _ in range(50):
                if not self._transport.is_active():
                    break
                time.sleep(0.02)
            raise ConnectionLost("the SSH session ended without an exit status (sshd or the host went away)",
                                 hint="# check that the host and its sshd are up, then rerun",
                                 host=self._label, stage="probe")
        return status

    def kill(self) -> None:
        # Closing the channel closes the remote stdin: the probe's watchdog then
        # kills its task group and removes its temp dir.
        try:
            self._channel.close()
        except Exception:  # noqa: BLE001 - closing a dead channel must never fail a run
            pass


__all__ = ["FleetSSHClient", "SSHProcess"]
