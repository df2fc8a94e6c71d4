"""``profile --ansible-tree`` and ``health --ansible-tree``: native runs over Ansible's results.

Each host of the tree gets an :class:`~introspect.client.ansible_tree.AnsibleResultExecutor`;
the profile is then made by :func:`introspect.client.model.gather` and the health report
by :func:`introspect.client.health.check_host`, the same code a native run goes through.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from introspect.analysis.profile import build_profile, exit_code
from introspect.client.ansible_tree import AnsibleResultExecutor, HostResult, read_tree
from introspect.client.fleet_items import FleetItem, TreeProfiles, failure_from, failure_of
from introspect.client.model import ProbeOptions, gather, run_error
from introspect.client.runner import target_of
from introspect.errors import InputError, IntrospectError
from introspect.inventory import Defaults, HostEntry, Inventory, InventoryError
from introspect.inventory.ansible_groups import marked
from introspect.inventory.schema import parse_inventory_data
from introspect.remote.contract import (
    DEFAULT_FILES_TIMEOUT,
    DEFAULT_MODEL_CODE_TIMEOUT,
    DEFAULT_TOKENIZER_TIMEOUT,
    RAW_SCHEMA,
)
from introspect.transport.base import Executor

PROFILES_SCHEMA = "introspect.fleet-profiles/v1"


# ------------------------------------------------------------------------ profiles


def profile_from_result(host: HostResult) -> FleetItem:
    """One host's item (``host``, ``exit_code``, ``profile``, ``error``), as ``probe --all-hosts`` makes it."""
    executor = AnsibleResultExecutor(host, "introspect_model")
    doc = host.facts("introspect_model") or {}
    target = doc.get("target") or {}
    asked = doc.get("options") or {}
    calls = {c.get("task"): c for c in doc.get("calls") or [] if isinstance(c, dict)}
    options = ProbeOptions(
        model_path=str(target.get("model_path") or "?"),
        python=str(target.get("python") or "python3"),
        venv=target.get("venv"),
        remote_code=asked.get("remote_code", True) is not False,
        load_tokenizer=bool(asked.get("load_tokenizer")) and "tokenizer" not in (doc.get("skipped_in_check_mode") or ()),
        files_timeout=float((calls.get("model") or {}).get("timeout") or DEFAULT_FILES_TIMEOUT),
        tokenizer_timeout=float((calls.get("tokenizer") or {}).get("timeout") or DEFAULT_TOKENIZER_TIMEOUT),
        # Asked of the module with `model_code: true` (a run without it has no such record to answer).
        load_model_code=bool(asked.get("load_model_code")) and "model_code" not in (doc.get("skipped_in_check_mode") or ()),
        model_code_timeout=float((calls.get("model_code") or {}).get("timeout") or DEFAULT_MODEL_CODE_TIMEOUT),
    )
    python = str(target.get("python") or "python3")
    try:
        executor.connect()
        raw = gather(executor, options, target_of(executor, python, options.venv, options.model_path))
    except IntrospectError as exc:
        raw = {"schema": RAW_SCHEMA, "target": target_of(executor, python, options.venv,
                                                                 options.model_path),
               "errors": [], "timings": {}, "tokenizer_probe": None,
               "fatal": exc.as_dict() | {"exit_code": exc.exit_code}}
    profile = build_profile(raw)
    error = run_error(raw)
    return {"host": host.name, "exit_code": exit_code(profile, raw), "profile": profile,
            "error": failure_of(raw.get("fatal")) or (failure_from(error) if error else None)}


def profiles_from_tree(directory: str) -> TreeProfiles:
    """The fleet-profiles document of every host in the tree."""
    items = [profile_from_result(host) for host in read_tree(directory)]
    models = sorted({str((i["profile"] or {}).get("target", {}).get("model_path")) for i in items})
    return {"schema": PROFILES_SCHEMA, "model": models[0] if len(models) == 1 else models, "hosts": items,
            "fleet": {"source": "ansible", "tree": directory}}


# -------------------------------------------------------------------------- health


def health_hosts(directory: str, inventory: Inventory | None,
                 selected: Sequence[HostEntry] | None) -> tuple[list[HostEntry], Callable[[HostEntry], Executor]]:
    """The hosts to report and an executor per host over its Ansible result.

    With an inventory, its selected hosts are reported (one without a result in the tree
    is unreachable); without one, the hosts of the tree, with the venvs the module was given.
    """
    results = {r.name: r for r in read_tree(directory)}
    hosts = list(selected) if inventory is not None and selected is not None else [
        _entry_from_result(r) for r in results.values()]

    def executor_for(host: HostEntry) -> Executor:
        result = results.get(host.name) or HostResult(host.name, directory, {
            "unreachable": True, "msg": f"no result for {host.name} in {directory} (not in the Ansible run?)"})
        return AnsibleResultExecutor(result, "introspect_health")

    return hosts, executor_for


def tree_hosts(directory: str, inventory: Inventory | None, select: Callable[[Inventory], list[HostEntry]]
               ) -> tuple[Inventory, list[HostEntry], Callable[[HostEntry], Executor]]:
    """:func:`health_hosts` with ``select`` (the command's --only/--tags) applied: to the named
    inventory, else to the hosts of the tree."""
    hosts, factory = health_hosts(directory, inventory, select(inventory) if inventory else None)
    if inventory is None:
        inventory = Inventory(defaults=Defaults(), hosts=tuple(hosts), source=directory)
        hosts = select(inventory)
    return inventory, hosts, factory


def _entry_from_result(result: HostResult) -> HostEntry:
    """A host entry with the venvs the venv_health module checked, validated as hosts.yaml's."""
    facts = result.facts("introspect_health") or {}
    venvs = facts.get("venvs")
    host: dict[str, Any] = {"address": result.name}
    if isinstance(venvs, list) and venvs:
        host["venvs"] = venvs
    try:
        inventory = parse_inventory_data(marked({"hosts": {result.name: host}}, None), result.path)
    except InventoryError as exc:
        raise InputError(f"the venvs in Ansible's result: {exc}",
                         hint="give the module the same venvs as hosts.yaml's `venvs:` entries") from None
    return inventory.hosts[0]
