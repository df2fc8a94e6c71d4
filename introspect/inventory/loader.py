"""One entry point for every inventory file: :func:`load_inventory_file`.

Which format a file is in, decided as Ansible itself decides (its ``yaml`` plugin takes
``.yml``/``.yaml``/``.json``, its ``script`` plugin an executable, its ``ini`` plugin
the rest), with hosts.yaml recognised first:

- ``.yml``/``.yaml``/``.json`` whose top level has only ``defaults`` and ``hosts``:
  introspect's own hosts.yaml (:mod:`.schema`);
- ``.json`` with ``_meta`` (``ansible-inventory --list`` output): :mod:`.ansible_json`;
- other ``.yml``/``.yaml``/``.json``: Ansible's YAML format (:mod:`.ansible_yaml`);
- an executable file: an inventory script, run with ``--list`` (:mod:`.ansible_json`);
- anything else: Ansible's INI format (:mod:`.ansible_ini`).

Ansible's ``group_vars/`` and ``host_vars/`` beside the file are read too. Every
format ends in the same :class:`~introspect.inventory.model.Inventory`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from introspect.inventory.ansible_yaml import load_ansible_yaml, parse_yaml_groups, read_vars_file
from introspect.inventory.marked import MarkedMap
from introspect.inventory.model import MAX_INVENTORY_BYTES, Inventory, InventoryError
from introspect.inventory.schema import parse_inventory_data

if TYPE_CHECKING:  # the Ansible formats' readers load only for an Ansible inventory, not for hosts.yaml
    from introspect.inventory.ansible_groups import AnsibleGroups

_YAML_SUFFIXES = (".yml", ".yaml", ".json")
_HOSTS_YAML_KEYS = {"defaults", "hosts"}


def load_inventory_file(path: str | Path) -> Inventory:
    """Read and validate an inventory: hosts.yaml, or an Ansible inventory (INI, YAML,
    ``--list`` JSON, or an executable inventory script). Every problem is an
    :class:`InventoryError` naming the file (and the line, where the format has lines)."""
    source = str(path)
    p = Path(path).expanduser()
    if p.suffix.lower() not in _YAML_SUFFIXES and p.is_file() and os.access(p, os.X_OK):
        from introspect.inventory.ansible_json import run_inventory_script

        groups = run_inventory_script(str(p))
    else:
        text = _read(p, source)
        if p.suffix.lower() in _YAML_SUFFIXES:
            data = load_ansible_yaml(text, source)
            if isinstance(data, MarkedMap) and data and set(data) <= _HOSTS_YAML_KEYS:
                return parse_inventory_data(data, source)
            if isinstance(data, MarkedMap) and "_meta" in data:
                from introspect.inventory.ansible_json import groups_from_list

                groups = groups_from_list(data, source)
            else:
                groups = parse_yaml_groups(data, source)
        elif _is_hosts_yaml(text, source):
            return parse_inventory_data(load_ansible_yaml(text, source), source)
        else:
            from introspect.inventory.ansible_ini import parse_ini

            groups = parse_ini(text, source)
    return _finish(groups, p.parent)


def _is_hosts_yaml(text: str, source: str) -> bool:
    """A hosts.yaml under another name (``--hosts fleet``): YAML with only its top keys."""
    try:
        data = load_ansible_yaml(text, source)
    except InventoryError:
        return False  # INI is rarely valid YAML
    return isinstance(data, MarkedMap) and bool(data) and set(data) <= _HOSTS_YAML_KEYS


def _finish(groups: AnsibleGroups, inventory_dir: Path) -> Inventory:
    from introspect.inventory.ansible_vars import to_inventory

    groups.load_vars_dirs(inventory_dir, read_vars_file)
    return to_inventory(groups)


def _read(p: Path, source: str) -> str:
    try:
        size = p.stat().st_size
        if size > MAX_INVENTORY_BYTES:
            raise InventoryError(f"{size} bytes is above the {MAX_INVENTORY_BYTES}-byte cap for an inventory",
                                 source=source)
        return p.read_text(encoding="utf-8")
    except OSError as exc:
        raise InventoryError(f"cannot read the inventory: {exc.strerror or exc}", source=source) from None
    except UnicodeDecodeError as exc:
        raise InventoryError(f"not UTF-8 (byte {exc.start})", source=source) from None
