"""One health run as its ``introspect.health/v1`` document, shared by ``health --json`` and the API."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from introspect.client.fleet import FleetStats
from introspect.client.health import SCHEMA, HostReport, all_results, report_dict

if TYPE_CHECKING:
    from introspect.documents.health import HealthDocument


def run_document(reports: Sequence[HostReport], run_id: int | None, started: float, finished: float, code: int,
                 fleet: FleetStats, history: dict[str, object]) -> HealthDocument:
    """The ``introspect.health/v1`` document of a run (``health --json``; the API's :func:`health_document`).

    ``fleet``: --parallel and the monitor's connection counters; ``history``: where the run was
    stored, or why it was not."""
    from introspect.documents.health import Counts, HealthDocument

    counts: Counter[str] = Counter(r.status for r in all_results(reports))
    summary = Counts.model_validate({"hosts": len(reports), "unreachable": sum(not r.reachable for r in reports),
                                     **{s: counts[s] for s in ("pass", "fail", "warn", "info")}})
    return HealthDocument(schema=SCHEMA, run_id=run_id, started_at=started, finished_at=finished,
                          seconds=round(finished - started, 3), exit_code=code, fleet=dict(fleet), summary=summary,
                          hosts=[report_dict(r) for r in reports], history=history)
