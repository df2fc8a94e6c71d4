"""The rows of ``introspect compare``: saved documents read back, live hosts probed.

A saved document is a profile (``probe --json``/``--output``), raw facts (``--save-raw``,
profiled here) or a fleet document (``probe --all-hosts --json``, ``profile --ansible-tree``:
one row per host). Live hosts are probed as ``probe --all-hosts`` probes them (one
connection each, a bounded staggered pool, :func:`introspect.client.fleet.run_fleet`),
and then asked one more, light question the model probe does not: the free space on
the model dir's file system (the ``health`` task's ``statvfs``, over a second short
connection, so that a probe answered from the local cache still gets a fresh figure).
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from introspect.analysis.diff.compare import RowInput
from introspect.client.documents import read_document
from introspect.client.fleet import FleetMonitor
from introspect.client.fleet_items import FleetItem, FreeDisk, failure_of
from introspect.client.model import ProbeRequest, probe_model
from introspect.client.probe_fleet import run_items
from introspect.errors import IntrospectError
from introspect.interrupts import Terminated
from introspect.remote.contract import RAW_SCHEMA, HealthRequest, JSONObject, as_dict
from introspect.transport.base import Executor

if TYPE_CHECKING:
    from introspect.inventory import HostEntry, Inventory

PROFILE_SCHEMA = "introspect.profile/v1"
FLEET_SCHEMA = "introspect.fleet-profiles/v1"
ACCEPTED = (PROFILE_SCHEMA, RAW_SCHEMA, FLEET_SCHEMA)
READ_HINT = "introspect probe --model PATH --json > host.json  # compare reads files like this one"
DISK_TIMEOUT_S = 30.0


# --------------------------------------------------------------------------- saved documents


def rows_from_files(paths: Sequence[str]) -> list[RowInput]:
    """The rows of every file, in the order given; a file that is no profile is an InputError (exit 2)."""
    rows: list[RowInput] = []
    for path in paths:
        document = read_document(path, ACCEPTED, what="a profile, raw facts or a fleet document", hint=READ_HINT)
        rows.extend(_rows_of(path, document))
    return rows


def _rows_of(path: str, document: JSONObject) -> list[RowInput]:
    stem = Path(path).name.removesuffix(".json") if path != "-" else "stdin"
    if document["schema"] == FLEET_SCHEMA:
        return [row_of(item, source="file", file=path) for item in document.get("hosts") or []
                if isinstance(item, dict)]
    if document["schema"] == RAW_SCHEMA:
        from introspect.analysis.profile import build_profile  # ~20 ms of imports, only for raw facts

        return [_checked(RowInput(stem, "file", build_profile(document), file=path,
                                  tokenizer_result=as_dict(document.get("tokenizer_probe")) or None))]
    return [_checked(RowInput(stem, "file", document, file=path))]


def row_of(item: FleetItem | JSONObject, *, source: str, file: str | None = None) -> RowInput:
    """A fleet item (``host``, ``exit_code``, ``profile``, ``error``) as a row."""
    profile = item.get("profile") if isinstance(item.get("profile"), dict) else None
    error = as_dict(item.get("error")) or None
    if profile is None and error is None:
        error = {"type": "NoProfile", "message": "no profile for this host", "hint": None}
    code = item.get("exit_code")
    row = RowInput(str(item.get("host")), source, profile, file=file,
                   exit_code=code if isinstance(code, int) and not isinstance(code, bool) else 1, error=error,
                   tokenizer_result=as_dict(item.get("tokenizer_result")) or None,
                   disk=as_dict(item.get("disk")) or None)
    return _checked(row)


def _checked(row: RowInput) -> RowInput:
    """A profile whose model path was no model dir has nothing to compare: an error row."""
    files = as_dict(as_dict(row.profile).get("files"))
    status = files.get("status")
    if row.error is None and row.profile is not None and status not in (None, "ok"):
        path = str(files.get("model_path") or as_dict(row.profile.get("target")).get("model_path"))
        row.error = {"type": "ModelPathError", "message": f"model path {path!r}: {status}",
                     "hint": f"ls -ld {shlex.quote(path)}  # pass --model the directory that holds config.json"}
        row.exit_code = max(row.exit_code, 2)
    return row


def unique_labels(rows: list[RowInput]) -> list[RowInput]:
    """Every row under a label of its own: a clash is told apart by the file, then by a number."""
    clash = {label for label, n in Counter(row.label for row in rows).items() if n > 1}
    for row in rows:
        if row.label in clash and row.file:
            row.label = f"{row.file}:{row.label}" if row.source == "file" and row.file != row.label else row.file
    seen: Counter[str] = Counter()
    for row in rows:
        seen[row.label] += 1
        if seen[row.label] > 1:
            row.label = f"{row.label}#{seen[row.label]}"
    return rows


# --------------------------------------------------------------------------- live hosts


class CompareInterrupted(Terminated):
    """A signal stopped the live probes: ``items`` in the hosts' order, the unfinished ones
    saying they were not probed (:func:`introspect.client.probe_fleet.not_probed`)."""

    def __init__(self, signum: int, items: list[FleetItem]) -> None:
        super().__init__(signum)
        self.items = items


def probe_for_compare(request: ProbeRequest, hosts: Sequence[HostEntry],
                      make_executor: Callable[[HostEntry], Executor], *, parallel: int,
                      inventory: Inventory | None, ad_hoc: bool = False,
                      on_done: Callable[[FleetItem], None] | None = None) -> list[FleetItem]:
    """One item per host (``host``, ``exit_code``, ``profile``, ``error``, ``tokenizer_result``,
    ``disk``), in ``hosts`` order. ``ad_hoc``: the hosts are no inventory entries (``--host``,
    this machine), so no entry's venv or interpreter applies."""
    monitor = FleetMonitor()

    def work(entry: HostEntry) -> FleetItem:
        executor = make_executor(entry)
        with monitor.connection(entry.name, closer=executor.close):
            outcome = probe_model(request, executor, None if ad_hoc else entry, inventory)
        item: FleetItem = {"host": entry.name, "exit_code": outcome.code, "profile": outcome.profile,
                           "error": failure_of(outcome.raw.get("fatal")),
                           "tokenizer_result": outcome.raw.get("tokenizer_probe"), "disk": None}
        if item["error"] is None:
            second = make_executor(entry)
            with monitor.connection(entry.name, closer=second.close):
                item["disk"] = free_disk(second, outcome.profile, request.files_timeout)
        return item

    return run_items(hosts, work, parallel=parallel, monitor=monitor, on_done=on_done,
                     interrupted=CompareInterrupted)


def free_disk(executor: Executor, profile: dict[str, Any], timeout: float) -> FreeDisk:
    """The model dir's file system's free space, asked under the interpreter that probed it;
    a failure is a reason, never the host's error."""
    target = as_dict(profile.get("target"))
    path = as_dict(profile.get("files")).get("real_path") or target.get("model_path")
    python = target.get("python")
    if not isinstance(path, str) or not isinstance(python, str):
        return {"path": None, "free_bytes": None, "total_bytes": None, "reason": "the probe named no model dir"}
    request = HealthRequest(imports=[], model_dirs=[path], nvidia_smi=False)
    try:
        with executor:
            reply = executor.run_python(python, "health", request.copy(), timeout=min(timeout, DISK_TIMEOUT_S))
    except IntrospectError as exc:
        return {"path": path, "free_bytes": None, "total_bytes": None, "reason": f"not measured: {exc.one_line()}"}
    facts = reply.facts if isinstance(reply.facts, dict) else {}
    found = as_dict(as_dict(facts.get("disk")).get(path))
    error = as_dict(found.get("error"))
    reason = f"not measured: {error.get('message')}" if error else (None if found else "not measured")
    return {"path": path, "free_bytes": found.get("free_bytes"), "total_bytes": found.get("total_bytes"),
            "reason": reason}


__all__ = ["ACCEPTED", "CompareInterrupted", "free_disk", "probe_for_compare", "row_of", "rows_from_files",
           "unique_labels"]
