"""The controller side of ``introspect gpus``: each host's nvidia-smi facts, no model needed.

One connection and one remote process (the shipped "gpus" task) per host, every host on
the bounded fleet runner, logins paced per sshd, as ``models`` does (:mod:`introspect.client.discover`).
A host that cannot be reached is its own result; the others are unaffected.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict, cast

from introspect.client.fleet import FleetMonitor, ItemFailure, run_fleet
from introspect.client.fleet_pacing import job_endpoint
from introspect.client.hub import first_message
from introspect.errors import IntrospectError, RemoteError
from introspect.remote.contract import ErrorRecord, TargetBlock
from introspect.transport.base import Executor

if TYPE_CHECKING:
    from introspect.inventory import HostEntry

# nvidia-smi answers in well under a second; facts/host/gpus.py bounds each of its (at most four)
# calls at 10 s, so a hung driver costs 40 s at most and this leaves room for the connect.
DEFAULT_TIMEOUT = 60.0


@dataclass
class GpuJob:
    name: str  # the --host value or inventory entry name ("local" for this machine)
    host: str | None  # what to connect to (None: this machine)
    entry: HostEntry | None
    python: str


class GpuDevice(TypedDict, total=False):
    """One row of ``nvidia-smi --query-gpu`` as remote/facts/host/gpus.py parses it."""

    index: int | None
    name: str | None
    memory_total_mib: int | None
    memory_used_mib: int | None
    driver_version: str | None
    pci_bus_id: str | None
    compute_cap: str | None


class GpuFacts(TypedDict, total=False):
    """The ``gpus`` task's reply (remote/facts/host/gpus.py ``collect_gpus``): a host without
    nvidia-smi, or a failing one, is a fact (``available`` false and ``reason``)."""

    available: bool
    reason: str
    count: int
    devices: list[GpuDevice]
    query: str
    driver_version: str | None
    cuda_version: str | None
    topology: dict[str, Any] | None  # {gpus: ["GPU0", ...], links: {"GPU0": {"GPU1": "NV18"}}}
    error: dict[str, str] | None  # {type, message}
    errors: list[ErrorRecord]


@dataclass
class GpuResult:
    job: GpuJob
    facts: GpuFacts = field(default_factory=lambda: GpuFacts())
    target: TargetBlock = field(default_factory=lambda: TargetBlock())
    error: IntrospectError | None = None


def python_for(entry: HostEntry | None, python_exe: str | None) -> str:
    """The interpreter that runs the task: --python, else the entry's python, else its first
    venv's, else ``python3``. Any Python 3.8+ does: the task is standard library only."""
    if python_exe:
        return python_exe
    if entry is not None and entry.python:
        return entry.python
    if entry is not None and entry.venvs:
        return entry.venvs[0].python
    return "python3"


def plan_gpu_jobs(host: str | None, entries: list[HostEntry] | None, python_exe: str | None) -> list[GpuJob]:
    """One job per inventory entry (``entries``), or one for ``host``, or this machine."""
    if entries is not None:
        return [GpuJob(e.name, e.name, e, python_for(e, python_exe)) for e in entries]
    if host:
        return [GpuJob(host, host, None, python_for(None, python_exe))]
    return [GpuJob("local", None, None, python_exe or sys.executable or "python3")]


def gpu_facts(executor: Executor, python: str, timeout: float) -> GpuFacts:
    reply = executor.run_python(python, "gpus", {}, timeout=timeout)
    if not isinstance(reply.facts, dict):
        raise RemoteError(f"the GPU query failed: {first_message(reply.errors)}",
                          hint="introspect --debug gpus   # shows the remote stderr", host=executor.label,
                          stage="gpus")
    return cast(GpuFacts, dict(reply.facts))  # the frame's members were type-checked (transport/frames.py)


def _target(executor: Executor) -> TargetBlock:
    target = executor.target
    return TargetBlock(scheme=target.scheme, host=target.host, port=target.port, user=target.user,
                       container=target.container)


def run_job(job: GpuJob, make_executor: Callable[[GpuJob], Executor], timeout: float,
            monitor: FleetMonitor) -> GpuResult:
    """One host over one connection; its IntrospectError is kept in the result, never raised."""
    result = GpuResult(job)
    try:
        executor = make_executor(job)
        result.target = _target(executor)
        with monitor.connection(job.name, closer=executor.close), contextlib.closing(executor):
            monitor.login(job_endpoint(job.entry, job.host), executor.connect)  # paced per sshd
            result.facts = gpu_facts(executor, job.python, timeout)
    except IntrospectError as exc:
        result.error = exc
    return result


def _unexpected(job: GpuJob, exc: BaseException, _seconds: float) -> GpuResult:
    # A bug in one host's work is that host's error line, not a lost run.
    return GpuResult(job, error=IntrospectError(f"internal error: {type(exc).__name__}: {exc}",
                                                hint="introspect --debug gpus   # and report the traceback",
                                                host=job.name, stage="gpus"))


def gather_gpus(jobs: list[GpuJob], make_executor: Callable[[GpuJob], Executor], *, timeout: float,
                parallel: int, on_done: Callable[[GpuResult], None] | None = None) -> list[GpuResult]:
    """Every job on the shared fleet runner (bounded, logins paced per sshd), results in job order."""
    monitor = FleetMonitor(0.0)  # no global start rate: each login is paced on its sshd (fleet_pacing.py)

    def done(_index: int, job: GpuJob, result: GpuResult | ItemFailure[GpuJob]) -> None:
        if on_done is not None:
            on_done(result if isinstance(result, GpuResult) else _unexpected(job, result.error, result.seconds))

    results = run_fleet(jobs, lambda job: run_job(job, make_executor, timeout, monitor), parallel=parallel,
                        on_error=_unexpected, monitor=monitor, on_done=done)
    return [r if isinstance(r, GpuResult) else _unexpected(r.item, r.error, r.seconds) for r in results]
