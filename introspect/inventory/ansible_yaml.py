"""Ansible's YAML inventory format (ansible-core's ``yaml`` inventory plugin), and the YAML
of ``group_vars/`` and ``host_vars/`` files.

::

    all:
      vars: {ansible_user: ml}
      children:
        gpu:
          hosts:
            gpu[01:32]:
              ansible_host: 10.0.0.1
          vars:
            introspect_venvs: [{path: /opt/venvs/serve}]

Each group is a mapping of ``hosts``, ``vars`` and ``children``; anything else there
is an error naming its line (Ansible itself only warns, and then ignores it).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from introspect.inventory.marked_yaml import MarkedLoader, MarkedMap, load_marked_yaml
from introspect.inventory.model import MAX_INVENTORY_BYTES, InventoryError

if TYPE_CHECKING:  # the groups load with an Ansible inventory; hosts.yaml is read with the loader alone
    from introspect.inventory.ansible_groups import AnsibleGroups, Var

_GROUP_KEYS = ("hosts", "vars", "children")


class VaultValue(str):
    """An ``!vault`` value: encrypted, never decrypted here."""


class AnsibleLoader(MarkedLoader):
    """The marked loader, plus Ansible's own tags: ``!unsafe`` (a plain string here) and
    ``!vault`` (kept encrypted; an error only where introspect needs the value)."""


def _unsafe(loader: AnsibleLoader, node: yaml.Node) -> Any:
    return loader.construct_scalar(node) if isinstance(node, yaml.ScalarNode) else loader.construct_object(node)


def _vault(loader: AnsibleLoader, node: yaml.Node) -> VaultValue:
    return VaultValue(loader.construct_scalar(node) if isinstance(node, yaml.ScalarNode) else "")


AnsibleLoader.add_constructor("!unsafe", _unsafe)
AnsibleLoader.add_constructor("!vault", _vault)


def load_ansible_yaml(text: str, source: str) -> Any:
    return load_marked_yaml(text, source, AnsibleLoader)


def parse_yaml_groups(data: Any, source: str) -> AnsibleGroups:
    from introspect.inventory.ansible_groups import AnsibleGroups

    inv = AnsibleGroups(source)
    inv.group("all")
    inv.group("ungrouped")
    if not isinstance(data, MarkedMap):
        raise InventoryError("expected a mapping of group names (usually `all:`)", source=source, line=1)
    for name, body in data.items():
        _group(inv, name, body, data.key_lines.get(name), source)
    return inv


def _group(inv: AnsibleGroups, name: str, body: Any, line: int | None, source: str) -> None:
    group = inv.group(name)
    if body is None:
        return
    if not isinstance(body, MarkedMap):
        raise InventoryError(f"group {name!r}: expected a mapping of hosts/vars/children", source=source,
                             line=line, key=name)
    for dup, dline, first in body.duplicates:
        raise InventoryError(f"duplicate key {dup!r} (first on line {first})", source=source, line=dline,
                             key=name)
    for key, value in body.items():
        kline = body.key_lines.get(key)
        if key not in _GROUP_KEYS:
            raise InventoryError(f"group {name!r}: unknown key {key!r} (allowed: hosts, vars, children)",
                                 source=source, line=kline, key=f"{name}.{key}")
        if value is None:
            continue
        if not isinstance(value, MarkedMap):
            raise InventoryError(f"group {name!r}: `{key}` must be a mapping", source=source, line=kline,
                                 key=f"{name}.{key}")
        if key == "vars":
            group.vars.update(vars_of(value, source))
        elif key == "children":
            for child, child_body in value.items():
                if child not in group.children:
                    group.children.append(child)
                _group(inv, child, child_body, value.key_lines.get(child), source)
        else:
            _hosts(inv, name, value, source)


def _hosts(inv: AnsibleGroups, group: str, hosts: MarkedMap, source: str) -> None:
    from introspect.inventory.ansible_groups import Var, expand_pattern, split_port

    for pattern, host_vars in hosts.items():
        line = hosts.key_lines.get(pattern)
        if host_vars is not None and not isinstance(host_vars, MarkedMap):
            raise InventoryError(f"host {pattern!r}: expected a mapping of variables", source=source, line=line,
                                 key=f"{group}.hosts.{pattern}")
        name, port = split_port(str(pattern))
        variables = vars_of(host_vars, source) if host_vars else {}
        if port is not None:
            variables.setdefault("ansible_port", Var(port, source, line))
        for host in expand_pattern(name, source, line):
            inv.add_host(group, host, line, dict(variables))


def vars_of(mapping: MarkedMap, source: str) -> dict[str, Var]:
    from introspect.inventory.ansible_groups import Var

    return {str(k): Var(v, source, mapping.key_lines.get(k)) for k, v in mapping.items()}


def read_vars_file(path: Path) -> dict[str, Var]:
    """One ``group_vars``/``host_vars`` file (YAML or JSON): its variables with their lines."""
    source = str(path)
    try:
        if path.stat().st_size > MAX_INVENTORY_BYTES:
            raise InventoryError(f"above the {MAX_INVENTORY_BYTES}-byte cap for a vars file", source=source)
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InventoryError(f"cannot read: {exc.strerror or exc}", source=source) from None
    except UnicodeDecodeError as exc:
        raise InventoryError(f"not UTF-8 (byte {exc.start})", source=source) from None
    if text.startswith("$ANSIBLE_VAULT"):
        raise InventoryError("the file is encrypted with ansible-vault, which introspect does not decrypt",
                             source=source, line=1)
    try:
        data = load_ansible_yaml(text, source)
    except yaml.YAMLError as exc:  # pragma: no cover - load_marked_yaml converts these
        raise InventoryError(f"invalid YAML: {exc}", source=source) from None
    if data is None:
        return {}
    if not isinstance(data, MarkedMap):
        raise InventoryError("expected a mapping of variables", source=source, line=1)
    return vars_of(data, source)
