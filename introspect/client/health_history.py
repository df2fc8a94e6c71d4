"""Drift and history of a health run: each snapshot against the last stored one, then the run stored.

(Kept apart from client/health.py, which checks the hosts; both are imported from there.)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from introspect.checks.history import HistoryStore, drift
from introspect.checks.history_guard import GuardedHistory

if TYPE_CHECKING:
    from introspect.client.health import HostReport


def attach_drift(reports: Iterable[HostReport], store: HistoryStore | GuardedHistory) -> None:
    """Compare each snapshot with the latest stored one for its (host, venv).

    Host-level drift (unreachable/recovered) would repeat once per venv: it is kept
    once, with the host's results; package and tokenizer drift go to their venv.
    """
    for report in reports:
        by_path = {v.path: v for v in report.venvs}
        for snap in report.snapshots:
            for finding in drift(store.previous_snapshot(snap.host, snap.venv), snap):
                if finding.check.startswith("drift:host-"):
                    if all(r.check != finding.check for r in report.host_results):
                        report.host_results.append(finding)
                elif snap.venv in by_path:
                    by_path[snap.venv].drift.append(finding)


def record_run(store: HistoryStore | GuardedHistory, reports: Sequence[HostReport], *, argv: Sequence[str],
               started_at: float, finished_at: float) -> int | None:
    rows = [row for report in reports for row in report.rows()]
    snapshots = [snap for report in reports for snap in report.snapshots]
    return store.record_run(argv=argv, started_at=started_at, finished_at=finished_at, results=rows,
                            snapshots=snapshots)


__all__ = ["attach_drift", "record_run"]
