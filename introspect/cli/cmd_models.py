"""``introspect models``: every model directory on one host or the whole fleet.

The work is :mod:`introspect.client.discover`'s; this module turns the flags into
its jobs and renders the listing. A host that cannot be reached is reported on its
own lines; the other hosts' listings are unaffected.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import click

from introspect.cli.connect import (
    ConnectionFlags,
    connection_options,
    executor_for,
    known_hosts_for,
    load_inventory_for,
    select_fleet,
)
from introspect.cli.jsonout import echo_json
from introspect.cli.options import HostSelection, fleet_options
from introspect.cli.outcome import Finished, Notice, combined, notice
from introspect.cli.progress import Phases, host_rows
from introspect.cli.render_term import Col, escape, human_bytes, human_count, make_console, print_rows
from introspect.cli.safe_text import one_line
from introspect.cli.session import session
from introspect.client.discover import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_TIMEOUT,
    DiscoverOptions,
    HostJob,
    HostResult,
    discover_hosts,
    plan_jobs,
)
from introspect.transport.base import Executor

if TYPE_CHECKING:
    from introspect.inventory import Inventory

WIDE = 260  # columns when stdout is not a terminal: one line per model, never wrapped


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


MODEL_COLUMNS = (Col("model"), Col("type"), Col("layers", "num"), Col("params (total / active)", "num"),
                 Col("quantization", "text"), Col("size", "num"), Col("tokenizer", "text"),
                 Col("drafter", "text"))


def model_rows(results: list[HostResult], show_host: bool) -> tuple[list[Col], list[list[str]]]:
    cols = ([Col("host")] if show_host else []) + list(MODEL_COLUMNS)
    rows = []
    for result in results:
        for model in result.models:
            row = [result.job.name] if show_host else []
            row += [model["name"], _type(model), str(model.get("layers") or "-"), _params(model),
                    model.get("quantization") or "-", human_bytes(model.get("size")),
                    model.get("tokenizer") or "-", _drafter(model)]
            rows.append([escape(str(cell)) for cell in row])
    return cols, rows


def print_human(results: list[HostResult]) -> list[Notice]:
    console = make_console()
    if not console.is_terminal and not session().wide:
        console.width = WIDE
    show_host = len(results) > 1 or results[0].job.name != "local"
    total = sum(len(r.models) for r in results)
    if total:
        print_rows(console, *model_rows(results, show_host))
    for result in results:
        if result.error is None and not result.models:
            click.echo(one_line(f"{result.job.name}: no model directories found (roots: "
                                f"{', '.join(result.job.roots or result.job.optional_roots)}; HF cache: "
                                f"{(result.facts.get('hf_cache') or {}).get('path')})"))
    return problems(results)


def _progress_row(result: HostResult) -> str:
    if result.error is not None:
        return f"[bold red]✗[/] {escape(result.job.name)} {escape(result.error.one_line())}"
    return f"[green]✓[/] {escape(result.job.name)} {len(result.models)} model(s)"


def problems(results: list[HostResult]) -> list[Notice]:
    """Each host's skipped roots (warnings) and its error, in host order."""
    out: list[Notice] = []
    for result in results:
        out.extend(Notice(f"{result.job.name}: skipped: {warning.get('message')}", level="warning")
                   for warning in result.warnings)
        if result.error is not None:
            out.append(notice(result.error, result.job.name))
    return out


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
@click.option("--timeout", type=float, default=DEFAULT_TIMEOUT, show_default=True,
              help="Seconds for one host's scan.")
@click.option("--parallel", type=click.IntRange(1, 256), default=None,
              help="Hosts scanned at once (default: the inventory's `parallel`, else 8).")
@click.option("--json", "as_json_flag", is_flag=True, help="Print the listing as JSON on stdout.")
@fleet_options
@connection_options
def models(roots: tuple[str, ...], hf_cache: str | None, venv: str | None, python_exe: str | None,
           max_depth: int, no_hf_scanner: bool, timeout: float, parallel: int | None, as_json_flag: bool,
           **kwargs: Any) -> Finished:
    """List the model directories on a host (or the inventory's hosts): plain dirs and the HF cache."""
    selection = HostSelection.from_kwargs(kwargs)
    flags = ConnectionFlags.from_kwargs(kwargs)
    inventory: Inventory | None
    if selection.fleet or (flags.hosts_file and not flags.host):
        # Inventory-wide: --hosts alone (every host), or --only/--tags/--all-hosts.
        inventory, hosts = select_fleet(flags.hosts_file, selection)
        jobs = plan_jobs(None, dataclasses.replace(inventory, hosts=tuple(hosts)), roots, venv, python_exe)
    else:
        inventory = load_inventory_for(flags.hosts_file) if flags.host else None
        jobs = plan_jobs(flags.host, inventory, roots, venv, python_exe)
    known_hosts = known_hosts_for(flags, inventory)  # loaded once for every host of the run

    def make_executor(job: HostJob) -> Executor:
        return executor_for(dataclasses.replace(flags, host=job.host), inventory, known_hosts)[0]

    options = DiscoverOptions(max_depth=max_depth, use_hf_scanner=not no_hf_scanner, hf_cache=hf_cache,
                              timeout=timeout)
    workers = parallel or (inventory.defaults.parallel if inventory else 8)
    if len(jobs) == 1:
        with Phases(f"listing models on {jobs[0].name}"):
            results = discover_hosts(jobs, make_executor, options, parallel=workers)
    else:
        with host_rows(len(jobs), "listing models", _progress_row) as on_done:
            results = discover_hosts(jobs, make_executor, options, parallel=workers, on_done=on_done)
    if len(results) == 1 and results[0].error is not None:
        raise results[0].error  # one host: the CLI's one error line and exit code
    if as_json_flag:
        echo_json(as_json(results))
        # Only errors here: the warnings are in the JSON document already.
        notices = problems([r for r in results if r.error is not None])
    elif session().quiet:
        notices = problems([r for r in results if r.error is not None])
    else:
        notices = print_human(results)
    return Finished(combined(r.error.exit_code for r in results if r.error is not None), tuple(notices))

