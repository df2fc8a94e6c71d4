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
``settings_for_spec(spec, **connection)``
    a parsed host spec (:func:`introspect.transport.hostspec.parse_host`, the one
    parser) plus connection flags, as :class:`ConnectionSettings`.

What a transport's class must implement (a subclass of
:class:`introspect.transport.base.Executor`):

- ``from_settings(cls, settings: ConnectionSettings) -> Executor``: build itself from
  the resolved settings, using the fields that mean something to it (``settings.spec``
  is the parsed URL: container, pod, namespace and query parts);
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

import dataclasses
import importlib
from typing import TYPE_CHECKING, Any

from introspect.errors import UsageError
from introspect.transport.base import Executor
from introspect.transport.settings import ConnectionSettings

if TYPE_CHECKING:
    from introspect.transport.hostspec import HostSpec

TRANSPORTS: dict[str, str] = {
    "ssh": "introspect.transport.ssh:SSHExecutor",
    "openssh": "introspect.transport.openssh:OpenSSHExecutor",
    "docker": "introspect.transport.containers:DockerExecutor",
    "podman": "introspect.transport.containers:PodmanExecutor",
    "kubectl": "introspect.transport.containers:KubectlExecutor",
    "lxc": "introspect.transport.containers:LxcExecutor",
    "pct": "introspect.transport.containers:PctExecutor",
    "local": "introspect.transport.local:LocalExecutor",
}
DEFAULT_REMOTE_SCHEME = "ssh"


def schemes() -> tuple[str, ...]:
    return tuple(TRANSPORTS)


def executor_class(scheme: str) -> type[Executor]:
    target = TRANSPORTS.get(scheme)
    if target is None:
        raise UsageError(f"unknown transport {scheme!r} (known: {', '.join(schemes())})",
                         hint=f"# write the host as {'://HOST, '.join(schemes())}://HOST, or a plain host name")
    module_name, _, attribute = target.partition(":")
    cls = getattr(importlib.import_module(module_name), attribute)
    if not (isinstance(cls, type) and issubclass(cls, Executor)):
        raise TypeError(f"{target} is not an Executor subclass")
    return cls


def create_executor(settings: ConnectionSettings) -> Executor:
    """The executor for ``settings.scheme``, built from ``settings``."""
    return executor_class(settings.scheme).from_settings(settings)


def settings_for_spec(spec: HostSpec, base: ConnectionSettings | None = None, **over: Any) -> ConnectionSettings:
    """``base`` (the connection flags) pointed at ``spec``: the scheme and host from the URL; port and
    user from ``base`` when it sets them (flags win), else from the URL; a bare name means ``ssh``."""
    base = base or ConnectionSettings()
    return dataclasses.replace(base, scheme=spec.scheme or DEFAULT_REMOTE_SCHEME, host=spec.host or base.host,
                               port=base.port or spec.port, user=base.user or spec.user, spec=spec, **over)
