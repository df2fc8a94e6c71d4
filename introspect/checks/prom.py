"""Prometheus text exposition of a health run, for node_exporter's textfile collector.

node_exporter reads every ``*.prom`` file in its directory on each scrape, so the
file must never be seen half-written: ``prometheus_client.write_to_textfile`` writes
a temporary file next to it and renames it over the target (atomic on one
filesystem). An own ``CollectorRegistry`` keeps the process's default metrics
(python_gc_*, process_*) out of the file.

Series:

- ``introspect_health_check{host, venv, check, status}``: 1 unless the check failed
  (pass, info and warn are 1; fail is 0), so ``== 0`` alerts on failures and the
  ``status`` label tells warn from pass.
- ``introspect_health_host_up{host}``: 1 when connect and auth succeeded.
- ``introspect_health_last_run_timestamp_seconds``: when the run finished (unix time),
  for a "the timer stopped running" alert.
- ``introspect_health_run_duration_seconds``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry, Gauge, write_to_textfile

from introspect.checks.health import CheckResult


def build_registry(
    results: Iterable[tuple[str, str | None, CheckResult]],
    host_up: Mapping[str, bool],
    started_at: float,
    finished_at: float,
) -> CollectorRegistry:
    """``results`` as (host, venv or None for host-level checks, result)."""
    registry = CollectorRegistry(auto_describe=True)
    check = Gauge("introspect_health_check", "1 unless the health check failed (status label: pass/warn/info/fail)",
                  ["host", "venv", "check", "status"], registry=registry)
    up = Gauge("introspect_health_host_up", "1 when introspect could connect and authenticate to the host",
               ["host"], registry=registry)
    last = Gauge("introspect_health_last_run_timestamp_seconds", "Unix time when the last health run finished",
                 registry=registry)
    duration = Gauge("introspect_health_run_duration_seconds", "Wall time of the last health run",
                     registry=registry)
    # Sorted so that two runs with the same outcome give byte-identical files.
    for host, venv, r in sorted(results, key=lambda t: (t[0], t[1] or "", t[2].check)):
        check.labels(host=host, venv=venv or "", check=r.check, status=r.status).set(0 if r.status == "fail" else 1)
    for host in sorted(host_up):
        up.labels(host=host).set(1 if host_up[host] else 0)
    last.set(finished_at)
    duration.set(max(0.0, finished_at - started_at))
    return registry


def write_prom(
    path: str | os.PathLike[str],
    results: Iterable[tuple[str, str | None, CheckResult]],
    host_up: Mapping[str, bool],
    started_at: float,
    finished_at: float,
) -> None:
    """Write the exposition file atomically (temp file in the same directory, then rename)."""
    registry = build_registry(results, host_up, started_at, finished_at)
    write_to_textfile(os.fspath(path), registry)


__all__ = ["build_registry", "write_prom"]
