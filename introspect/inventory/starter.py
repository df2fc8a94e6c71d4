"""The files ``introspect init`` writes: a starter inventory (hosts.yaml) from ssh_config's
``Host`` entries or an Ansible inventory, and a user config with its safe defaults explained.

Only concrete ``Host`` names become hosts: a pattern (``*``, ``?``) or a negation (``!``) names
no machine. Names go through the same allow-list as ``--host``
(:mod:`introspect.transport.names`); a name that fails it is skipped and reported, never
written. From ``~/.ssh/config`` (the file every command reads anyway) a host is written as its
alias alone, so that its HostName, User, ProxyJump... stay in one place; from another file
(``--ssh-config FILE``, which later commands would not read) its resolved HostName, User, Port,
IdentityFile and ProxyJump are written into the entry.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from introspect.inventory.checker import HOST_NAME_RE
from introspect.inventory.model import HostEntry, Inventory, VenvEntry
from introspect.transport.names import host_problem, port_problem, user_problem

if TYPE_CHECKING:
    from paramiko.config import SSHConfigDict

DEFAULT_SSH_CONFIG = "~/.ssh/config"
_PATTERN_CHARS = "*?!"


class VenvYaml(TypedDict, total=False):
    """One ``venvs:`` item of a hosts.yaml entry, in the order it is written."""

    path: str
    requires: list[str]
    imports: list[str]
    models: list[str]
    min_free_gb: float


class HostYaml(TypedDict, total=False):
    """A hosts.yaml entry as ``init`` writes it (only the keys a source set), in that order."""

    address: str
    url: str
    port: int | str  # a port ssh_config spells oddly is written as found (the checker then names it)
    user: str
    identity: str
    passphrase_env: str
    jump: str
    python: str
    tags: list[str]
    roots: list[str]
    remote_code: bool
    venvs: list[VenvYaml]


@dataclass
class Starter:
    """Hosts found in a source, each as its hosts.yaml entry, and the names skipped with why."""

    source: str
    hosts: dict[str, HostYaml] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def add(self, name: str, entry: HostYaml) -> None:
        problem = host_problem(name) or (None if HOST_NAME_RE.match(name) else "is not an inventory name")
        problem = f"the name {problem}" if problem else None
        checks: tuple[tuple[str, object, Callable[[Any], str | None]], ...] = (
                  ("address", entry.get("address"), host_problem), ("user", entry.get("user"), user_problem),
                  ("port", entry.get("port"), port_problem), ("jump", entry.get("jump"), _jump_problem))
        for key, value, check in checks:
            if problem is None and value is not None and check(value):
                problem = f"its {key} {value!r} {check(value)}"
        if problem:
            self.skipped.append((name, problem))
        else:
            self.hosts[name] = entry


def _jump_problem(value: object) -> str | None:
    from introspect.transport.names import split_destination

    for hop in str(value).split(","):
        user, host, port = split_destination(hop.strip())
        problem = host_problem(host) or (user_problem(user) if user else None) or (
            port_problem(port) if port is not None else None)
        if problem:
            return problem
    return None


def from_ssh_config(path: str | None) -> Starter:
    """The concrete ``Host`` names of ``path`` (default ``~/.ssh/config``), read by paramiko's
    SSHConfig as the transport reads it (:func:`introspect.transport.ssh_config.load_config`)."""
    from introspect.transport.ssh_config import load_config

    config, _ = load_config(path or DEFAULT_SSH_CONFIG)
    starter = Starter(path or DEFAULT_SSH_CONFIG)
    # get_hostnames() is every pattern of every Host line (paramiko adds its own `*`).
    for name in sorted(config.get_hostnames()):
        if any(ch in name for ch in _PATTERN_CHARS):
            continue  # a pattern or negation: settings for other hosts, not a host
        starter.add(name, {} if path is None else _resolved(config.lookup(name), name))
    return starter


def _resolved(options: SSHConfigDict, name: str) -> HostYaml:
    """What ``--ssh-config FILE`` says of ``name`` (paramiko's lookup: its lower-cased keywords
    and their values as written), as hosts.yaml keys (only what the file sets)."""
    entry = HostYaml()
    if options.get("hostname") and options["hostname"] != name:
        entry["address"] = options["hostname"]
    if options.get("user"):
        entry["user"] = options["user"]
    if options.get("port"):
        entry["port"] = int(options["port"]) if str(options["port"]).isdigit() else options["port"]
    # IdentityFile may be given several times: paramiko keeps a list of them, in order, where its
    # stubs say str (paramiko/config.py SSHConfig.parse, "identityfile ... allowed to be specified
    # multiple times": https://github.com/paramiko/paramiko/blob/main/paramiko/config.py).
    identities: object = options.get("identityfile")
    if isinstance(identities, list) and identities:
        entry["identity"] = str(identities[0])
    if options.get("proxyjump") and options["proxyjump"].lower() != "none":
        entry["jump"] = options["proxyjump"]
    return entry


def from_inventory(inventory: Inventory) -> Starter:
    """Every host of an inventory already read (an Ansible one, through the one loader)."""
    starter = Starter(inventory.source)
    for host in inventory.hosts:
        starter.add(host.name, _entry(host))
    return starter


def _entry(host: HostEntry) -> HostYaml:
    entry = HostYaml(address=host.address) if host.address != host.name and not host.url else HostYaml()
    if host.url:
        entry["url"] = host.url
    if host.port:
        entry["port"] = host.port
    if host.user:
        entry["user"] = host.user
    if host.identity:
        entry["identity"] = host.identity
    if host.passphrase_env:
        entry["passphrase_env"] = host.passphrase_env
    if host.jump:
        entry["jump"] = host.jump
    if host.python:
        entry["python"] = host.python
    if host.tags:
        entry["tags"] = list(host.tags)
    if host.roots:
        entry["roots"] = list(host.roots)
    if host.remote_code_set:
        entry["remote_code"] = host.remote_code
    venvs = [_venv(venv) for venv in host.venvs]
    if venvs:
        entry["venvs"] = venvs
    return entry


def _venv(venv: VenvEntry) -> VenvYaml:
    out = VenvYaml(path=venv.path)
    if venv.requires:
        out["requires"] = list(venv.requires)
    if venv.imports:
        out["imports"] = list(venv.imports)
    if venv.models:
        out["models"] = list(venv.models)
    if venv.min_free_gb is not None:
        out["min_free_gb"] = venv.min_free_gb
    return out


def inventory_text(starter: Starter) -> str:
    import yaml

    body = yaml.safe_dump({"hosts": starter.hosts}, sort_keys=False, default_flow_style=False, width=1000)
    return (f"# introspect inventory, written by `introspect init` from {starter.source}.\n"
            "# Each host takes address, port, user, identity, jump, tags, python and venvs\n"
            "# (path, requires, imports, models); see docs/inventories.md in introspect's repository.\n"
            f"{body}")


def config_text(inventory: str | None) -> str:
    """The user config: every key with a one-line comment; the safe defaults set, the rest shown."""
    hosts = f"hosts: {_yaml_scalar(inventory)}" if inventory else "# hosts: ~/.config/introspect/hosts.yaml"
    return "\n".join([
        "# introspect user config, written by `introspect init`.",
        "# `introspect env` shows each setting and where it came from; flags win over it.",
        "",
        "# The inventory fleet commands read when neither --hosts nor $INTROSPECT_HOSTS is given.",
        hosts,
        "",
        "# Whether the model's own Python code (trust_remote_code) may run on a host.",
        "# Refused unless a pattern here, the inventory or a venv entry allows it.",
        "# Order: --no-remote-code, the inventory, a models pattern, a hosts pattern, default.",
        "remote_code:",
        "  default: false",
        "  # fnmatch on the --model path as given; a false among matches wins:",
        "  # models: {\"/root/models/Kimi-*\": true, \"*/untrusted/*\": false}",
        "  # fnmatch on the inventory name, address or --host:",
        "  # hosts: {\"gpu-*\": true}",
        "",
        "# The transport of a bare host name: ssh (paramiko) or openssh (the ssh client).",
        "transport: ssh",
        "",
        "# Hosts a fleet command works on at once (an inventory's defaults.parallel wins).",
        "parallel: 8",
        "",
        "# The known_hosts file host keys are checked against (default: ssh_config's).",
        "# known_hosts: ~/.ssh/known_hosts",
        "",
        "# The venv on the hosts whose python probes, where --venv and the inventory say none.",
        "# venv: /opt/venvs/serve",
        "",
    ])


def _yaml_scalar(value: str) -> str:
    import yaml

    return str(yaml.safe_dump(value, default_style=None, width=1000)).splitlines()[0]


def home_relative(path: str) -> str:
    """``path`` with the home directory as ``~`` (shorter in the files and on the screen)."""
    home = os.path.expanduser("~")
    return "~" + path[len(home):] if home != "/" and (path == home or path.startswith(home + "/")) else path
