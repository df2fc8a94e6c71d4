"""Option types and option groups shared by several commands.

``ByteSize``: a size flag that takes ``64MB``, ``1GiB`` or a plain number of bytes.
``host_selectors``: the one set of host-selection flags (``--host``, ``--hosts``,
``--only``, ``--tags``, ``--all-hosts``) of every multi-host command, so that the
same words select the same hosts everywhere (as ``ansible --limit`` does for all
of Ansible's commands).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from introspect.errors import UsageError

# GB/MB are decimal (what a disk vendor or `ls --si` says), GiB/MiB and the bare
# K/M/G/T binary (what `ls -h` and `df -h` say); a plain number is bytes.
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str, option: str = "size") -> int:
    """``"96GiB"`` -> bytes; a :class:`UsageError` naming ``option`` when it is no size."""
    found = _SIZE.match(str(text or ""))
    unit = found.group(2).lower() if found else None
    if found is None or unit not in _UNITS:
        raise UsageError(f"{option} {text!r} is not a size",
                         hint="write it like 64MB, 1GiB, 80G (G = GiB) or a number of bytes")
    return int(float(found.group(1)) * _UNITS[unit])


class ByteSize(click.ParamType):
    """A click type for byte sizes: ``64MB``, ``1GiB``, ``16777216``."""

    name = "size"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        try:
            return parse_size(str(value), param.opts[0] if param is not None and param.opts else "size")
        except UsageError as exc:
            self.fail(f"{exc.message} ({exc.hint})", param, ctx)


BYTE_SIZE = ByteSize()


class LateHelpOption(click.Option):
    """An option whose help text is made only when ``--help`` shows it (``late_help=`` a callable):
    a default that names a platform directory costs platformdirs' import, which a run need not pay."""

    def __init__(self, *args: Any, late_help: Callable[[], str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.late_help = late_help

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        self.help = self.late_help()
        return super().get_help_record(ctx)


@dataclass(frozen=True)
class HostSelection:
    """What the selector flags asked for; ``fleet`` when any inventory-wide flag was given."""

    host: str | None
    hosts_file: str | None
    only: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    all_hosts: bool = False

    @property
    def fleet(self) -> bool:
        return self.all_hosts or bool(self.only) or bool(self.tags)

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any]) -> HostSelection:
        """Pop the selector flags from a command's kwargs (``--host``/``--hosts`` stay for the
        connection flags, which read them too)."""
        return cls(host=kwargs.get("host"), hosts_file=kwargs.get("hosts_file"),
                   only=_split(kwargs.pop("only", ())), tags=_split(kwargs.pop("tags", ())),
                   all_hosts=bool(kwargs.pop("all_hosts", False)))


def _split(values: Any) -> tuple[str, ...]:
    # Repeated (--tags a --tags b) or comma-separated (--tags a,b): both work.
    return tuple(part.strip() for value in values or () for part in str(value).split(",") if part.strip())


HOST_HELP = ("Host address, ~/.ssh/config alias, inventory entry name, or a URL: "
             "ssh://, openssh://[user@]host[:port], docker://, podman://CONTAINER, "
             "kubectl://[NS/]POD[/CONTAINER], lxc://NAME, pct://VMID[?via=ssh://PVE], local://. "
             "Omit to run on this machine.")
HOSTS_HELP = ("Inventory file: hosts.yaml or an Ansible inventory (INI, YAML, `ansible-inventory --list` "
              "JSON, an executable inventory script). Default: $INTROSPECT_HOSTS, else `hosts:`/`inventory:` "
              "in the user config file; never ./hosts.yaml implicitly.")


def host_options(func: Callable[..., Any], host_help: str = HOST_HELP) -> Callable[..., Any]:
    """``--host`` and ``--hosts``: one target or the inventory that names it."""
    func = click.option("--hosts", "--inventory", "hosts_file", type=click.Path(dir_okay=False), help=HOSTS_HELP)(func)
    return click.option("--host", "-H", help=host_help)(func)


def fleet_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--only``, ``--tags``, ``--all-hosts``: which inventory hosts a fleet run covers."""
    func = click.option("--all-hosts", is_flag=True, help="Every host of the inventory.")(func)
    func = click.option("--tags", multiple=True, metavar="TAG",
                        help="Inventory hosts with one of these tags (repeat or comma-separate).")(func)
    return click.option("--only", multiple=True, metavar="NAME",
                        help="These inventory hosts (repeat or comma-separate).")(func)


def host_selectors(func: Callable[..., Any], host_help: str = HOST_HELP) -> Callable[..., Any]:
    """Every selector flag: ``--host``, ``--hosts``, ``--only``, ``--tags``, ``--all-hosts``."""
    return host_options(fleet_options(func), host_help)
