"""One health run as its ``introspect.health/v1`` document, shared by ``health --json`` and the API."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from introspect.client.health import SCHEMA, HostReport, all_results, report_dict


def run_document(reports: Sequence[HostReport], run_id: int | None, started: float, finished: float, code: int,
                  fleet: dict[str, Any], history: dict[str, Any]) -> dict[str, Any]:
    """The ``introspect.health/v1`` document of a run (``health --json``; the API's :func:`health_document`)."""
    counts: Counter[str] = Counter(r.status for r in all_results(reports))
    return {
        "schema": SCHEMA,
        "run_id": run_id,
        "started_at": started,
        "finished_at": finished,
        "seconds": round(finished - started, 3),
        "exit_code": code,
        "fleet": fleet,
        "summary": {"hosts": len(reports), "unreachable": sum(not r.reachable for r in reports),
                    **{s: counts[s] for s in ("pass", "fail", "warn", "info")}},
        "hosts": [report_dict(r) for r in reports],
        "history": history,  # where the run was stored, or why it was not
    }
