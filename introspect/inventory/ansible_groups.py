"""An Ansible inventory's groups and variables, as the INI, YAML and JSON readers fill them.

Each reader (:mod:`.ansible_ini`, :mod:`.ansible_yaml`, :mod:`.ansible_json`) fills one
:class:`AnsibleGroups`; :meth:`AnsibleGroups.host_vars` then merges a host's variables
in Ansible's order, which is ansible-core's ``VariableManager.get_vars`` with the
default ``VARIABLE_PRECEDENCE`` (lowest first):

1. the inventory file's vars of ``all``, then of the host's other groups sorted
   by (depth, ``ansible_group_priority``, name);
2. ``group_vars/`` beside the inventory: ``all``, then the other groups, same order;
3. the inventory file's vars of the host;
4. ``host_vars/<host>`` beside the inventory.

A later value replaces an earlier one (the default ``hash_behaviour = replace``).
Every value keeps the file and line it came from (:class:`Var`), so a bad value is
reported where it was written.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from introspect.inventory.marked import MarkedMap, MarkedSeq
from introspect.inventory.model import InventoryError

IMPLICIT_GROUPS = ("all", "ungrouped")


@dataclass(frozen=True)
class Var:
    value: Any
    source: str
    line: int | None


@dataclass
class Group:
    name: str
    hosts: list[str] = field(default_factory=list)
    vars: dict[str, Var] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)


@dataclass
class AnsibleGroups:
    """Groups, their hosts, and the inventory file's variables of groups and hosts."""

    source: str
    groups: dict[str, Group] = field(default_factory=dict)
    hosts: dict[str, int | None] = field(default_factory=dict)  # host -> line of its first mention
    host_file_vars: dict[str, dict[str, Var]] = field(default_factory=dict)
    # group_vars/ and host_vars/ files beside the inventory (name -> their vars)
    dir_group_vars: dict[str, dict[str, Var]] = field(default_factory=dict)
    dir_host_vars: dict[str, dict[str, Var]] = field(default_factory=dict)

    def group(self, name: str) -> Group:
        return self.groups.setdefault(name, Group(name))

    def add_host(self, group: str, host: str, line: int | None, variables: dict[str, Var]) -> None:
        self.hosts.setdefault(host, line)
        members = self.group(group).hosts
        if host not in members:
            members.append(host)
        self.host_file_vars.setdefault(host, {}).update(variables)

    # ------------------------------------------------------------ group structure

    def parents(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {name: set() for name in self.groups}
        for group in self.groups.values():
            for child in group.children:
                out.setdefault(child, set()).add(group.name)
        return out

    def depths(self) -> dict[str, int]:
        """Longest path from ``all`` (a group without parents is a child of ``all``)."""
        parents = self.parents()
        memo: dict[str, int] = {"all": 0}

        def depth(name: str, seen: frozenset[str]) -> int:
            if name in memo:
                return memo[name]
            if name in seen:
                raise InventoryError(f"group {name!r} is its own ancestor (children loop)", source=self.source)
            ups = [p for p in parents.get(name, ()) if p != "all"]
            memo[name] = 1 + max((depth(p, seen | {name}) for p in ups), default=0)
            return memo[name]

        return {name: depth(name, frozenset()) for name in self.groups}

    def groups_of(self, host: str) -> list[str]:
        """Every group the host is in, directly or through children, ``all`` excluded;
        in Ansible's sort order (depth, ansible_group_priority, name)."""
        parents = self.parents()
        found: set[str] = set()
        todo = [g.name for g in self.groups.values() if host in g.hosts]
        while todo:
            name = todo.pop()
            if name not in found:
                found.add(name)
                todo.extend(parents.get(name, ()))
        found.discard("all")
        depths = self.depths()
        return sorted(found, key=lambda g: (depths.get(g, 1), self._priority(g), g))

    def _priority(self, group: str) -> int:
        var = self.groups[group].vars.get("ansible_group_priority") if group in self.groups else None
        value = var.value if var is not None else 1
        return value if isinstance(value, int) and not isinstance(value, bool) else 1

    # ------------------------------------------------------------------ variables

    def host_vars(self, host: str) -> dict[str, Var]:
        ordered = ["all", *self.groups_of(host)]
        merged: dict[str, Var] = {}
        for name in ordered:
            merged.update(self.groups[name].vars if name in self.groups else {})
        for name in ordered:
            merged.update(self.dir_group_vars.get(name, {}))
        merged.update(self.host_file_vars.get(host, {}))
        merged.update(self.dir_host_vars.get(host, {}))
        return merged

    def load_vars_dirs(self, inventory_dir: Path, read: Any) -> None:
        """Read ``group_vars/`` and ``host_vars/`` beside the inventory with ``read(path)``
        (a function giving ``{name: Var}``)."""
        for sub, names, target in (("group_vars", list(self.groups) + ["all"], self.dir_group_vars),
                                   ("host_vars", list(self.hosts), self.dir_host_vars)):
            folder = inventory_dir / sub
            if not folder.is_dir():
                continue
            for name in dict.fromkeys(names):
                for path in vars_files(folder, name):
                    target.setdefault(name, {}).update(read(path))


def vars_files(folder: Path, name: str) -> list[Path]:
    """Ansible's host_group_vars plugin: ``NAME``, ``NAME.yml|.yaml|.json``, or every such
    file under the directory ``NAME/`` (sorted)."""
    found: list[Path] = []
    for candidate in (folder / name, *(folder / f"{name}{ext}" for ext in (".yml", ".yaml", ".json"))):
        if candidate.is_file():
            found.append(candidate)
        elif candidate.is_dir():
            found.extend(sorted(p for p in candidate.rglob("*") if p.is_file()
                                and (p.suffix in ("", ".yml", ".yaml", ".json")) and not p.name.startswith(".")))
    return found


# ---------------------------------------------------------------------- host patterns


def expand_pattern(pattern: str, source: str, line: int | None) -> list[str]:
    """``gpu[01:32]``, ``node-[a:c]``, ``db[1:10:2]``, several ranges in one name: the names
    they stand for, as ansible-core's ``expand_hostname_range`` makes them."""
    if "[" not in pattern:
        return [pattern]
    head, rest = pattern.split("[", 1)
    if "]" not in rest:
        raise InventoryError(f"host range {pattern!r} has no closing ']'", source=source, line=line)
    inner, tail = rest.split("]", 1)
    bounds = inner.split(":")
    if len(bounds) not in (2, 3) or not bounds[1]:
        raise InventoryError(f"host range [{inner}] must be [begin:end] or [begin:end:step]",
                             source=source, line=line)
    begin, end = bounds[0] or "0", bounds[1]
    try:
        step = int(bounds[2]) if len(bounds) == 3 else 1
        if step < 1:
            raise ValueError
    except ValueError:
        raise InventoryError(f"host range [{inner}]: the step must be a positive integer",
                             source=source, line=line) from None
    items: list[str]
    if begin in string.ascii_letters and end in string.ascii_letters:
        lo, hi = string.ascii_letters.index(begin), string.ascii_letters.index(end)
        if lo > hi:
            raise InventoryError(f"host range [{inner}]: begin must be <= end", source=source, line=line)
        items = list(string.ascii_letters[lo:hi + 1:step])
    else:
        if not (begin.isdigit() and end.isdigit()):
            raise InventoryError(f"host range [{inner}] is neither numeric nor one letter to one letter",
                                 source=source, line=line)
        width = len(begin) if begin.startswith("0") and len(begin) > 1 else 0
        if width and len(end) != width:
            raise InventoryError(f"host range [{inner}]: zero-padded begin and end must be equally long",
                                 source=source, line=line)
        items = [str(n).zfill(width) for n in range(int(begin), int(end) + 1, step)]
    return [name for item in items for name in expand_pattern(head + item + tail, source, line)]


def split_port(pattern: str) -> tuple[str, int | None]:
    """``host:2222`` -> (host, 2222); IPv6 addresses (several colons) are left alone."""
    if pattern.count(":") == 1:
        name, port = pattern.split(":")
        if port.isdigit():
            return name, int(port)
    return pattern, None


def marked(value: Any, line: int | None) -> Any:
    """A plain value (INI literal, JSON) as marked mappings and lists, every line ``line``."""
    if isinstance(value, dict) and not isinstance(value, MarkedMap):
        out = MarkedMap((k, marked(v, line)) for k, v in value.items())
        out.line, out.key_lines, out.duplicates = line or 0, {k: line or 0 for k in value}, []
        return out
    if isinstance(value, list) and not isinstance(value, MarkedSeq):
        seq = MarkedSeq(marked(v, line) for v in value)
        seq.line, seq.item_lines = line or 0, [line or 0] * len(value)
        return seq
    return value
