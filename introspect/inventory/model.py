"""The inventory's values: frozen dataclasses, validated once by :mod:`.schema`."""

from __future__ import annotations

import functools
import posixpath
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from introspect.remote.contract import DEFAULT_TOKENIZER_TIMEOUT, venv_python

if TYPE_CHECKING:
    from introspect.userconfig import Chosen

MAX_INVENTORY_BYTES = 1024 * 1024  # bounded input; a real inventory is a few KiB


class InventoryError(Exception):
    """Invalid inventory or host selection; the CLI maps it to exit status 2."""

    exit_code = 2

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None,
                 key: str | None = None) -> None:
        self.source = source
        self.line = line
        self.key = key
        self.detail = message
        where = ""
        if source is not None:
            where = source if line is None else f"{source}:{line}"
        prefix = ": ".join(p for p in (where, key) if p)
        super().__init__(f"{prefix}: {message}" if prefix else message)


@dataclass(frozen=True)
class Defaults:
    user: str | None = None
    port: int | None = None
    identity: str | None = None
    passphrase_env: str | None = None
    connect_timeout: float = 5.0  # like ssh -o ConnectTimeout=5
    parallel: int = 8
    parallel_set: bool = field(default=False, compare=False)  # the file said parallel (else the user config)
    known_hosts: str | None = None  # None: the user's ~/.ssh/known_hosts
    # On by default because the CLI opt-out is --no-remote-code; hosts.yaml
    # can switch it off per host or venv.
    remote_code: bool = True
    remote_code_set: bool = field(default=False, compare=False)  # the file said remote_code (else the built-in default applies)
    probe_timeout: float = DEFAULT_TOKENIZER_TIMEOUT  # seconds for one host's probe run (tokenizer loads included)


@dataclass(frozen=True)
class VenvEntry:
    path: str
    requires: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    remote_code: bool = True
    remote_code_set: bool = field(default=False, compare=False)  # this venv, its host or the defaults said remote_code
    min_free_gb: float | None = None  # GiB (2**30 bytes), as `df -h` shows

    @property
    def python(self) -> str:
        return venv_python(self.path)

    @property
    def pip(self) -> str:
        return venv_pip(self.path)


@dataclass(frozen=True)
class HostEntry:
    name: str
    address: str
    port: int | None = None
    url: str | None = None  # a host spec URL (openssh://, podman://...); given instead of address
    user: str | None = None
    identity: str | None = None
    jump: str | None = None
    tags: tuple[str, ...] = ()
    venvs: tuple[VenvEntry, ...] = ()
    remote_code: bool = True
    remote_code_set: bool = field(default=False, compare=False)  # this host or the defaults said remote_code
    roots: tuple[str, ...] = ()
    passphrase_env: str | None = None
    python: str | None = None  # interpreter for probes outside any venv (Ansible's ansible_python_interpreter)
    line: int = field(default=0, compare=False)  # where the entry starts, for later messages


@dataclass(frozen=True)
class Inventory:
    defaults: Defaults
    hosts: tuple[HostEntry, ...]
    source: str = "<string>"
    chosen: Chosen | None = field(default=None, compare=False)  # which flag, variable or config named it

    def host(self, name: str) -> HostEntry:
        entry = self.find(name)
        if entry is None:
            raise InventoryError(f"no host named {name!r}", source=self.source)
        return entry

    def find(self, name: str) -> HostEntry | None:
        """The entry named ``name`` (the first, were names repeated), or None; a dict lookup, as
        every host of a fleet run looks its entry up (a scan each was quadratic in the fleet)."""
        return self._by_name.get(name)

    @functools.cached_property
    def _by_name(self) -> dict[str, HostEntry]:
        index: dict[str, HostEntry] = {}
        for entry in self.hosts:
            index.setdefault(entry.name, entry)
        return index


def venv_pip(venv: str) -> str:
    """The pip beside a venv's interpreter (``<venv>/bin/pip``)."""
    return posixpath.join(posixpath.dirname(venv_python(venv)), "pip")
