"""The one function that reads an inventory file.

:func:`read_inventory` is the only reader of an inventory file, whatever named it
(``--hosts``, ``$INTROSPECT_HOSTS``, the user config's ``hosts:`` or ``inventory:``):
a new inventory format is one branch in :func:`load_inventory_file`, and every command gets it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from introspect.inventory.model import Inventory
from introspect.userconfig import Chosen


def read_inventory(path: str | Path, chosen: Chosen | None = None) -> Inventory:
    """The inventory at ``path`` (every problem an :class:`InventoryError` naming file and line);
    ``chosen`` (where the path came from) is kept on the result for the report."""
    from introspect.inventory.loader import load_inventory_file  # PyYAML and friends only when one is read

    inventory = load_inventory_file(path)  # hosts.yaml or an Ansible inventory, told apart by content
    return replace(inventory, chosen=chosen) if chosen is not None else inventory
