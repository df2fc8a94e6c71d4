"""Ansible's INI inventory format, read as ansible-core's ``ini`` inventory plugin reads it.

::

    gpu-spare ansible_host=10.0.0.9          # before any section: group "ungrouped"
    [gpu]
    gpu[01:32] ansible_user=ml               # a range; key=value host variables
    edge:2222                                # host:port
    [gpu:vars]
    introspect_venvs=[{"path": "/opt/venvs/serve"}]
    [fleet:children]
    gpu

Values are Python literals where they parse as one (``2222`` is a number, ``[...]`` a
list), else strings, as the plugin's ``_parse_value`` does with ``ast.literal_eval``.
"""

from __future__ import annotations

import ast
import re
import shlex
import warnings
from typing import Any

from introspect.inventory.ansible_groups import AnsibleGroups, Var, expand_pattern, split_port
from introspect.inventory.model import InventoryError

_SECTION = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:[;#].*)?$")
_GROUP_NAME = re.compile(r"^([^:\]\s]+)\s*(?:[;#].*)?$")


def parse_value(text: str) -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return text
    if isinstance(value, (bytes, complex)) or value is Ellipsis:
        return text  # not variable types Ansible keeps
    if isinstance(value, (set, tuple)):
        return list(value)
    return value


def parse_ini(text: str, source: str) -> AnsibleGroups:
    inv = AnsibleGroups(source)
    inv.group("all")
    inv.group("ungrouped")
    group, state = "ungrouped", "hosts"
    pending_children: list[tuple[str, str, int]] = []  # (parent, child, line)
    declared_vars: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        section = _SECTION.match(line)
        if section:
            group, state = section.group(1), section.group(2) or "hosts"
            if state not in ("hosts", "children", "vars"):
                raise InventoryError(f"section [{group}:{state}] has unknown type {state!r} "
                                     "(hosts, children or vars)", source=source, line=number)
            if state == "vars":
                declared_vars.setdefault(group, number)
            else:
                inv.group(group)
            continue
        if line.startswith("["):
            raise InventoryError(f"invalid section line {line!r} (no blanks inside [...])", source=source,
                                 line=number)
        if state == "hosts":
            _host_line(inv, group, line, source, number)
        elif state == "vars":
            if "=" not in line:
                raise InventoryError(f"expected key=value, got {line!r}", source=source, line=number)
            key, value = (part.strip() for part in line.split("=", 1))
            inv.group(group).vars[key] = Var(parse_value(value), source, number)
        else:
            named = _GROUP_NAME.match(line)
            if not named:
                raise InventoryError(f"expected a group name, got {line!r}", source=source, line=number)
            pending_children.append((group, named.group(1), number))
    for parent, child, number in pending_children:
        if child not in inv.groups:
            raise InventoryError(f"section [{parent}:children] includes undefined group {child!r}",
                                 source=source, line=number)
        if child not in inv.groups[parent].children:
            inv.groups[parent].children.append(child)
    for name, number in declared_vars.items():
        if name not in inv.groups:
            raise InventoryError(f"section [{name}:vars] is for undefined group {name!r}", source=source,
                                 line=number)
    return inv


def _host_line(inv: AnsibleGroups, group: str, line: str, source: str, number: int) -> None:
    try:
        words = shlex.split(line, comments=True)
    except ValueError as exc:
        raise InventoryError(f"cannot parse host line {line!r}: {exc}", source=source, line=number) from None
    if not words:
        return
    pattern, port = split_port(words[0])
    variables: dict[str, Var] = {}
    for word in words[1:]:
        if "=" not in word:
            raise InventoryError(f"expected key=value host variable, got {word!r}", source=source, line=number)
        key, value = word.split("=", 1)
        variables[key] = Var(parse_value(value), source, number)
    if port is not None:
        variables.setdefault("ansible_port", Var(port, source, number))
    for host in expand_pattern(pattern, source, number):
        inv.add_host(group, host, number, dict(variables))
