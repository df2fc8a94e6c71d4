"""Connection flags shared by every command, and turning them into an executor.

Settings come in layers (invoke-style): CLI flags > the host's entry in the
inventory > the inventory's defaults > built-in defaults (connect 5 s,
strict host keys).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from introspect.errors import UsageError
from introspect.transport.base import Executor
from introspect.transport.registry import create_executor, split_host_spec
from introspect.transport.settings import (
    DEFAULT_AUTH_TIMEOUT,
    DEFAULT_BANNER_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
    ConnectionSettings,
)

if TYPE_CHECKING:  # imported where used: a local probe never pays for paramiko, fabric or yaml
    from introspect.inventory import HostEntry, Inventory
    from introspect.transport.hostkeys import KnownHosts


def connection_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add the SSH flags every remote command takes."""
    options = [
        click.option("--host", "-H", help="Host address, ~/.ssh/config alias, hosts.yaml entry name, or "
                     "SCHEME://[user@]host[:port]. Omit to run on this machine."),
        click.option("--port", "-p", type=int, help="SSH port (default: ssh_config, else 22)."),
        click.option("--user", "-u", help="SSH user (default: ssh_config, else the local user)."),
        click.option("--identity", "-i", type=click.Path(dir_okay=False),
                     help="Private key file (agent keys and ~/.ssh keys are tried too)."),
        click.option("--jump", "-J", help="ProxyJump host ([user@]host[:port]); ssh_config ProxyJump works too."),
        click.option("--known-hosts", type=click.Path(dir_okay=False),
                     help="known_hosts file to check host keys against (default ~/.ssh/known_hosts)."),
        click.option("--accept-new", is_flag=True,
                     help="Record keys of never-seen hosts (like StrictHostKeyChecking=accept-new). "
                          "A changed key is always refused."),
        click.option("--ssh-config", type=click.Path(dir_okay=False),
                     help="ssh_config file to read instead of ~/.ssh/config and /etc/ssh/ssh_config."),
        click.option("--connect-timeout", type=float, default=None,
                     help="Seconds for the TCP connect (default 5, like ssh -o ConnectTimeout=5)."),
        click.option("--banner-timeout", type=float, default=None,
                     help="Seconds to wait for the SSH banner after connecting (default 10)."),
        click.option("--auth-timeout", type=float, default=None,
                     help="Seconds for SSH authentication (default 15)."),
        click.option("--hosts", "hosts_file", type=click.Path(dir_okay=False),
                     help="Inventory file (default ./hosts.yaml when present) for --host entry names."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@dataclass(frozen=True)
class ConnectionFlags:
    host: str | None
    port: int | None
    user: str | None
    identity: str | None
    jump: str | None
    known_hosts: str | None
    accept_new: bool
    ssh_config: str | None
    connect_timeout: float | None
    hosts_file: str | None
    banner_timeout: float | None = None
    auth_timeout: float | None = None

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any]) -> ConnectionFlags:
        names = cls.__dataclass_fields__
        return cls(**{name: kwargs.pop(name) for name in list(names)})


def load_inventory_for(flags_file: str | None, *, required: bool = False) -> Inventory | None:
    """The inventory named by --hosts, else ./hosts.yaml when present (never read implicitly
    from anywhere else)."""
    path = flags_file or ("hosts.yaml" if Path("hosts.yaml").is_file() else None)
    if path is None:
        if required:
            raise UsageError("no inventory: pass --hosts FILE", hint="see hosts.yaml in the README")
        return None
    from introspect.inventory import InventoryError, load_inventory

    try:
        return load_inventory(path)
    except InventoryError as exc:
        raise UsageError(str(exc), hint="fix the inventory file (see the README's hosts.yaml section)") from None
    except OSError as exc:
        raise UsageError(f"cannot read inventory {path}: {exc.strerror}", hint="check --hosts") from None


def find_entry(inventory: Inventory | None, name: str | None) -> HostEntry | None:
    if inventory is None or not name:
        return None
    return next((h for h in inventory.hosts if h.name == name), None)


def connection_settings(flags: ConnectionFlags, entry: HostEntry | None, inventory: Inventory | None,
                        host_keys: KnownHosts | None = None) -> ConnectionSettings:
    """Flags > the host spec > the host's entry > the inventory's defaults > built-in defaults."""
    spec = split_host_spec(entry.address if entry else flags.host)
    # Inventory defaults belong to inventory entries; a plain address uses ssh_config only.
    defaults = inventory.defaults if inventory and entry else None
    return ConnectionSettings(
        scheme=spec.scheme,
        host=spec.host,
        port=flags.port or spec.port or (entry.port if entry else None) or (defaults.port if defaults else None),
        user=flags.user or spec.user or (entry.user if entry else None) or (defaults.user if defaults else None),
        identity=_expand(flags.identity or (entry.identity if entry else None)
                         or (defaults.identity if defaults else None)),
        jump=flags.jump or (entry.jump if entry else None),
        connect_timeout=flags.connect_timeout or (defaults.connect_timeout if defaults else None)
        or DEFAULT_CONNECT_TIMEOUT,
        banner_timeout=flags.banner_timeout or DEFAULT_BANNER_TIMEOUT,
        auth_timeout=flags.auth_timeout or DEFAULT_AUTH_TIMEOUT,
        ssh_config=_expand(flags.ssh_config),
        passphrase_env=(entry.passphrase_env if entry else None)
        or (defaults.passphrase_env if defaults else None),
        known_hosts=_expand(flags.known_hosts or (inventory.defaults.known_hosts if inventory else None)),
        accept_new=flags.accept_new,
        host_keys=host_keys,
        options=spec.options,
    )


def known_hosts_for(flags: ConnectionFlags, inventory: Inventory | None) -> KnownHosts:
    """known_hosts loaded once, to be shared by every connection of a run."""
    from introspect.transport.hostkeys import KnownHosts

    path = flags.known_hosts or (inventory.defaults.known_hosts if inventory else None)
    return KnownHosts(_expand(path), accept_new=flags.accept_new)


def _expand(path: str | None) -> str | None:
    return os.path.expanduser(path) if path else None


def executor_for(flags: ConnectionFlags, inventory: Inventory | None,
                 known_hosts: KnownHosts | None = None) -> tuple[Executor, HostEntry | None]:
    """The executor for ``--host`` (its scheme's transport), or the local one when no host is given."""
    entry = find_entry(inventory, flags.host)
    return create_executor(connection_settings(flags, entry, inventory, known_hosts)), entry
