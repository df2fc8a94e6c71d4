"""``introspect models``: every model directory on one host or the whole fleet (issue 8).

One connection per host, one remote process per host (the "discover" task), all hosts
at once on the shared fleet runner (:func:`introspect.fleet.run_fleet`: bounded, staggered). A host that cannot be reached is reported on its own
lines; the other hosts' listings are unaffected.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from introspect.cli.connect import (
    ConnectionFlags,
    connection_options,
    executor_for,
    known_hosts_for,
    load_inventory_for,
)
from introspect.cli.render import human_bytes, human_count
from introspect.errors import IntrospectError
from introspect.fleet import DEFAULT_STAGGER_S, FleetMonitor, run_fleet
from introspect.inventory import HostEntry, Inventory
from introspect.models import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_ROOTS,
    DEFAULT_SHIP_CAP,
    discover_facts,
    summarize_model,
)
from introspect.probe import interpreter
from introspect.transport.hostkeys import KnownHosts

WIDE = 260  # columns when stdout is not a terminal: one line per model, never wrapped


@dataclass
class HostJob:
    name: str
    flags: ConnectionFlags
    entry: HostEntry | None
    python: str
    roots: tuple[str, ...]
    optional_roots: tuple[str, ...]


@dataclass
class HostResult:
    job: HostJob
    models: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    error: IntrospectError | None = None


# --------------------------------------------------------------------------- planning


def _python_for(entry: HostEntry | None, venv: str | None, python_exe: str | None) -> str:
    # A venv of the host entry likely has huggingface_hub (transformers brings it): its scanner is used.
    if venv or python_exe:
        return interpreter(python_exe, venv)
    if entry is not None and entry.venvs:
        return entry.venvs[0].python
    return "python3"


def _roots_for(entry: HostEntry | None, roots: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(roots reported when missing, roots skipped quietly when missing)."""
    if roots:
        return roots, ()
    if entry is not None and entry.roots:
        return entry.roots, ()
    return (), DEFAULT_ROOTS


def plan_jobs(flags: ConnectionFlags, inventory: Inventory | None, roots: tuple[str, ...],
              venv: str | None, python_exe: str | None) -> list[HostJob]:
    """One job per host: ``--host`` alone, every inventory host (``--hosts`` without ``--host``),
    or this machine."""
    if flags.host or inventory is None:
        entry = next((h for h in inventory.hosts if h.name == flags.host), None) if inventory and flags.host else None
        required, optional = _roots_for(entry, roots)
        return [HostJob(flags.host or "local", flags, entry, _python_for(entry, venv, python_exe),
                        required, optional)]
    jobs = []
    for entry in inventory.hosts:
        required, optional = _roots_for(entry, roots)
        jobs.append(HostJob(entry.name, dataclasses.replace(flags, host=entry.name), entry,
                            _python_for(entry, venv, python_exe), required, optional))
    return jobs


# --------------------------------------------------------------------------- running


def run_job(job: HostJob, inventory: Inventory | None, known_hosts: KnownHosts, options: dict[str, Any],
            timeout: float, monitor: FleetMonitor) -> HostResult:
    """Discover one host over one connection. Its IntrospectError is kept in the result, never
    raised: one host's failure must not touch the others."""
    result = HostResult(job)
    try:
        executor, _entry = executor_for(job.flags, inventory, known_hosts)
        with monitor.connection(job.name, closer=executor.close), executor:
            facts = discover_facts(executor, job.python, job.roots, optional_roots=job.optional_roots,
                                   timeout=timeout, **options)
    except IntrospectError as exc:
        result.error = exc
        return result
    result.facts = facts
    result.models = [summarize_model(entry) for entry in facts.get("models") or []]
    result.warnings = [e for e in facts.get("errors") or [] if isinstance(e, dict)]
    return result


def _unexpected(job: HostJob, exc: BaseException, _seconds: float) -> HostResult:
    # A bug in one host's work is that host's error line, not a lost run.
    return HostResult(job, error=IntrospectError(f"internal error: {type(exc).__name__}: {exc}",
                                                 hint="rerun with --debug and report the traceback",
                                                 host=job.name, stage="discover"))


def run_all(jobs: list[HostJob], inventory: Inventory | None, known_hosts: KnownHosts,
            options: dict[str, Any], timeout: float, parallel: int) -> list[HostResult]:
    """Every job at once on the shared fleet runner (bounded, staggered), results in job order."""
    monitor = FleetMonitor(DEFAULT_STAGGER_S)
    results = run_fleet(jobs, lambda job: run_job(job, inventory, known_hosts, options, timeout, monitor),
                        parallel=parallel, on_error=_unexpected, monitor=monitor)
    return [r if isinstance(r, HostResult) else _unexpected(r.item, r.error, r.seconds) for r in results]


# --------------------------------------------------------------------------- output


def _params(model: dict[str, Any]) -> str:
    total, active = model.get("params_total"), model.get("params_active")
    if total is None:
        return "-"
    if active is not None and active != total:
        return f"{human_count(total)} / {human_count(active)}"
    return human_count(total)


def _type(model: dict[str, Any]) -> str:
    outer, inner = model.get("model_type"), model.get("text_model_type")
    if inner and inner != outer:
        return f"{outer} ({inner})"
    return str(outer or "-")


def _drafter(model: dict[str, Any]) -> str:
    drafter = model.get("drafter")
    if isinstance(drafter, dict):
        target = drafter.get("target")
        return f"{drafter.get('kind')} -> {target}" if target else f"{drafter.get('kind')} (target not stated)"
    if model.get("mtp_layers"):
        return f"MTP x{model['mtp_layers']} (built in)"
    return "-"


def models_table(results: list[HostResult], show_host: bool) -> Table:
    table = Table(show_header=True, header_style="bold", box=None, padding=(0, 2), pad_edge=False)
    columns = (["host"] if show_host else []) + ["model", "type", "layers", "params (total / active)",
                                                  "quantization", "size", "tokenizer", "drafter"]
    for name in columns:
        table.add_column(name, no_wrap=True, overflow="fold")
    for result in results:
        for model in result.models:
            row = [result.job.name] if show_host else []
            row += [model["name"], _type(model), str(model.get("layers") or "-"), _params(model),
                    model.get("quantization") or "-", human_bytes(model.get("size")),
                    model.get("tokenizer") or "-", _drafter(model)]
            table.add_row(*(escape(str(cell)) for cell in row))
    return table


def print_human(results: list[HostResult]) -> None:
    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal:
        console.width = WIDE
    show_host = len(results) > 1 or results[0].job.name != "local"
    total = sum(len(r.models) for r in results)
    if total:
        console.print(models_table(results, show_host))
    for result in results:
        if result.error is None and not result.models:
            click.echo(f"{result.job.name}: no model directories found (roots: "
                       f"{', '.join(result.job.roots or result.job.optional_roots)}; HF cache: "
                       f"{(result.facts.get('hf_cache') or {}).get('path')})")
    _print_problems(results)


def _print_problems(results: list[HostResult]) -> None:
    for result in results:
        for warning in result.warnings:
            click.echo(f"warning: {result.job.name}: skipped: {warning.get('message')}", err=True)
        if result.error is not None:
            click.echo(f"error: {result.job.name}: {result.error.one_line()}", err=True)
            if result.error.hint:
                click.echo(f"fix: {result.error.hint}", err=True)


def as_json(results: list[HostResult]) -> dict[str, Any]:
    hosts = []
    for result in results:
        facts = result.facts
        hosts.append({
            "host": result.job.name,
            "python": result.job.python,
            "ok": result.error is None,
            "error": None if result.error is None else result.error.as_dict() | {"exit_code": result.error.exit_code},
            "models": result.models,
            "warnings": result.warnings,
            "roots": facts.get("roots") or [],
            "hf_cache": facts.get("hf_cache"),
            "truncated": facts.get("truncated", False),
        })
    return {"schema": "introspect.models/v1", "hosts": hosts}


# --------------------------------------------------------------------------- command


@click.command("models")
@click.option("--roots", "roots", multiple=True, metavar="DIR",
              help="Directory on the host to search (repeatable). Default: the host entry's roots, else "
                   "/root/models, /data and ~/models.")
@click.option("--hf-cache", help="HF hub cache dir on the host (default: HF_HUB_CACHE, HF_HOME/hub, "
                                 "~/.cache/huggingface/hub as the host's environment says).")
@click.option("--venv", help="Virtualenv on the host whose python runs the scan (its huggingface_hub, "
                             "if any, reads the cache).")
@click.option("--python", "python_exe", help="Interpreter on the host (default: the entry's first venv, else python3).")
@click.option("--max-depth", type=click.IntRange(0, 16), default=DEFAULT_MAX_DEPTH, show_default=True,
              help="Directory levels searched below each root.")
@click.option("--no-hf-scanner", is_flag=True, help="Read the HF cache layout directly, even when "
                                                    "huggingface_hub is installed on the host.")
@click.option("--timeout", type=float, default=90.0, show_default=True, help="Seconds for one host's scan.")
@click.option("--parallel", type=click.IntRange(1, 256), default=None,
              help="Hosts scanned at once (default: the inventory's `parallel`, else 8).")
@click.option("--json", "as_json_flag", is_flag=True, help="Print the listing as JSON on stdout.")
@connection_options
def models(roots: tuple[str, ...], hf_cache: str | None, venv: str | None, python_exe: str | None,
           max_depth: int, no_hf_scanner: bool, timeout: float, parallel: int | None, as_json_flag: bool,
           **kwargs: Any) -> int:
    """List the model directories on a host (or every inventory host): plain dirs and the HF cache."""
    flags = ConnectionFlags.from_kwargs(kwargs)
    inventory = load_inventory_for(flags.hosts_file) if (flags.host or flags.hosts_file) else None
    jobs = plan_jobs(flags, inventory, roots, venv, python_exe)
    known_hosts = known_hosts_for(flags, inventory)  # loaded once for every host of the run
    options = {"max_depth": max_depth, "use_hf_scanner": not no_hf_scanner, "hf_cache": hf_cache,
               "json_cap": DEFAULT_SHIP_CAP}
    workers = parallel or (inventory.defaults.parallel if inventory else 8)
    results = run_all(jobs, inventory, known_hosts, options, timeout, workers)
    if len(results) == 1 and results[0].error is not None:
        raise results[0].error  # one host: the CLI's one error line and exit code
    if as_json_flag:
        click.echo(json.dumps(as_json(results), indent=2))
        _print_problems([r for r in results if r.error is not None])
    else:
        print_human(results)
    failures = [r.error.exit_code for r in results if r.error is not None]
    return max(failures) if failures else 0

