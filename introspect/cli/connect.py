"""Connection flags shared by every command, and turning them into an executor.

Settings come in layers (invoke-style): CLI flags > the host's entry in the
inventory > the inventory's defaults > the user config (``transport``,
``known_hosts``, ``parallel``) > built-in defaults (connect 5 s, strict host keys).
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from introspect.cli.options import HostSelection, host_options
from introspect.errors import UsageError
from introspect.transport.base import Executor
from introspect.transport.hostspec import HostSpec, parse_host
from introspect.transport.registry import TRANSPORTS, create_executor, settings_for_spec
from introspect.transport.settings import DEFAULT_AUTH_TIMEOUT, DEFAULT_BANNER_TIMEOUT, ConnectionSettings

if TYPE_CHECKING:  # imported where used: a local probe never pays for paramiko, fabric or yaml
    from introspect.inventory import HostEntry, Inventory
    from introspect.transport.hostkeys import KnownHosts
    from introspect.userconfig import Chosen


def connection_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add the SSH flags every remote command takes (and ``--host``/``--hosts``)."""
    options = [
        click.option("--transport", type=click.Choice(sorted(set(TRANSPORTS) - {"local"})), default=None,
                     help="Transport for a bare host name (default ssh = paramiko; openssh = the system ssh "
                          "client with all of ~/.ssh/config)."),
        click.option("--ssh-option", "ssh_options", multiple=True, metavar="KEY=VALUE",
                     help="openssh: passed as ssh -o KEY=VALUE (repeatable)."),
        click.option("--control-persist", metavar="TIME",
                     help="openssh: keep the ControlMaster for TIME after the run (e.g. 10m) and reuse it; "
                          "default: one master per host, closed at the end."),
        click.option("--port", "-p", type=click.IntRange(1, 65535), help="SSH port (default: ssh_config, else 22)."),
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
    ]
    for option in reversed(options):
        func = option(func)
    return host_options(func)


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
    transport: str | None = None
    ssh_options: tuple[str, ...] = ()
    control_persist: str | None = None

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any]) -> ConnectionFlags:
        names = cls.__dataclass_fields__
        return cls(**{name: kwargs.pop(name) for name in list(names) if name in kwargs})


def load_inventory_for(flags_file: str | None, *, required: bool = False) -> Inventory | None:
    """The inventory named by ``--hosts``, ``$INTROSPECT_HOSTS`` or the user config
    (:func:`introspect.userconfig.choose_inventory`); never one found in the working directory."""
    from introspect.userconfig import HOSTS_ENV, choose_inventory, config_path

    chosen = choose_inventory(flags_file)
    if chosen is None:
        if required:
            raise UsageError("no inventory: pass --hosts FILE",
                             hint=f"or set {HOSTS_ENV}=FILE, or `hosts: FILE` in {config_path()}")
        return None
    return inventory_at(chosen.value, chosen)


def inventory_at(path: str, chosen: Chosen | None = None) -> Inventory:
    """Read the inventory at ``path`` through the one reader; its problems are usage errors (exit 2)."""
    from introspect.inventory import InventoryError, read_inventory
    from introspect.userconfig import config_parallel

    try:
        return config_parallel(read_inventory(path, chosen))  # the config's `parallel:` where it sets none
    except InventoryError as exc:
        where = f" (named by {chosen.where})" if chosen is not None and chosen.source != "flag" else ""
        raise UsageError(f"{exc}{where}", hint="# fix the inventory file (see docs/inventories.md)") from None


def select_fleet(hosts_file: str | None, selection: HostSelection) -> tuple[Inventory, list[HostEntry]]:
    """The inventory and the hosts that ``--only``/``--tags``/``--all-hosts`` select in it."""
    from introspect.inventory import InventoryError, select_hosts

    if selection.host:
        raise UsageError("--host names one target; --only, --tags and --all-hosts select inventory hosts",
                         hint="give one or the other (an inventory host's name works with --only)")
    inventory = load_inventory_for(hosts_file, required=True)
    assert inventory is not None
    try:
        return inventory, select_hosts(inventory, selection.only, selection.tags)
    except InventoryError as exc:
        raise UsageError(str(exc), hint="check --only/--tags against the inventory's host names and tags") from None


def check_output_path(path: str | None, option: str) -> None:
    """Fail before any host is contacted when an output file's directory does not exist."""
    if not path or path == "-":
        return
    parent = Path(path).expanduser().parent
    if parent.is_dir():
        return
    # Name the component that is in the way: "does not exist" for a parent that is a file
    # sends the user to mkdir -p, which then fails with "File exists".
    blocker = next((p for p in (parent, *parent.parents) if p.exists() or p.is_symlink()), None)
    if blocker is not None and blocker != parent.anchor and not blocker.is_dir():
        quoted = shlex.quote(str(blocker))
        raise UsageError(f"{option} {path}: {blocker} is not a directory",
                         hint=f"ls -ld {quoted}  # move it, or write the file elsewhere")
    raise UsageError(f"{option} {path}: directory {parent} does not exist",
                     hint=f"mkdir -p {shlex.quote(str(parent))}  # or write the file elsewhere")


def find_entry(inventory: Inventory | None, name: str | None) -> HostEntry | None:
    if inventory is None or not name:
        return None
    return inventory.find(name)


def host_spec(flags: ConnectionFlags, entry: HostEntry | None) -> HostSpec | None:
    """The parsed host spec: the entry's ``url:``/``address:`` or ``--host``; None runs locally.

    A bare name keeps its meaning (address, ssh_config alias) and goes through
    ``--transport`` (ssh by default); for a container transport it names the container.
    """
    text = (entry.url or entry.address) if entry else flags.host
    if not text:
        return None
    spec = parse_host(text)
    if not spec.is_bare:
        return spec
    from introspect.userconfig import user_config  # --transport, else the config's `transport:`

    transport = flags.transport or user_config().transport
    if transport not in (None, "ssh", "openssh"):
        return parse_host(f"{transport}://{text}")
    return dataclasses.replace(spec, scheme=transport or "ssh")


def connection_settings(flags: ConnectionFlags, entry: HostEntry | None, inventory: Inventory | None,
                        host_keys: KnownHosts | None = None) -> ConnectionSettings:
    """Flags > the host spec > the host's entry > the inventory's defaults > built-in defaults."""
    spec = host_spec(flags, entry)
    # Inventory defaults belong to inventory entries; a plain address uses ssh_config only.
    defaults = inventory.defaults if inventory and entry else None
    base = ConnectionSettings(
        port=flags.port or (spec.port if spec else None) or (entry.port if entry else None)
        or (defaults.port if defaults else None),
        user=flags.user or (spec.user if spec else None) or (entry.user if entry else None)
        or (defaults.user if defaults else None),
        identity=_expand(flags.identity or (entry.identity if entry else None)
                         or (defaults.identity if defaults else None)),
        jump=flags.jump or (entry.jump if entry else None),
        connect_timeout=flags.connect_timeout or (defaults.connect_timeout if defaults else None),
        banner_timeout=flags.banner_timeout or DEFAULT_BANNER_TIMEOUT,
        auth_timeout=flags.auth_timeout or DEFAULT_AUTH_TIMEOUT,
        ssh_config=_expand(flags.ssh_config),
        passphrase_env=(entry.passphrase_env if entry else None)
        or (defaults.passphrase_env if defaults else None),
        known_hosts=_expand(_known_hosts_file(flags, inventory)),
        accept_new=flags.accept_new,
        host_keys=host_keys,
        ssh_options=tuple(flags.ssh_options or ()),
        control_persist=flags.control_persist,
    )
    return base if spec is None else settings_for_spec(spec, base)


# Every known_hosts this process loaded: main prints their warnings (bad lines, CA lines not
# verified) once each, at the end of the command.
_LOADED: list[KnownHosts] = []


def known_hosts_for(flags: ConnectionFlags, inventory: Inventory | None, host: str | None = None) -> KnownHosts:
    """known_hosts loaded once, to be shared by every connection of a run.

    Without --known-hosts (or the inventory's), ssh_config's UserKnownHostsFile and
    GlobalKnownHostsFile for ``host`` apply (``Host *`` for a fleet), as OpenSSH reads them.
    """
    from introspect.transport.hostkeys import KnownHosts, files_from_ssh_config

    path = _known_hosts_file(flags, inventory)
    user_files, global_files = (None, None) if path else files_from_ssh_config(host, _expand(flags.ssh_config))
    known = KnownHosts(_expand(path), accept_new=flags.accept_new, user_files=user_files,
                       global_files=global_files)
    _LOADED.append(known)
    return known


def fleet_known_hosts(flags: ConnectionFlags, inventory: Inventory | None,
                      hosts: Sequence[HostEntry]) -> KnownHosts | None:
    """:func:`known_hosts_for` a run over ``hosts``, or None when none of them connects over
    ``ssh`` (only paramiko reads it: a docker:// or local:// run loads no SSH stack)."""
    specs = (host_spec(dataclasses.replace(flags, host=h.name), h) for h in hosts)
    if not any(spec is not None and spec.scheme == "ssh" for spec in specs):
        return None
    return known_hosts_for(flags, inventory)


def known_hosts_warnings() -> list[str]:
    """Each warning of the known_hosts files loaded so far, once, in order (then forgotten)."""
    lines = list(dict.fromkeys(line for known in _LOADED for line in known.warnings))
    _LOADED.clear()
    return lines


def _known_hosts_file(flags: ConnectionFlags, inventory: Inventory | None) -> str | None:
    """--known-hosts > the inventory's ``known_hosts`` > the user config's > None (ssh_config's files)."""
    from introspect.userconfig import user_config

    return flags.known_hosts or (inventory.defaults.known_hosts if inventory else None) or user_config().known_hosts


def _expand(path: str | None) -> str | None:
    return os.path.expanduser(path) if path else None


def executor_for(flags: ConnectionFlags, inventory: Inventory | None,
                 known_hosts: KnownHosts | None = None) -> tuple[Executor, HostEntry | None]:
    """The executor for ``--host`` (its scheme's transport), or the local one when no host is given."""
    entry = find_entry(inventory, flags.host)
    settings = connection_settings(flags, entry, inventory, known_hosts)
    if settings.scheme == "ssh" and settings.host_keys is None:  # paramiko checks host keys itself
        settings = dataclasses.replace(settings, host_keys=known_hosts_for(flags, inventory, settings.host))
    return create_executor(settings), entry


def entry_executors(flags: ConnectionFlags, inventory: Inventory,
                    known_hosts: KnownHosts | None) -> Callable[[HostEntry], Executor]:
    """The executor of each inventory host of a fleet run, made as :func:`executor_for` makes the
    one of ``--host``, with the known_hosts parsed once for the whole run."""
    def make(entry: HostEntry) -> Executor:
        return executor_for(dataclasses.replace(flags, host=entry.name), inventory, known_hosts)[0]

    return make
