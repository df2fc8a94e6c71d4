"""Load and validate the fleet inventory, ``hosts.yaml``.

The inventory is read once, validated strictly and turned into frozen dataclasses;
everything downstream (transport, checks, history) works on those values only
(validate once, then pass values as data).

Why strict: a typo such as ``adress:`` or ``require:`` would otherwise be ignored and
a health check would pass while checking nothing. So every unknown key, wrong type,
duplicate key and unparsable requirement is an error naming file, line and key.

Why no secrets: the file is shared and committed; passwords belong in ssh-agent,
key files, or environment variables that the file *names* (``passphrase_env``).

Layering ("CLI flags > host entry > defaults"): ``port``,
``user``, ``identity``, ``passphrase_env`` fall back to ``defaults`` at load time and
may stay ``None``, which means "whatever ~/.ssh/config or OpenSSH would use", so an
ssh-config alias keeps its own settings. ``remote_code`` resolves venv > host >
defaults to a plain bool. CLI flags are applied later by the command.

Modules: :mod:`.model` (the dataclasses), :mod:`.marked_yaml` (YAML that keeps line
numbers, in the containers of :mod:`.marked`), :mod:`.checker` (typed converters that
name ``file:line: key``), :mod:`.schema` (the keys of each level, parsing, and host
selection). Importing the package loads neither PyYAML nor ``packaging``: reading a file
does (:mod:`.source`, :mod:`.loader`), and so does checking a requirement.
"""

from __future__ import annotations

from introspect.inventory.model import Defaults, HostEntry, Inventory, InventoryError, VenvEntry, venv_pip
from introspect.inventory.schema import load_inventory, parse_inventory, select_hosts
from introspect.inventory.source import read_inventory


def load_inventory_file(path: str) -> Inventory:
    """hosts.yaml or an Ansible inventory (INI, YAML, --list JSON, inventory script); see .loader."""
    from introspect.inventory.loader import load_inventory_file as load

    return load(path)


__all__ = [
    "Defaults",
    "HostEntry",
    "Inventory",
    "InventoryError",
    "VenvEntry",
    "load_inventory",
    "load_inventory_file",
    "parse_inventory",
    "read_inventory",
    "select_hosts",
    "venv_pip",
]
