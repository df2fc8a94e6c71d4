"""The JSON of ``ansible-inventory -i X --list``, from a file or from an executable inventory
script run with ``--list`` (Ansible's ``script`` inventory plugin protocol)::

    {"_meta": {"hostvars": {"gpu01": {"ansible_host": "10.0.0.1"}}},
     "all": {"children": ["ungrouped", "gpu"]},
     "gpu": {"hosts": ["gpu01"], "vars": {...}, "children": [...]}}

A group may also be a bare list of host names (the script protocol's short form).
JSON carries no lines: errors name the file and the host and variable.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from introspect.inventory.ansible_groups import AnsibleGroups, Var
from introspect.inventory.model import MAX_INVENTORY_BYTES, InventoryError

SCRIPT_TIMEOUT_S = 60.0


def parse_list_json(text: str, source: str) -> AnsibleGroups:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InventoryError(f"not valid JSON: {exc}", source=source) from None
    return groups_from_list(data, source)


def groups_from_list(data: Any, source: str) -> AnsibleGroups:
    if not isinstance(data, dict):
        raise InventoryError("expected a JSON object of groups (ansible-inventory --list)", source=source)
    inv = AnsibleGroups(source)
    inv.group("all")
    meta = data.get("_meta") or {}
    hostvars = meta.get("hostvars") if isinstance(meta, dict) else None
    if hostvars is not None and not isinstance(hostvars, dict):
        raise InventoryError("_meta.hostvars must be an object", source=source, key="_meta.hostvars")
    for name, body in data.items():
        if name == "_meta":
            continue
        group = inv.group(name)
        if isinstance(body, list):
            body = {"hosts": body}
        if not isinstance(body, dict):
            raise InventoryError("a group must be an object (hosts, vars, children) or a list of hosts",
                                 source=source, key=name)
        unknown = sorted(set(body) - {"hosts", "vars", "children"})
        if unknown:
            raise InventoryError(f"unknown key {unknown[0]!r} (allowed: hosts, vars, children)", source=source,
                                 key=f"{name}.{unknown[0]}")
        for key, kind in (("hosts", list), ("children", list), ("vars", dict)):
            if not isinstance(body.get(key, kind()), kind):
                raise InventoryError(f"`{key}` must be a {'list' if kind is list else 'mapping'}",
                                     source=source, key=f"{name}.{key}")
        for host in body.get("hosts", []):
            inv.add_host(name, str(host), None, {})
        group.children.extend(str(c) for c in body.get("children", []) if str(c) not in group.children)
        group.vars.update({str(k): Var(v, source, None) for k, v in body.get("vars", {}).items()})
    for host, variables in (hostvars or {}).items():
        if not isinstance(variables, dict):
            raise InventoryError("host variables must be an object", source=source, key=f"_meta.hostvars.{host}")
        inv.hosts.setdefault(str(host), None)
        # --list output has each host's variables merged already: they are its own.
        inv.host_file_vars.setdefault(str(host), {}).update(
            {str(k): Var(v, source, None) for k, v in variables.items()})
    for group in list(inv.groups.values()):
        for child in group.children:
            inv.group(child)
    return inv


def run_inventory_script(path: str) -> AnsibleGroups:
    """Run an executable inventory script with ``--list`` (argv, no shell) and read its JSON."""
    try:
        proc = subprocess.run([path, "--list"], capture_output=True, timeout=SCRIPT_TIMEOUT_S, check=False,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise InventoryError(f"the inventory script did not answer `--list` within {SCRIPT_TIMEOUT_S:.0f} s",
                             source=path) from None
    except OSError as exc:
        raise InventoryError(f"cannot run the inventory script: {exc.strerror or exc}", source=path) from None
    if proc.returncode != 0:
        last = (proc.stderr.decode("utf-8", "replace").strip().splitlines() or ["no output"])[-1]
        raise InventoryError(f"the inventory script exited with status {proc.returncode}: {last}", source=path)
    if len(proc.stdout) > MAX_INVENTORY_BYTES * 16:
        raise InventoryError("the inventory script printed more than 16 MiB", source=path)
    return parse_list_json(proc.stdout.decode("utf-8", "replace"), f"{path} --list")
