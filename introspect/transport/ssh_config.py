"""Where an ``ssh://`` connection goes, resolved through ssh_config with paramiko's parser.

The rules are fabric's (``fabric/config.py``, ``fabric/connection.py``), which this
transport used before: ``--ssh-config FILE`` alone, else ``~/.ssh/config`` then
``/etc/ssh/ssh_config``; the host name is looked up as written (an alias), and its
``HostName``, ``User``, ``Port``, ``IdentityFile``, ``ConnectTimeout``, ``ProxyJump``
and ``ProxyCommand`` apply unless a flag says otherwise. Each ProxyJump hop is a name
resolved the same way (``[user@]host[:port]``, an alias of its own); the first hop of
a chain follows its own ProxyJump, as OpenSSH's does. Unlike fabric, a chain
``ProxyJump a,b`` is connected in OpenSSH's order, a first, then b through a (fabric
connects b first: https://github.com/fabric/fabric/issues/2203), and a flag's
``--connect-timeout`` applies to every hop.
"""

from __future__ import annotations

import getpass
import os
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from introspect.errors import HostUnreachable, InputError, UsageError
from introspect.transport.hostkeys import SSH_CONFIG_FILES
from introspect.transport.names import (
    check_destination,
    check_host,
    check_jump,
    check_port,
    check_user,
    host_problem,
    port_problem,
    split_destination,
    user_problem,
)
from introspect.transport.paramiko_lib import enable_match_exec, paramiko
from introspect.transport.settings import DEFAULT_CONNECT_TIMEOUT

MAX_JUMPS = 8  # hops in one chain, nested ProxyJumps included: a config that loops is refused


@dataclass(frozen=True)
class Hop:
    """One SSH connection of a chain: where it goes, who logs in with which keys, and through what."""

    name: str  # as written: an ssh_config alias, an address
    host: str  # ssh_config HostName, else ``name``
    port: int
    user: str
    key_files: tuple[str, ...] = ()
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    via: Hop | None = None  # the ProxyJump hop this one is reached through; None: a TCP connect
    proxy_command: str | None = None  # ssh_config ProxyCommand (only without a ProxyJump)
    explicit: bool = False  # the target or --jump: --identity and the key's passphrase apply

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"

    def chain(self) -> list[Hop]:
        """Every hop to connect, the first one first, this one last."""
        hops: list[Hop] = []
        hop: Hop | None = self
        while hop is not None:
            hops.insert(0, hop)
            hop = hop.via
        return hops


def split_hop(text: str, *, what: str = "host") -> tuple[str | None, str, int | None]:
    """``[user@]host[:port]`` as ``ssh -J`` and fabric read it (``[v6]:port`` too; a bare IPv6
    address keeps its colons), each part checked (:mod:`.names`) before any lookup."""
    if not split_destination(text)[1]:
        raise UsageError(f"no host name in {text!r}", hint="# pass --jump [user@]host[:port], e.g. --jump root@bastion:22")
    return check_destination(text, what=what)


def load_config(path: str | None) -> tuple[paramiko.SSHConfig, str]:
    """The parsed ssh_config files (cached while they are unchanged) and how to name them in errors."""
    if path and not os.path.exists(os.path.expanduser(path)):
        raise InputError(f"ssh_config file {path} does not exist",
                         hint="# check the path given to --ssh-config")
    paths = tuple(os.path.expanduser(p) for p in ([path] if path else SSH_CONFIG_FILES))
    return _parsed(paths, tuple(file_stamp(p) for p in paths)), " or ".join([path] if path else SSH_CONFIG_FILES)


def file_stamp(path: str) -> tuple[int, int, int] | None:
    """What tells a changed file from the one read before (inode, size, mtime); None: no regular
    file there (an ssh_config skipped, as fabric does; a key file left to paramiko's own error)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns) if os.path.isfile(path) else None


@lru_cache(maxsize=16)
def _parsed(paths: tuple[str, ...], stamps: tuple[tuple[int, int, int] | None, ...]) -> paramiko.SSHConfig:
    # One parse per run and file set, shared by every host of a fleet: lookups only read it.
    config = paramiko.SSHConfig()
    for path, stamp in zip(paths, stamps, strict=True):
        if stamp is None:
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                config.parse(fh)
        except OSError as exc:
            raise InputError(f"cannot read ssh_config {path}: {exc.strerror or exc}",
                             hint="# make the file readable, or pass --ssh-config FILE") from None
        except paramiko.ConfigParseError as exc:
            raise InputError(f"cannot parse ssh_config {path}: {exc}",
                             hint="# fix that line (see ssh_config(5)), or pass --ssh-config FILE") from None
    return config


def local_user() -> str:
    """The login name when neither a flag nor ssh_config names one (what paramiko itself would use)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        raise UsageError("cannot tell the local user name (no USER, LOGNAME or passwd entry)",
                         hint="# pass --user NAME, or set User in ssh_config") from None


class Resolver:
    """Turns a destination and the flags into a :class:`Hop` chain, one ssh_config lookup per hop."""

    def __init__(self, config: paramiko.SSHConfig, source: str, *, identity: str | None = None,
                 connect_timeout: float | None = None) -> None:
        self.config = config
        self.source = source
        self.identity = identity
        self.connect_timeout = connect_timeout

    def target(self, host: str, *, port: int | None = None, user: str | None = None,
               jump: str | None = None) -> Hop:
        """The destination's hop; ``jump`` (``--jump``) replaces its ssh_config ProxyJump, and
        the jump host itself still follows its own, as fabric's gateway did."""
        # The flags are checked here too: a Resolver is also made by API callers, not only the CLI.
        if user is not None:
            check_user(user)
        if port is not None:
            check_port(port)
        if not jump:
            return self.hop(host, port=port, user=user, explicit=True, follow_config=True)
        check_jump(jump)
        via = self.hop(jump, explicit=True, follow_config=True, seen=(host,))
        return self.hop(host, port=port, user=user, explicit=True, via=via)

    def hop(self, text: str, *, port: int | None = None, user: str | None = None, explicit: bool = False,
            via: Hop | None = None, follow_config: bool = False, seen: tuple[str, ...] = ()) -> Hop:
        """One hop. ``follow_config``: reach it through its ssh_config ProxyJump or ProxyCommand
        (else through ``via``, or directly)."""
        given_user, name, given_port = split_hop(text)
        opts = self.lookup(name)
        self._check_expanded(opts, name)
        host = str(opts.get("hostname") or name)
        keys = ([self.identity] if explicit and self.identity else []) + list(opts.get("identityfile") or [])
        proxy_command = None
        if follow_config:
            via = self._jumps(opts, name, host, seen)
            proxy_command = None if via is not None else (opts.get("proxycommand") or None)
        return Hop(name=name, host=host, port=port or given_port or self._number(opts, "port", name, int) or 22,
                   user=user or given_user or str(opts.get("user") or "") or local_user(),
                   key_files=tuple(dict.fromkeys(keys)),
                   connect_timeout=(self.connect_timeout or self._number(opts, "connecttimeout", name, float)
                                    or DEFAULT_CONNECT_TIMEOUT),
                   via=via, proxy_command=proxy_command, explicit=explicit)

    def _jumps(self, opts: Any, name: str, host: str, seen: tuple[str, ...]) -> Hop | None:
        """The last hop of ``name``'s ssh_config ProxyJump chain, resolved; None: no jump."""
        value = str(opts.get("proxyjump") or "").strip()
        if not value or value.lower() == "none":
            return None
        texts = [part.strip() for part in value.split(",") if part.strip()]
        names = [split_hop(text)[1] for text in texts]
        if name in names or host in names:
            # A ProxyJump naming the host itself (a `Host *` ProxyJump, read for the bastion):
            # the bastion is reached directly, as fabric does (fabric/connection.py, get_gateway).
            return None
        chain = (*seen, name)
        if len(chain) + len(texts) > MAX_JUMPS or any(hop in chain for hop in names):
            raise UsageError(f"ProxyJump of {name} in {self.source} loops or is deeper than {MAX_JUMPS} hops "
                             f"({' -> '.join((*chain, *names))})",
                             hint="# give the bastion `ProxyJump none` in ssh_config, or pass --jump")
        via: Hop | None = None
        for index, text in enumerate(texts):
            via = self.hop(text, via=via, follow_config=index == 0, seen=chain)
        return via

    def _check_expanded(self, opts: Any, name: str) -> None:
        """HostName, User and Port after ssh_config's expansion (``HostName %h.corp``): what
        paramiko connects to and a later ProxyCommand or log line sees, held to the rules of
        :mod:`.names` like a name typed on the command line."""
        for key, problem in (("hostname", host_problem), ("user", user_problem), ("port", port_problem)):
            value = opts.get(key)
            if value is None:
                continue
            reason = problem(str(value))
            if reason:
                raise InputError(f"{key} {str(value)!r} for {name} in {self.source} {reason}",
                                 hint=f"ssh -G {name} | grep -i '^{key} '  # then fix that line of ssh_config "
                                      "(see ssh_config(5)), or pass --ssh-config FILE")

    def lookup(self, name: str) -> Any:
        """paramiko's ssh_config lookup of ``name``, its failures as introspect's errors.

        ``name`` is checked first (``*``, the fleet-wide lookup, aside): paramiko substitutes it
        into ``Match exec`` commands, which invoke runs through a shell."""
        if name != "*":
            check_host(name)
        try:
            try:
                return self.config.lookup(name)
            except ImportError:
                # paramiko raises invoke's ImportError for `Match exec` (see paramiko_lib).
                if not enable_match_exec():
                    raise UsageError(f"{self.source} has a `Match exec` line for {name}, which paramiko runs with "
                                     "invoke, and invoke is not installed",
                                     hint=f"{shlex.quote(sys.executable)} -m pip install invoke  # or use --transport openssh"
                                     ) from None
                return self.config.lookup(name)
        except paramiko.CouldNotCanonicalize as exc:
            raise HostUnreachable(f"cannot canonicalize host name {name!r} with the CanonicalDomains of "
                                  f"{self.source} ({exc})",
                                  hint="# check CanonicalDomains, or set CanonicalizeFallbackLocal yes",
                                  host=name, stage="connect") from None
        except paramiko.ConfigParseError as exc:
            raise InputError(f"cannot use {self.source} for {name}: {exc}",
                             hint="# fix that line (see ssh_config(5)), or pass --ssh-config FILE") from None

    def _number(self, opts: Any, key: str, name: str, kind: Callable[[str], float]) -> Any:
        value = opts.get(key)
        if value is None:
            return None
        try:
            number = kind(str(value))
        except ValueError:
            raise InputError(f"{key} {value!r} for {name} in {self.source} is not a number",
                             hint=f"# fix the {key} line of that ssh_config") from None
        if number <= 0:
            raise InputError(f"{key} {value!r} for {name} in {self.source} must be positive",
                             hint=f"# fix the {key} line of that ssh_config")
        return number


__all__ = ["Hop", "Resolver", "file_stamp", "load_config", "split_hop"]
