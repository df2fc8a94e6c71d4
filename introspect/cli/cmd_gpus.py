"""``introspect gpus``: the GPUs of a host or of the fleet at a glance, without a model.

The facts are the probe's (nvidia-smi: names, memory total and used, driver, CUDA), gathered
by the shipped "gpus" task over one connection per host (:mod:`introspect.client.gpus`).
A host without nvidia-smi is a "no GPU" row, not an error; a failing nvidia-smi (a driver /
library mismatch) is a ``warning:`` with the command to see its message on that host; a host
that cannot be reached is an ``error:`` line and makes the run exit 3, as in every fleet command.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from collections import Counter
from typing import TYPE_CHECKING, Any, Final

import click

from introspect.cli.connect import (
    ConnectionFlags,
    connection_options,
    executor_for,
    find_entry,
    known_hosts_for,
    load_inventory_for,
    select_fleet,
)
from introspect.cli.jsonout import echo_json
from introspect.cli.options import HostSelection, fleet_options
from introspect.cli.outcome import Finished, Notice, combined, notice
from introspect.cli.progress import Phases, host_rows
from introspect.cli.remote_fix import fix_on_target
from introspect.cli.render_term import Col, escape, human_bytes, make_console, print_rows
from introspect.cli.session import session
from introspect.client.gpus import (
    DEFAULT_TIMEOUT,
    GpuDevice,
    GpuJob,
    GpuResult,
    gather_gpus,
    plan_gpu_jobs,
    python_for,
)
from introspect.errors import UsageError
from introspect.transport.base import Executor

if TYPE_CHECKING:
    from introspect.documents.gpus import GpusDocument
    from introspect.inventory import Inventory

SCHEMA: Final = "introspect.gpus/v1"
MIB = 2**20
HOST_HELP = ("Host to ask (repeatable, or comma-separated): an address, ~/.ssh/config alias, inventory entry "
             "name or URL (ssh://, openssh://, podman://...). Omit, with no inventory flag, for this machine.")
COLUMNS = (Col("host"), Col("gpus", "num"), Col("model", "text"), Col("memory each", "num"),
           Col("used / total", "num"), Col("driver", "num"), Col("cuda", "num"), Col("note", "text"))


# --------------------------------------------------------------------------- output


def _devices(result: GpuResult) -> list[GpuDevice]:
    return [d for d in result.facts.get("devices") or [] if isinstance(d, dict)]


def _models(devices: list[GpuDevice]) -> str:
    counts = Counter(str(d.get("name") or "?") for d in devices)
    if len(counts) == 1:
        return next(iter(counts))
    return ", ".join(f"{n} x {name}" for name, n in counts.items())  # a host with two kinds of GPU


def _mib(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _memory(devices: list[GpuDevice]) -> tuple[str, str]:
    """(the smallest GPU's memory, used / total over all): what a layout can count on, what is busy."""
    totals = [t for t in (_mib(d.get("memory_total_mib")) for d in devices) if t is not None]
    used = [u for u in (_mib(d.get("memory_used_mib")) for d in devices) if u is not None]
    each = human_bytes(min(totals) * MIB) if totals else "-"
    busy = (f"{human_bytes(sum(used) * MIB)} / {human_bytes(sum(totals) * MIB)}"
            if totals and len(used) == len(devices) else "-")
    return each, busy


def host_row(result: GpuResult) -> list[str]:
    facts = result.facts
    if result.error is not None:
        row = [result.job.name, "-", "not reached", "-", "-", "-", "-", "see the error below"]
    elif not facts.get("available"):
        row = [result.job.name, "0", "no GPU", "-", "-", str(facts.get("driver_version") or "-"), "-",
               str(facts.get("reason") or "-")]
    else:
        devices = _devices(result)
        each, busy = _memory(devices)
        row = [result.job.name, str(facts.get("count") or len(devices)), _models(devices), each, busy,
               str(facts.get("driver_version") or "-"), str(facts.get("cuda_version") or "-"), ""]
    return [escape(cell) for cell in row]


def problems(results: list[GpuResult]) -> list[Notice]:
    """Each unreachable host's error; each failing nvidia-smi as a warning with a command to see why."""
    out: list[Notice] = []
    for result in results:
        if result.error is not None:
            out.append(notice(result.error, result.job.name))
            continue
        error = result.facts.get("error")
        if isinstance(error, dict):
            fix = fix_on_target("nvidia-smi   # its own message names the cause (often a driver reload)",
                                result.target)
            out.append(Notice(f"{result.job.name}: nvidia-smi failed: {error.get('message')}", fix, level="warning",
                              host=result.job.name))
    return out


def as_json(results: list[GpuResult]) -> GpusDocument:
    from introspect.documents.gpus import GpusDocument, HostError, HostGpus

    hosts = []
    for result in results:
        facts = {k: v for k, v in result.facts.items() if k != "errors"} if result.error is None else None
        error = None if result.error is None else HostError.model_validate(
            result.error.as_dict() | {"exit_code": result.error.exit_code})
        hosts.append(HostGpus(host=result.job.name, python=result.job.python, ok=result.error is None, error=error,
                              gpus=facts))
    return GpusDocument(schema=SCHEMA, hosts=hosts)


def _progress_row(result: GpuResult) -> str:
    if result.error is not None:
        return f"[bold red]✗[/] {escape(result.job.name)} {escape(result.error.one_line())}"
    count = result.facts.get("count") or 0
    return f"[green]✓[/] {escape(result.job.name)} {count} GPU(s)"


# --------------------------------------------------------------------------- command


def _many_hosts(func: Any) -> Any:
    """``--host`` of the connection flags, taken any number of times (a fleet without an inventory)."""
    params = func.__click_params__
    index = next(i for i, p in enumerate(params) if p.name == "host")
    params[index] = click.Option(["--host", "-H", "host"], multiple=True, metavar="HOST", help=HOST_HELP)
    return func


def _hosts(values: tuple[str, ...]) -> list[str]:
    return list(dict.fromkeys(part.strip() for value in values for part in value.split(",") if part.strip()))


def _check_inventory_path(path: str | None) -> None:
    """``--hosts gpu-a1,gpu-a2`` reads as a list of hosts, but --hosts names the inventory file
    (as in every command): say so, with the flag that takes hosts."""
    if path and not os.path.lexists(os.path.expanduser(path)):
        raise UsageError(f"--hosts {path}: no such inventory file (--hosts names an inventory; hosts go to --host)",
                         hint=f"introspect gpus --host {shlex.quote(path)}   # or --only NAME with --hosts FILE")


def plan(kwargs: dict[str, Any], python_exe: str | None) -> tuple[list[GpuJob], ConnectionFlags, Inventory | None]:
    """The jobs the selector flags ask for, the connection flags, and the inventory they name."""
    adhoc = _hosts(kwargs.pop("host", ()) or ())
    kwargs["host"] = None
    selection = HostSelection.from_kwargs(kwargs)
    flags = ConnectionFlags.from_kwargs(kwargs)
    _check_inventory_path(flags.hosts_file)
    if selection.fleet or (flags.hosts_file and not adhoc):
        fleet, entries = select_fleet(flags.hosts_file, selection)  # exit 2 when --hosts names no inventory
        return plan_gpu_jobs(None, list(entries), python_exe), flags, fleet
    inventory = load_inventory_for(flags.hosts_file) if adhoc else None
    jobs = [GpuJob(h, h, find_entry(inventory, h), python_for(find_entry(inventory, h), python_exe))
            for h in adhoc] or plan_gpu_jobs(None, None, python_exe)
    return jobs, flags, inventory


@click.command("gpus", epilog="""\b
Examples:
  introspect gpus                                   # this machine
  introspect gpus --host gpu-a1 --host gpu-a2       # two hosts, no inventory (or --host gpu-a1,gpu-a2)
  introspect gpus --hosts hosts.yaml                # every host of the inventory
  introspect gpus --hosts hosts.yaml --tags h200 --json""")
@click.option("--python", "python_exe",
              help="Interpreter on the host (default: the entry's python, else its first venv's, else python3); "
                   "any Python 3.8+ does.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=DEFAULT_TIMEOUT, show_default=True,
              help="Seconds for one host's answer.")
@click.option("--parallel", type=click.IntRange(1, 256), default=None,
              help="Hosts asked at once (default: the inventory's `parallel`, else 8).")
@click.option("--json", "as_json_flag", is_flag=True, help=f"Print {SCHEMA} on stdout.")
@fleet_options
@_many_hosts
@connection_options
def gpus(python_exe: str | None, timeout: float, parallel: int | None, as_json_flag: bool,
         **kwargs: Any) -> Finished:
    """GPU facts of hosts without a model: names, count, memory, driver and CUDA (nvidia-smi)."""
    jobs, flags, inventory = plan(kwargs, python_exe)
    known_hosts = known_hosts_for(flags, inventory) if any(job.host for job in jobs) else None

    def make_executor(job: GpuJob) -> Executor:
        return executor_for(dataclasses.replace(flags, host=job.host), inventory, known_hosts)[0]

    workers = parallel or (inventory.defaults.parallel if inventory else 8)
    if len(jobs) == 1:
        with Phases(f"asking {jobs[0].name} for its GPUs"):
            results = gather_gpus(jobs, make_executor, timeout=timeout, parallel=workers)
    else:
        with host_rows(len(jobs), "asking for GPUs", _progress_row) as on_done:
            results = gather_gpus(jobs, make_executor, timeout=timeout, parallel=workers, on_done=on_done)
    if len(results) == 1 and results[0].error is not None:
        raise results[0].error  # one host: the CLI's one error line and exit code
    if as_json_flag:
        echo_json(as_json(results).to_dict())
    elif not session().quiet:
        print_rows(make_console(), COLUMNS, [host_row(r) for r in results])
    return Finished(combined(r.error.exit_code for r in results if r.error is not None), tuple(problems(results)))
