"""An Ansible host's variables as a hosts.yaml entry, validated by the same schema.

The variables that matter to introspect become the entry's keys; the host's groups
become its tags (``--tags gpu`` selects the hosts of group ``gpu``). Everything is
then checked by :func:`introspect.inventory.schema.parse_inventory_data`, through a
:class:`SourcedChecker` that names the file and line each value was written on and
the Ansible variable's name (``group_vars/gpu.yml:3: gpu01: ansible_port: ...``).

Variables an Ansible inventory commonly holds for other plays (``ansible_become``,
application settings) are not introspect's business and are ignored; an unknown
``introspect_*`` variable is a typo and an error, as an unknown hosts.yaml key is.
"""

from __future__ import annotations

import copy
import difflib
import shlex
from typing import Any, NoReturn

from introspect.inventory.ansible_groups import IMPLICIT_GROUPS, AnsibleGroups, Var, marked
from introspect.inventory.ansible_yaml import VaultValue
from introspect.inventory.checker import Checker
from introspect.inventory.marked import MarkedMap, MarkedSeq
from introspect.inventory.model import Inventory, InventoryError
from introspect.inventory.schema import parse_inventory_data

# Ansible variable -> hosts.yaml host key (the value is taken as it is).
DIRECT = {
    "ansible_host": "address",
    "ansible_ssh_host": "address",
    "ansible_port": "port",
    "ansible_ssh_port": "port",
    "ansible_user": "user",
    "ansible_ssh_user": "user",
    "ansible_ssh_private_key_file": "identity",
    "ansible_private_key_file": "identity",
    "ansible_python_interpreter": "python",
    "introspect_venvs": "venvs",
    "introspect_roots": "roots",
    "introspect_remote_code": "remote_code",
    "introspect_passphrase_env": "passphrase_env",
}
INTROSPECT_VARS = ("introspect_venvs", "introspect_models", "introspect_roots", "introspect_remote_code",
                   "introspect_passphrase_env", "introspect_tags")
# ansible_connection values and the host spec scheme introspect reaches the host with.
CONNECTIONS = {"ssh": None, "smart": None, "paramiko": None, "paramiko_ssh": None, "local": "local",
               "docker": "docker", "community.docker.docker": "docker",
               "containers.podman.podman": "podman", "podman": "podman"}


class SourcedChecker(Checker):
    """A checker whose errors name the file, line and Ansible variable a value came from."""

    def __init__(self, source: str) -> None:
        super().__init__(source)
        self.origins: dict[str, tuple[str, str]] = {}  # "hosts.NAME.key" -> (file, "NAME: ansible_var")

    def fail(self, line: int | None, key: str, message: str) -> NoReturn:
        for prefix in sorted(self.origins, key=len, reverse=True):
            if key == prefix or key.startswith(prefix + ".") or key.startswith(prefix + "["):
                source, shown = self.origins[prefix]
                raise InventoryError(message, source=source, line=line, key=shown + key[len(prefix):])
        if key.startswith("hosts."):
            key = key[len("hosts."):]
        raise InventoryError(message, source=self.source, line=line, key=key)


def _fail(var: Var, host: str, name: str, message: str) -> NoReturn:
    raise InventoryError(message, source=var.source, line=var.line, key=f"{host}: {name}")


def _jump(var: Var, host: str, name: str) -> str | None:
    """The ProxyJump of ``ansible_ssh_common_args``: ``-o ProxyJump=H``, ``-J H`` or the classic
    ``-o ProxyCommand="ssh -W %h:%p [-q] H"``; any other option is refused, not dropped."""
    if not isinstance(var.value, str):
        _fail(var, host, name, f"expected a string of ssh options, got {type(var.value).__name__}")
    try:
        words = shlex.split(var.value)
    except ValueError as exc:
        _fail(var, host, name, f"cannot split {var.value!r}: {exc}")
    jump = None
    i = 0
    while i < len(words):
        word, following = words[i], words[i + 1] if i + 1 < len(words) else ""
        option = following if word == "-o" else word[2:] if word.startswith("-o") else None
        if word == "-J" or (option or "").lower().startswith("proxyjump="):
            jump = following if word == "-J" else option.split("=", 1)[1]  # type: ignore[union-attr]
        elif option and option.lower().startswith("proxycommand="):
            command = shlex.split(option.split("=", 1)[1])
            hosts = [w for w in command[1:] if not w.startswith("-") and w != "%h:%p"]
            if command[:1] != ["ssh"] or "-W" not in command or len(hosts) != 1:
                _fail(var, host, name, f"only a `ssh -W %h:%p HOST` ProxyCommand is understood, not {option!r}")
            jump = hosts[0]
        else:
            _fail(var, host, name, f"ssh option {option or word!r} is not understood here (only ProxyJump, -J and "
                                   "ProxyCommand='ssh -W %h:%p HOST'); pass other options with --ssh-option")
        i += 2 if word in ("-o", "-J") else 1
    return jump


def host_entry(inv: AnsibleGroups, host: str, checker: SourcedChecker) -> MarkedMap:
    """The hosts.yaml-shaped mapping of one Ansible host (lines and origins recorded)."""
    variables = inv.host_vars(host)
    entry = MarkedMap()
    entry.line, entry.key_lines, entry.duplicates = inv.hosts.get(host) or 0, {}, []

    def put(key: str, name: str, var: Var, value: Any) -> None:
        if isinstance(value, VaultValue):
            _fail(var, host, name, "the value is encrypted with ansible-vault, which introspect does not decrypt")
        entry[key] = marked(value, var.line)
        entry.key_lines[key] = var.line or 0
        checker.origins[f"hosts.{host}.{key}"] = (var.source, f"{host}: {name}")

    for name, var in variables.items():
        if name in DIRECT:
            put(DIRECT[name], name, var, var.value)
        elif name == "ansible_ssh_common_args":
            jump = _jump(var, host, name)
            if jump:
                put("jump", name, var, jump)
        elif name.startswith("introspect_") and name not in INTROSPECT_VARS:
            close = difflib.get_close_matches(name, INTROSPECT_VARS, n=1)
            _fail(var, host, name, "unknown introspect variable" + (f"; did you mean {close[0]!r}?" if close else
                                                                      f" (known: {', '.join(INTROSPECT_VARS)})"))
    _connection(variables, host, entry, put)
    _models(variables, host, entry)
    tags = [g for g in inv.groups_of(host) if g not in IMPLICIT_GROUPS]
    extra = variables.get("introspect_tags")
    if extra is not None:
        if not isinstance(extra.value, list):
            _fail(extra, host, "introspect_tags", "expected a list of tags")
        tags += [t for t in extra.value if t not in tags]
    if tags:
        entry["tags"] = marked(tags, entry.line)
        entry.key_lines["tags"] = entry.line
    return entry


def _connection(variables: dict[str, Var], host: str, entry: MarkedMap, put: Any) -> None:
    var = variables.get("ansible_connection")
    if var is None:
        return
    scheme = CONNECTIONS.get(str(var.value), "?")
    if scheme == "?":
        _fail(var, host, "ansible_connection", f"connection {var.value!r} is not supported "
              f"(supported: {', '.join(sorted(CONNECTIONS))})")
    if scheme is not None:
        target = entry.pop("address", host)
        put("url", "ansible_connection", var, "local://" if scheme == "local" else f"{scheme}://{target}")


def _models(variables: dict[str, Var], host: str, entry: MarkedMap) -> None:
    """``introspect_models``: model dirs for every listed venv that names none of its own."""
    var = variables.get("introspect_models")
    if var is None:
        return
    if not isinstance(var.value, list):
        _fail(var, host, "introspect_models", "expected a list of model directories")
    venvs = entry.get("venvs")
    if not isinstance(venvs, MarkedSeq) or not venvs:
        _fail(var, host, "introspect_models", "introspect_models needs introspect_venvs (the venvs that load "
                                              "the models' tokenizers)")
    venvs = entry["venvs"] = copy.deepcopy(venvs)  # a group's value is shared by its hosts
    for venv in venvs:
        if isinstance(venv, MarkedMap) and "models" not in venv:
            venv["models"] = marked(list(var.value), var.line)
            venv.key_lines["models"] = var.line or 0


def to_inventory(inv: AnsibleGroups) -> Inventory:
    """Every host of the Ansible inventory as an :class:`Inventory` (hosts.yaml's model)."""
    checker = SourcedChecker(inv.source)
    hosts = MarkedMap()
    hosts.line, hosts.key_lines, hosts.duplicates = 1, {}, []
    for host in inv.hosts:
        hosts[host] = host_entry(inv, host, checker)
        hosts.key_lines[host] = inv.hosts[host] or 0
    if not hosts:
        raise InventoryError("the Ansible inventory has no hosts", source=inv.source)
    top = MarkedMap(hosts=hosts)
    top.line, top.key_lines, top.duplicates = 1, {"hosts": 1}, []
    return parse_inventory_data(top, inv.source, checker)
