"""One health run as its ``introspect.health/v1`` document, shared by ``health --json`` and the API.

:func:`run_json` builds the document's JSON object from the run's dataclasses without pydantic:
``health --json`` prints it as is, because importing pydantic and building the document's models
costs a cron-driven ``health`` more CPU than the rest of its start-up. :func:`run_document` (the
API's typed document) validates that same object into :class:`HealthDocument`, so the two cannot
differ; tests check that the model writes the object back key for key.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from introspect.client.fleet import FleetStats
from introspect.client.health import SCHEMA, HostReport, all_results

if TYPE_CHECKING:
    from introspect.checks.result import CheckResult
    from introspect.documents.health import HealthDocument
    from introspect.remote.contract import JSONObject


def run_json(reports: Sequence[HostReport], run_id: int | None, started: float, finished: float, code: int,
             fleet: FleetStats, history: dict[str, object]) -> JSONObject:
    """The ``introspect.health/v1`` object of a run, keys in the order of :class:`HealthDocument`'s fields.

    ``fleet``: --parallel and the monitor's connection counters; ``history``: where the run was
    stored, or why it was not."""
    counts: Counter[str] = Counter(r.status for r in all_results(reports))
    summary: dict[str, Any] = {"hosts": len(reports), "unreachable": sum(not r.reachable for r in reports),
                               **{s: counts[s] for s in ("pass", "fail", "warn", "info")}}
    return {"schema": SCHEMA, "run_id": run_id, "started_at": started, "finished_at": finished,
            "seconds": round(finished - started, 3), "exit_code": code, "fleet": dict(fleet), "summary": summary,
            "hosts": [host_json(r) for r in reports], "history": history}


def host_json(report: HostReport) -> JSONObject:
    """One host (documents/health.py ``HostReport``); ``reachable`` is null when not checked."""
    venvs = [{"path": v.path, "checks": [check_json(r) for r in v.results], "drift": [check_json(r) for r in v.drift]}
             for v in report.venvs]
    return {"name": report.name, "address": report.address, "reachable": report.reachable if report.checked else None,
            "seconds": round(report.seconds, 3), "connections": report.connections,
            "checks": [check_json(r) for r in report.host_results], "venvs": venvs}


def check_json(result: CheckResult) -> JSONObject:
    """One check (documents/health.py ``CheckResult``)."""
    return {"check": result.check, "status": result.status, "message": result.message, "fix": result.fix,
            "evidence": result.evidence}


def run_document(reports: Sequence[HostReport], run_id: int | None, started: float, finished: float, code: int,
                 fleet: FleetStats, history: dict[str, object]) -> HealthDocument:
    """The typed ``introspect.health/v1`` document of a run (the API's :func:`health_document`):
    :func:`run_json`, validated."""
    from introspect.documents.health import HealthDocument

    return HealthDocument.model_validate(run_json(reports, run_id, started, finished, code, fleet, history))
