"""Scheme name -> executor class: the one place executors are made.

A host spec names its transport by scheme (``ssh://gpu-a1``, ``local://``); a bare
name (an address, an ``~/.ssh/config`` alias or an inventory entry) means ``ssh``,
and no host at all means ``local``. Classes are imported only when their scheme is
used, so a local probe never pays for paramiko.

Registry API
------------
``TRANSPORTS``
    scheme -> ``"module:Class"``. One line per transport.
``executor_class(scheme)``
    the class, imported on first use; an unknown scheme is a :class:`UsageError`.
``create_executor(settings)``
    ``executor_class(settings.scheme).from_settings(settings)``: the only factory.
``split_host_spec(spec)``
    ``(scheme, host, port, user, options)`` of a ``--host`` value.

What a transport's class must implement (a subclass of
:class:`introspect.transport.base.Executor`):

- ``from_settings(cls, settings: ConnectionSettings) -> Executor``: build itself from
  the resolved settings, using the fields that mean something to it;
- ``__init__`` calls ``super().__init__(Target(scheme, host, port, user, label))``;
- ``_spawn(argv) -> RemoteProcess``: start ``argv`` (a list, never a shell line) with
  stdin, stdout and stderr piped; its ``kill()`` closes stdin, which makes the remote
  watchdog kill the task's process group;
- optionally ``connect()`` / ``close()`` (open and drop a connection; ``close`` must
  call ``super().close()``) and ``connections_opened``;
- translate its library's exceptions into :mod:`introspect.errors` inside its module.

Adding a transport is then: its module, one line in ``TRANSPORTS``, and one
parameter in ``tests/transport/test_executors.py``'s executor fixture (the contract
tests run over every registered scheme and fail for a scheme without one).
"""

from __future__ import annotations

import importlib
import urllib.parse
from dataclasses import dataclass, field

from introspect.errors import UsageError
from introspect.transport.base import Executor
from introspect.transport.settings import ConnectionSettings

TRANSPORTS: dict[str, str] = {
    "local": "introspect.transport.local:LocalExecutor",
    "ssh": "introspect.transport.ssh:SSHExecutor",
}
DEFAULT_REMOTE_SCHEME = "ssh"


def schemes() -> tuple[str, ...]:
    return tuple(TRANSPORTS)


def executor_class(scheme: str) -> type[Executor]:
    target = TRANSPORTS.get(scheme)
    if target is None:
        raise UsageError(f"unknown transport {scheme!r} (known: {', '.join(schemes())})",
                         hint=f"write the host as {'://HOST, '.join(schemes())}://HOST, or a plain host name")
    module_name, _, attribute = target.partition(":")
    cls = getattr(importlib.import_module(module_name), attribute)
    if not (isinstance(cls, type) and issubclass(cls, Executor)):
        raise TypeError(f"{target} is not an Executor subclass")
    return cls


def create_executor(settings: ConnectionSettings) -> Executor:
    """The executor for ``settings.scheme``, built from ``settings``."""
    return executor_class(settings.scheme).from_settings(settings)


@dataclass(frozen=True)
class HostSpec:
    """A ``--host`` value taken apart: ``scheme://[user@]host[:port][?key=value]``."""

    scheme: str
    host: str | None
    port: int | None = None
    user: str | None = None
    options: dict[str, str] = field(default_factory=dict)


def split_host_spec(spec: str | None) -> HostSpec:
    """No spec: local. A bare name: SSH to it (address, ssh_config alias, inventory name)."""
    if not spec:
        return HostSpec("local", None)
    if "://" not in spec:
        return HostSpec(DEFAULT_REMOTE_SCHEME, spec)
    parts = urllib.parse.urlsplit(spec)
    executor_class(parts.scheme)  # an unknown scheme is a usage error before anything connects
    try:
        port = parts.port
    except ValueError:
        raise UsageError(f"--host {spec!r}: the port is not a number in 1..65535",
                         hint="write scheme://[user@]host[:port]") from None
    # Not parts.hostname: it lowercases, and container and pod names are case-sensitive.
    host = parts.netloc.rpartition("@")[2]
    host = host[1:].partition("]")[0] if host.startswith("[") else host.partition(":")[0]
    path = parts.path.strip("/")  # kubectl://NAMESPACE/POD keeps what follows the host
    options = dict(urllib.parse.parse_qsl(parts.query))
    if path:
        options.setdefault("path", urllib.parse.unquote(path))
    return HostSpec(parts.scheme, urllib.parse.unquote(host) or None, port,
                    urllib.parse.unquote(parts.username) if parts.username else None, options)
