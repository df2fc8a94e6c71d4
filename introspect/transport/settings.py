"""Transport-neutral connection settings: what the flags and the inventory say, resolved.

The CLI layers flags > host entry > inventory defaults > built-in defaults into one
:class:`ConnectionSettings`; every executor class builds itself from it
(``from_settings``), taking the fields that mean something to its transport and
ignoring the rest.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from introspect.errors import InputError

if TYPE_CHECKING:  # paramiko is imported only by the transports that use it
    from introspect.transport.hostkeys import KnownHosts
    from introspect.transport.hostspec import HostSpec

DEFAULT_CONNECT_TIMEOUT = 5.0  # like ssh -o ConnectTimeout=5
DEFAULT_BANNER_TIMEOUT = 10.0
DEFAULT_AUTH_TIMEOUT = 15.0


@dataclass(frozen=True)
class ConnectionSettings:
    """Where and how to reach one target.

    ``host``/``port``/``user`` are the SSH destination (or, for container schemes, what
    the URL names); ``spec`` is the whole parsed URL (container, pod, namespace, query
    parts such as ``?user=``, ``?context=``, ``?via=``), which container transports read
    in their ``from_settings``. ``host_keys`` is a known_hosts already loaded for the
    whole run, shared by every connection; ``None`` makes an SSH transport load
    ``known_hosts`` itself. ``connect_timeout`` None: the transport's default (OpenSSH:
    the ssh_config's ConnectTimeout, else 5 s).
    """

    scheme: str = "local"
    host: str | None = None
    port: int | None = None
    user: str | None = None
    identity: str | None = None
    jump: str | None = None
    ssh_config: str | None = None  # None: ~/.ssh/config and /etc/ssh/ssh_config
    passphrase_env: str | None = None  # name of the env var holding the key's passphrase
    connect_timeout: float | None = None
    banner_timeout: float = DEFAULT_BANNER_TIMEOUT
    auth_timeout: float = DEFAULT_AUTH_TIMEOUT
    known_hosts: str | None = None  # None: ~/.ssh/known_hosts
    accept_new: bool = False
    host_keys: KnownHosts | None = field(default=None, compare=False)
    spec: HostSpec | None = None
    ssh_options: tuple[str, ...] = ()  # openssh: -o KEY=VALUE words (--ssh-option)
    control_persist: str | None = None  # openssh: keep the master this long (--control-persist)


def checked_identity(path: str | None) -> str | None:
    """An explicit key file (``--identity``, ``identity:`` in the inventory) must be a readable
    file: a typo would otherwise surface as a network error or a refused login."""
    if not path:
        return None
    if not os.path.exists(path):
        raise InputError(f"identity file {path} does not exist",
                         hint="# check the path given to --identity (or `identity:` in the inventory)")
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise InputError(f"identity file {path} is not a readable file",
                         hint="# pass the private key file itself (e.g. ~/.ssh/id_ed25519), readable by you")
    return path
