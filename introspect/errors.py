"""One exception tree for everything a user can hit.

Every error carries the host and stage it happened at and a hint naming the
fix; the CLI prints ``error: <message>`` and ``fix: <hint>`` and exits with
``exit_code``. Library exceptions (paramiko, socket, OS) are translated into
these at one boundary each (``transport/ssh.py``, ``transport/local.py``) and
never escape past it.
"""

from __future__ import annotations

from introspect.redact import scrub

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3


class IntrospectError(Exception):
    """Root of introspect's errors. ``str()`` is the one-line message."""

    exit_code = EXIT_FINDINGS

    def __init__(self, message: str, *, hint: str | None = None, host: str | None = None,
                 stage: str | None = None) -> None:
        message, hint = scrub(message), scrub(hint)  # no secret in any error, wherever it is shown
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.host = host
        self.stage = stage

    def one_line(self) -> str:
        where = f"{self.host}: " if self.host else ""
        stage = f"[{self.stage}] " if self.stage else ""
        return f"{where}{stage}{self.message}".replace("\n", " ")

    def as_dict(self) -> dict[str, str | None]:
        return {"type": type(self).__name__, "message": self.message, "hint": self.hint,
                "host": self.host, "stage": self.stage}


class UsageError(IntrospectError):
    """Bad flags, bad inventory, bad model path: the user must change the command."""

    exit_code = EXIT_USAGE


class ClientNotFound(UsageError):
    """The client program a transport needs is not installed (exit 2: fix this machine, not the target)."""


class ModelPathError(UsageError, FileNotFoundError):
    """The model directory is missing, not a directory, or not a model directory."""


class InputError(UsageError, ValueError):
    """A file given to introspect (saved profile, raw facts) cannot be used."""


class ConnectError(IntrospectError, ConnectionError):
    """The host could not be reached or would not let us in (exit 3)."""

    exit_code = EXIT_UNREACHABLE


class HostUnreachable(ConnectError):
    """TCP connect refused, timed out, name not resolved, banner never came."""


class AuthenticationFailed(ConnectError):
    """sshd refused every key/agent identity offered."""


class HostKeyError(ConnectError):
    """The host key is unknown (and not accepted) or has changed."""


class ConnectionLost(ConnectError):
    """The connection dropped while a probe was running."""


class RemoteError(IntrospectError):
    """The remote side ran but could not produce a usable reply."""


class InterpreterError(RemoteError):
    """The target Python is missing, too old, or not executable."""

    exit_code = EXIT_USAGE


class ProbeTimeout(RemoteError, TimeoutError):
    """A probe ran past its deadline and was killed."""


class ProtocolError(RemoteError):
    """The reply was not one framed JSON document of our protocol version."""
