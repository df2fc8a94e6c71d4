"""Per-host health over time for the fleet page: from the history database ``introspect health``
keeps, or from one ``introspect.health/v1`` run.

Per run and host, one status: ``unreachable`` (its ``reachable`` check failed), else the worst
check (``fail``, ``warn``, else ``pass``); ``none`` when the run did not check it. What changed
and when comes from the drift results the run stored itself (``drift:package-*`` with the
packages before and after, ``drift:host-*``, ``drift:tokenizer-*``:
:mod:`introspect.checks.history_drift`), never recomputed here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from introspect.checks.history import HistoryStore
from introspect.checks.result import CheckResult
from introspect.documents.health import CheckResult as CheckRecord
from introspect.documents.health import HealthDocument
from introspect.remote.contract import as_dict

RANK = {"unreachable": 0, "fail": 1, "warn": 2, "pass": 3, "none": 4}  # the order hosts are listed in


@dataclass
class HostRun:
    status: str  # unreachable, fail, warn, pass, none
    problems: list[str] = field(default_factory=list)  # "venv: check: message" of each fail / warn


@dataclass
class RunColumn:
    id: int | None
    started_at: float
    hosts: dict[str, HostRun]


@dataclass
class Change:
    run_id: int | None
    started_at: float
    host: str
    venv: str | None
    kind: str  # removed, downgraded, changed, upgraded, added; or host / tokenizer
    what: str  # the package, or the event's words
    before: str | None = None
    after: str | None = None


@dataclass
class Health:
    source: str
    runs: list[RunColumn]
    hosts: list[str]
    changes: list[Change]


Row = tuple[str, "str | None", CheckResult]  # (host, venv, result) as a run stored it


def host_run(results: Iterable[tuple[str | None, CheckResult]]) -> HostRun:
    """The status of one host in one run, from its (venv, result) pairs."""
    run = HostRun("pass")
    for venv, result in results:
        if result.check == "reachable" and result.status == "fail":
            run.status = "unreachable"
        elif result.status in ("fail", "warn") and RANK[result.status] < RANK[run.status]:
            run.status = result.status
        if result.status in ("fail", "warn"):
            run.problems.append(f"{venv + ': ' if venv else ''}{result.check}: {result.message}")
    return run


def changes_of(run_id: int | None, started_at: float, rows: Iterable[Row]) -> list[Change]:
    out = []
    for host, venv, result in rows:
        if result.check.startswith("drift:package-"):
            kind = result.check.removeprefix("drift:package-")
            out += [Change(run_id, started_at, host, venv, kind, str(item.get("name")), _version(item, "previous"),
                           _version(item, "current")) for item in map(as_dict, result.evidence.get("packages") or [])]
        elif result.check.startswith(("drift:host-", "drift:tokenizer-")):
            out.append(Change(run_id, started_at, host, venv, result.check.removeprefix("drift:"), result.message))
    return out


def _version(item: Mapping[str, object], key: str) -> str | None:
    """A package's version in a drift result's evidence (JSON, as the run stored it)."""
    return str(item[key]) if item.get(key) is not None else None


def _column(run_id: int | None, started_at: float, rows: list[Row]) -> RunColumn:
    by_host: dict[str, list[tuple[str | None, CheckResult]]] = {}
    for host, venv, result in rows:
        by_host.setdefault(host, []).append((venv, result))
    return RunColumn(run_id, started_at, {host: host_run(pairs) if pairs else HostRun("none")
                                          for host, pairs in by_host.items()})


def from_store(store: HistoryStore, source: str, limit: int) -> Health:
    """The latest ``limit`` runs of the database, oldest first."""
    runs, changes = [], []
    for summary in reversed(store.runs(limit=limit)):
        rows: list[Row] = [(s.host, s.venv or None, s.result) for s in store.run_results(summary.id)]
        runs.append(_column(summary.id, summary.started_at, rows))
        changes += changes_of(summary.id, summary.started_at, rows)
    return Health(source, runs, _host_order(runs), changes)


def from_health_document(document: HealthDocument, source: str) -> Health:
    """One run (``introspect health --json``): each host's checks, its venvs' checks and drift."""
    rows: list[Row] = []
    unchecked = []
    for host in document.hosts:
        if host.reachable is None:  # the run stopped before this host: not checked
            unchecked.append(host.name)
            continue
        rows += [(host.name, None, _result(r)) for r in host.checks]
        for venv in host.venvs:
            rows += [(host.name, venv.path, _result(r)) for r in [*venv.checks, *venv.drift]]
    started = float(document.started_at or 0.0)
    column = _column(document.run_id, started, rows)
    column.hosts.update({name: HostRun("none") for name in unchecked})
    return Health(source, [column], _host_order([column]), changes_of(document.run_id, started, rows))


def _result(item: CheckRecord) -> CheckResult:
    """A check of a health document (its typed record) as the checks and the history store hold it."""
    return CheckResult(item.check, item.status, item.message, item.fix, item.evidence)


def _host_order(runs: list[RunColumn]) -> list[str]:
    """Every host seen, the unreachable ones of the latest run first, then failing, warning, passing."""
    seen = list(dict.fromkeys(host for run in runs for host in run.hosts))
    latest = {host: "none" for host in seen}
    for run in runs:
        latest.update({host: state.status for host, state in run.hosts.items()})
    return sorted(seen, key=lambda host: (RANK[latest[host]], seen.index(host)))


__all__ = ["Change", "Health", "HostRun", "RunColumn", "changes_of", "from_health_document", "from_store", "host_run"]
