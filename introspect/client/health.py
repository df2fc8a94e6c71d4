"""The controller side of ``health``: one connection per host, its venvs' probes as channels.

Per host (:func:`check_host`): ONE executor connection (never a second one for a
retry or a fallback). Over it, as concurrent channels of
:func:`introspect.client.runner.run_channels`:

- the ``health`` task once per venv (facts: interpreter, distributions, imports, disk,
  GPUs), in the venv's own interpreter;
- the ``tokenizer`` task once per (venv, model), isolated with its own timeout, so a
  hanging or crashing tokenizer load costs nothing else.

Channels per host are bounded (:attr:`HealthOptions.channels`) below sshd's default
``MaxSessions`` of 10. The facts are judged by the pure :func:`evaluate_venv`; a host
that cannot be reached gets one host-level ``reachable`` failure carrying the
transport's one-line cause and its fix. :func:`run_health` runs hosts through the
bounded, paced :func:`introspect.client.fleet.run_fleet`; :func:`attach_drift` compares
each snapshot with the history, :func:`record_run` stores the run.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypedDict

from introspect.checks.health import (
    DEFAULT_IMPORT_TIMEOUT,
    CheckResult,
    check_reachable,
    evaluate_venv,
    probe_request,
)
from introspect.checks.history import Snapshot, snapshot_from
from introspect.checks.history_guard import GuardedHistory
from introspect.client.fleet import FleetInterrupted, FleetMonitor, FleetStats, ItemFailure, run_fleet
from introspect.client.fleet_ahead import DialAhead
from introspect.client.fleet_pacing import endpoint_of
from introspect.client.health_history import attach_drift, record_run
from introspect.client.runner import Channel, ChannelResult, run_channels
from introspect.errors import ConnectError, IntrospectError, ProbeTimeout
from introspect.inventory import HostEntry, VenvEntry
from introspect.remote.contract import DEFAULT_TOKENIZER_TIMEOUT, JSONObject
from introspect.transport.base import Executor
from introspect.userconfig import choose_remote_code

if TYPE_CHECKING:
    from introspect.documents import health as documents

SCHEMA: Final = "introspect.health/v1"

# sshd's MaxSessions defaults to 10 channels per connection; stay well below it so a
# host with many venvs and models is never refused a channel (and its CPU is not
# swamped by parallel transformers imports).
DEFAULT_CHANNELS = 4


@dataclass(frozen=True)
class HealthOptions:
    probe_timeout: float = DEFAULT_TOKENIZER_TIMEOUT  # seconds for each remote task (health probe, tokenizer)
    import_timeout: float = DEFAULT_IMPORT_TIMEOUT
    channels: int = DEFAULT_CHANNELS
    nvidia_smi: bool = True


@dataclass
class VenvReport:
    path: str
    results: list[CheckResult]
    drift: list[CheckResult] = field(default_factory=list)


@dataclass
class HostReport:
    name: str
    address: str
    host_results: list[CheckResult]  # `reachable`, host-level drift (up/down)
    venvs: list[VenvReport]
    snapshots: list[Snapshot]
    seconds: float
    connections: int  # connections this host's check opened: 1 (0 if it failed before connecting)
    checked: bool = True  # False: a signal stopped the run before this host finished (health_stop.py)

    @property
    def reachable(self) -> bool:
        return not any(r.check == "reachable" and r.status == "fail" for r in self.host_results)

    def rows(self) -> list[tuple[str, str | None, CheckResult]]:
        """Every result as (host, venv path or None for host-level, result), drift included."""
        out: list[tuple[str, str | None, CheckResult]] = [(self.name, None, r) for r in self.host_results]
        for venv in self.venvs:
            out.extend((self.name, venv.path, r) for r in [*venv.results, *venv.drift])
        return out


# ----------------------------------------------------------------------- one host


@dataclass(frozen=True)
class _Job:
    task: str  # "health" or "tokenizer"
    venv: VenvEntry
    model: str | None = None


class LostEvidence(TypedDict, total=False):
    """What the ``reachable`` check of a host that could not be reached, or was lost, adds as evidence."""

    type: str  # the exception class
    stage: str | None  # the transport's stage (tcp, auth, ...)
    after_login: bool  # the connection dropped after login


@dataclass
class _Outcome:
    facts: Any = None
    error: str | None = None  # why the task produced no facts (one line)
    error_type: str | None = None  # exception class, or the remote error record's type
    lost: ConnectError | None = None  # the connection itself failed under the task


def check_host(host: HostEntry, executor: Executor, options: HealthOptions = HealthOptions(),
               monitor: FleetMonitor | None = None) -> HostReport:
    """All checks of one host over one connection; the connection is closed on return."""
    started = time.monotonic()
    monitor = monitor or FleetMonitor(0.0)
    with monitor.connection(host.name, closer=executor.close):
        try:
            reach_error, reach_fix, evidence = _connect(lambda: monitor.login(endpoint_of(host), executor.connect))
            if reach_error is not None:
                return _unreachable(host, reach_error, reach_fix, evidence, time.monotonic() - started,
                                    executor.connections_opened)
            outcomes = _run_jobs(executor, _jobs(host), options, (host.name, host.address))
        finally:
            executor.close()
    lost = next((o.lost for o in outcomes.values() if o.lost is not None), None)
    if lost is not None:
        # As for probe (exit 3): a connection reset or closed after login is the host's failure, not
        # its venvs' (whose checks are then unknown, not failed). `ssh ... true` shows it best.
        cause = f"the connection dropped after login: {_describe(lost)}"
        return _unreachable(host, cause, check_reachable(cause, host).fix or lost.hint,
                            {"type": type(lost).__name__, "stage": lost.stage, "after_login": True},
                            time.monotonic() - started, executor.connections_opened)
    return _reachable_report(host, outcomes, time.monotonic() - started, executor.connections_opened)


def _connect(connect: Callable[[], object]) -> tuple[str | None, str | None, LostEvidence]:
    """(cause, fix, evidence) of a failed ``connect()``, or (None, None, {}) when connected."""
    try:
        connect()
    except IntrospectError as exc:
        return _describe(exc), exc.hint, {"type": type(exc).__name__, "stage": exc.stage}
    except Exception as exc:  # noqa: BLE001 - a transport bug must still be this host's result only
        return f"{type(exc).__name__}: {exc}", "rerun with --debug and report it", {"type": type(exc).__name__}
    return None, None, {}


def _jobs(host: HostEntry) -> list[_Job]:
    jobs: list[_Job] = []
    for venv in host.venvs:
        # Tokenizer loads first: they are the slow ones (transformers import, vocab
        # build), so starting them first makes them overlap with the light probes.
        jobs.extend(_Job("tokenizer", venv, model) for model in dict.fromkeys(venv.models))
    jobs.extend(_Job("health", venv) for venv in host.venvs)
    return jobs


def _run_jobs(executor: Executor, jobs: Sequence[_Job], options: HealthOptions,
              names: tuple[str, ...] = ()) -> dict[_Job, _Outcome]:
    channels = [_channel(job, options, names) for job in jobs]
    results = run_channels(executor, channels, max_parallel=options.channels)
    return {job: _outcome(results[job]) for job in jobs}


def _channel(job: _Job, options: HealthOptions, names: tuple[str, ...] = ()) -> Channel:
    key: Hashable = job
    if job.task == "tokenizer":
        # The inventory's say, else the user config's `remote_code:` (its patterns for the model
        # and the host `names`, then its default), else the built-in default.
        trust = (job.venv.remote_code if job.venv.remote_code_set
                 else bool(choose_remote_code(False, hosts=names, model=job.model).value))
        return Channel(key, job.venv.python, "tokenizer",
                       {"model_path": str(job.model), "trust_remote_code": trust, "sample": False},
                       options.probe_timeout, isolate=True)
    request = probe_request(job.venv, import_timeout=min(options.import_timeout, options.probe_timeout),
                            nvidia_smi=options.nvidia_smi)
    return Channel(key, job.venv.python, "health", request, options.probe_timeout)


def _outcome(result: ChannelResult) -> _Outcome:
    exc = result.error
    if isinstance(exc, ConnectError):
        return _Outcome(error=_describe(exc), error_type=type(exc).__name__, lost=exc)
    if isinstance(exc, IntrospectError):
        kind = "timeout" if isinstance(exc, ProbeTimeout) else type(exc).__name__
        return _Outcome(error=_describe(exc), error_type=kind)
    if exc is not None:  # one channel's failure (even a bug) stays this venv's result
        return _Outcome(error=f"{type(exc).__name__}: {exc}", error_type=type(exc).__name__)
    reply = result.reply
    if reply is None or not isinstance(reply.facts, dict):
        # The remote runner replied but the task produced nothing (a crash, or the
        # isolated task's own timeout): its first error record says why.
        first = reply.errors[0] if reply is not None and reply.errors else {}
        kind = str(first.get("type") or "error")
        return _Outcome(error=f"{kind}: {first.get('message') or 'no facts in the reply'}", error_type=kind)
    return _Outcome(facts=reply.facts)


def _describe(exc: IntrospectError) -> str:
    # The host is already the row's label: keep the stage and the message.
    return f"[{exc.stage}] {exc.message}" if exc.stage else exc.message


def _tokenizer_result(outcome: _Outcome) -> JSONObject:
    """The tokenizer probe's facts (the host's reply, read as sent), or a failed result in the same
    shape (check_tokenizer reads it)."""
    if outcome.error is None:
        return outcome.facts
    timed_out = outcome.error_type == "timeout"
    return {"loaded": False, "error": {"type": outcome.error_type or "error", "message": outcome.error,
                                       "cause": "timeout" if timed_out else None, "missing_packages": []}}


def _reachable_report(host: HostEntry, outcomes: dict[_Job, _Outcome], seconds: float,
                      connections: int) -> HostReport:
    venvs: list[VenvReport] = []
    snapshots: list[Snapshot] = []
    gpus_reported = False
    for venv in host.venvs:
        health = outcomes[_Job("health", venv)]
        facts = health.facts if health.error is None else None
        tokenizers = {m: _tokenizer_result(outcomes[_Job("tokenizer", venv, m)]) for m in venv.models}
        # GPUs belong to the host: report them once, with the first venv whose probe ran.
        include_gpus = facts is not None and not gpus_reported
        gpus_reported = gpus_reported or include_gpus
        results = evaluate_venv(venv, facts, None, tokenizers, host=host, probe_error=health.error,
                                include_gpus=include_gpus)
        # `reachable` is reported once per host, not once per venv.
        venvs.append(VenvReport(venv.path, [r for r in results if r.check != "reachable"]))
        snapshots.append(snapshot_from(host.name, venv.path, facts, None, tokenizers))
    if not host.venvs:
        snapshots.append(snapshot_from(host.name, "", None, None))
    return HostReport(host.name, host.url or host.address, [check_reachable(None, host)], venvs, snapshots, seconds,
                      connections)


def _unreachable(host: HostEntry, cause: str, fix: str | None, evidence: LostEvidence, seconds: float,
                 connections: int) -> HostReport:
    result = check_reachable(cause, host)
    # The transport's hint names the precise fix (--accept-new, the key, the port);
    # check_reachable's generic `ssh ... true` is the fallback.
    result = dataclasses.replace(result, fix=fix or result.fix, evidence={**result.evidence, **evidence})
    venvs = [VenvReport(v.path, []) for v in host.venvs]
    snapshots = [snapshot_from(host.name, v.path, None, cause) for v in host.venvs] or [
        snapshot_from(host.name, "", None, cause)]
    return HostReport(host.name, host.url or host.address, [result], venvs, snapshots, seconds, connections)


# ------------------------------------------------------------------------- fleet


def run_health(
    hosts: Sequence[HostEntry],
    executor_for: Callable[[HostEntry], Executor],
    *,
    parallel: int,
    options: HealthOptions = HealthOptions(),
    stagger_s: float = 0.0,  # no global start rate: check_host logs in through monitor.login
    monitor: FleetMonitor | None = None,
    on_done: Callable[[HostReport], None] | None = None,
) -> list[HostReport]:
    """Check every host (at most ``parallel`` at once); reports in ``hosts`` order."""
    monitor = monitor if monitor is not None else FleetMonitor(stagger_s)
    ahead = DialAhead(hosts, executor_for, parallel=parallel, cancelled=lambda: monitor.cancelled)

    def work(host: HostEntry) -> HostReport:
        return check_host(host, ahead.take(host), options, monitor)  # the executor maybe dialled ahead

    def failed(host: HostEntry, exc: BaseException, seconds: float) -> HostReport:
        # Only a bug gets here (check_host reports every expected failure itself).
        cause = f"internal error while checking the host: {type(exc).__name__}: {exc}"
        return _unreachable(host, cause, "rerun with --debug and report it", {"type": type(exc).__name__},
                            seconds, 0)

    def done(_index: int, _host: HostEntry, report: HostReport | ItemFailure[HostEntry]) -> None:
        if on_done is not None and isinstance(report, HostReport):
            on_done(report)

    def report(result: HostReport | ItemFailure[HostEntry]) -> HostReport:
        return result if isinstance(result, HostReport) else failed(result.item, result.error, result.seconds)

    try:
        with ahead:
            reports = run_fleet(hosts, work, parallel=parallel, monitor=monitor, on_error=failed, on_done=done)
    except FleetInterrupted as stop:  # the hosts that finished are kept; the others were not checked
        from introspect.client.health_stop import HealthInterrupted, not_checked

        raise HealthInterrupted(stop.signum, [not_checked(host, stop.signum) if r is None else report(r)
                                              for host, r in zip(hosts, stop.results, strict=True)]) from stop
    return [report(r) for r in reports]


# ------------------------------------------------------------------ drift, history


@dataclass
class HealthRun:
    """One run: the hosts' reports (drift attached) and the run's id in the history (None when
    the database could not take it: the guard's notes say why)."""

    reports: list[HostReport]
    run_id: int | None
    started: float
    finished: float
    fleet: FleetStats  # --parallel and the monitor's connection counters


def check_and_record(hosts: Sequence[HostEntry], executor_for: Callable[[HostEntry], Executor],
                     store: GuardedHistory, *, parallel: int, options: HealthOptions, argv: Sequence[str],
                     on_done: Callable[[HostReport], None] | None = None) -> HealthRun:
    """Check every host, compare with the previous run, and store this one (a database that
    cannot take it costs the run nothing: ``store`` turns that into a note)."""
    started = time.time()
    monitor = FleetMonitor(0.0)  # logins paced per sshd (fleet_pacing.py), no global start rate
    try:
        reports = run_health(hosts, executor_for, parallel=parallel, options=options, monitor=monitor,
                             on_done=on_done)
    except KeyboardInterrupt as stop:  # a partial run: reported by the caller, never stored
        from introspect.client.health_stop import HealthInterrupted, not_recorded

        if isinstance(stop, HealthInterrupted):
            stop.run = HealthRun(stop.reports, None, started, time.time(), FleetStats(parallel=parallel, **monitor.stats()))
            store.notes.append(not_recorded(stop.signum, argv))
        raise
    finished = time.time()
    attach_drift(reports, store)  # before recording: "previous" must be the last stored run
    run_id = record_run(store, reports, argv=argv, started_at=started, finished_at=finished)
    return HealthRun(reports, run_id, started, finished, FleetStats(parallel=parallel, **monitor.stats()))


# -------------------------------------------------------------------------- data


def result_dict(result: CheckResult) -> documents.CheckResult:
    """One check as its record in ``introspect.health/v1`` (and in ``history --run N``)."""
    from introspect.documents.health import CheckResult as Record

    return Record(check=result.check, status=result.status, message=result.message, fix=result.fix,
                  evidence=result.evidence)


def report_dict(report: HostReport) -> documents.HostReport:
    """One host as its record in ``introspect.health/v1``; ``reachable`` is null when not checked."""
    from introspect.documents import health as records

    venvs = [records.VenvReport(path=v.path, checks=[result_dict(r) for r in v.results],
                                drift=[result_dict(r) for r in v.drift]) for v in report.venvs]
    return records.HostReport(name=report.name, address=report.address,
                              reachable=report.reachable if report.checked else None,
                              seconds=round(report.seconds, 3), connections=report.connections,
                              checks=[result_dict(r) for r in report.host_results], venvs=venvs)


def all_results(reports: Iterable[HostReport]) -> list[CheckResult]:
    return [r for report in reports for _, _, r in report.rows()]


__all__ = [
    "DEFAULT_CHANNELS",
    "SCHEMA",
    "HealthOptions",
    "HostReport",
    "VenvReport",
    "all_results",
    "attach_drift",
    "check_and_record",
    "check_host",
    "record_run",
    "report_dict",
    "result_dict",
    "run_health",
]
