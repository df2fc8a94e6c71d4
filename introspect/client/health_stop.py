"""``health`` stopped by a signal (Ctrl-C, SIGTERM, SIGHUP): a partial run, reported and not stored.

The hosts that finished before the signal keep their reports; each host still being checked
(or not started) gets one ``interrupted`` result and no verdict on its venvs: it was not
checked, which is neither reachable nor unreachable. The run is not recorded in the history:
the next run's drift would otherwise read the unchecked hosts' missing facts as changes (and
``history`` would list a run that checked half the fleet as if it were whole).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from introspect.checks.history_guard import HistoryNote
from introspect.checks.result import CheckResult
from introspect.client.health import HealthRun, HostReport, VenvReport, check_and_record
from introspect.interrupts import Terminated, cause, describe
from introspect.inventory import HostEntry


class HealthInterrupted(Terminated):
    """A signal stopped ``health``: ``reports`` in the hosts' order, the unfinished ones made by
    :func:`not_checked`; ``run``: the run around them (set by ``check_and_record``), never stored."""

    def __init__(self, signum: int, reports: Sequence[HostReport]) -> None:
        super().__init__(signum)
        self.reports = list(reports)
        self.run: HealthRun | None = None


def check_or_stop(*args: Any, **kwargs: Any) -> tuple[HealthRun, HealthInterrupted | None]:
    """:func:`check_and_record`'s run; or, when a signal stopped it, the partial run (the hosts that
    finished, the others not checked, nothing stored) and the signal, for the report and exit code."""
    try:
        return check_and_record(*args, **kwargs), None
    except HealthInterrupted as stop:
        if stop.run is None:
            raise
        return stop.run, stop


def not_checked(host: HostEntry, signum: int) -> HostReport:
    """The report of a host the signal stopped before its checks finished: its venvs listed with
    no results (unknown, not failed), no snapshot (so no drift), and why."""
    fix = describe(signum)[1]
    result = CheckResult("interrupted", "warn", f"not checked: the run was {cause(signum)} before this host finished",
                         fix, {"signal": signum})
    return HostReport(host.name, host.url or host.address, [result], [VenvReport(v.path, []) for v in host.venvs],
                      [], 0.0, 0, checked=False)


def not_recorded(signum: int, argv: Sequence[str]) -> HistoryNote:
    """The warning of a run left out of the history, and the command that records a whole one."""
    return HistoryNote(f"history not recorded: the run was {cause(signum)} before every host finished (a partial "
                       "run would read as drift next time)", f"introspect {shlex.join(argv)}  # rerun to record a full run")


__all__ = ["HealthInterrupted", "check_or_stop", "not_checked", "not_recorded"]
