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
from introspect.cli.jsonout import echo_json, stamped
from introspect.cli.listing import Controls, Field, Table, age, apply, csv_text, listing_options, yaml_text
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
    ModelRow,
    discover_hosts,
    plan_jobs,
)
from introspect.transport.base import Executor

if TYPE_CHECKING:
    from introspect.inventory import Inventory


# --------------------------------------------------------------------------- output


def _params(model: ModelRow) -> str:
    total, active = model.get("params_total"), model.get("params_active")
    if total is None:
        return "-"
    if active is not None and active != total:
        return f"{human_count(total)} / {human_count(active)}"
    return human_count(total)


def _type(model: ModelRow) -> str:
    outer, inner = model.get("model_type"), model.get("text_model_type")
    if inner and inner != outer:
        return f"{outer} ({inner})"
    return str(outer or "-")


def _drafter(model: ModelRow) -> str:
    drafter = model.get("drafter")
    if isinstance(drafter, dict):
        target = drafter.get("target")
        return f"{drafter.get('kind')} -> {target}" if target else f"{drafter.get('kind')} (target not stated)"
    if model.get("mtp_layers"):
        return f"MTP x{model['mtp_layers']} (built in)"
    return "-"


MODEL_COLUMNS = (Col("model"), Col("type"), Col("layers", "num"), Col("params (total / active)", "num"),
                 Col("quantization", "text"), Col("size", "num"), Col("modified", "num"), Col("accessed", "num"),
                 Col("tokenizer", "text"), Col("drafter", "text"))

Row = tuple[HostResult, ModelRow]  # one model of one host: what the listing controls sort and filter


def _quant(model: ModelRow) -> list[str]:
    label = str(model.get("quantization") or "")
    return [label, label.split()[0]] if label else []  # 'quant=fp8' matches "fp8 8-bit" by its method


MODEL_FIELDS = (
    Field("name", "text", lambda r: [r[1].get("name"), r[1].get("path"), r[1].get("repo_id")]),
    Field("host", "text", lambda r: r[0].job.name),
    Field("type", "text", lambda r: [r[1].get("model_type"), r[1].get("text_model_type")]),
    Field("params", "count", lambda r: r[1].get("params_total")),
    Field("active", "count", lambda r: r[1].get("params_active")),
    Field("layers", "count", lambda r: r[1].get("layers")),
    Field("quant", "text", lambda r: _quant(r[1])),
    Field("size", "bytes", lambda r: r[1].get("size")),
    Field("tokenizer", "text", lambda r: r[1].get("tokenizer")),
    Field("source", "text", lambda r: r[1].get("source")),
    Field("modified", "time", lambda r: r[1].get("modified")),
    Field("accessed", "time", lambda r: r[1].get("accessed")),
)
EXAMPLE = "introspect models --sort size:desc --filter 'size>100GB' --limit 10"


def all_rows(results: list[HostResult]) -> list[Row]:
    return [(result, model) for result in results for model in result.models]


def show_host(results: list[HostResult]) -> bool:
    return len(results) > 1 or results[0].job.name != "local"


def model_rows(rows: list[Row], with_host: bool) -> tuple[list[Col], list[list[str]]]:
    cols = ([Col("host")] if with_host else []) + list(MODEL_COLUMNS)
    out = []
    for result, model in rows:
        row = [result.job.name] if with_host else []
        row += [model["name"], _type(model), str(model.get("layers") or "-"), _params(model),
                model.get("quantization") or "-", human_bytes(model.get("size")), age(model.get("modified")),
                age(model.get("accessed")), model.get("tokenizer") or "-", _drafter(model)]
        out.append([escape(str(cell)) for cell in row])
    return cols, out


def print_human(results: list[HostResult], rows: list[Row]) -> list[Notice]:
    # Piped or not, the width is $COLUMNS, else the terminal's, else 80 (make_console), as for every
    # other command; --wide gives one line per model, and scripts read --format csv|json or -q.
    console = make_console()
    if rows:
        print_rows(console, *model_rows(rows, show_host(results)))
    elif any(r.models for r in results):
        total = sum(len(r.models) for r in results)
        click.echo(f"no model matches the listing's --filter (of {total} found)")
    for result in results:
        if result.error is None and not result.models:
            click.echo(one_line(f"{result.job.name}: no model directories found (roots: "
                                f"{', '.join(result.job.roots or result.job.optional_roots)}; HF cache: "
                                f"{(result.facts.get('hf_cache') or {}).get('path')})"))
    return problems(results)


def model_id(result: HostResult, model: ModelRow, with_host: bool) -> str:
    """What ``-q`` prints: the path, as ``HOST:PATH`` (a ``diff`` operand) when hosts are shown."""
    path = str(model.get("path"))
    return f"{result.job.name}:{path}" if with_host else path


CSV_COLUMNS = ("host", "name", "path", "source", "repo_id", "revision", "commit", "model_type",
               "text_model_type", "layers", "params_total", "params_active", "quantization", "size",
               "tokenizer", "drafter", "modified", "accessed")


def as_csv(rows: list[Row]) -> str:
    """One line per model; sizes in bytes, counts whole, times ISO-8601 UTC (as the JSON has them)."""
    table = Table(list(CSV_COLUMNS))
    for result, model in rows:
        values = {**model, "host": result.job.name, "drafter": None if _drafter(model) == "-" else _drafter(model)}
        table.rows.append([values.get(column) for column in CSV_COLUMNS])
    return csv_text(table)


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


def as_json(results: list[HostResult], rows: list[Row] | None = None,
            controls: Controls | None = None) -> dict[str, Any]:
    """The ``introspect.models/v1`` document; ``rows`` (sorted, filtered) choose and order each
    host's ``models``, and ``listing`` says how (the hosts keep their order)."""
    chosen = all_rows(results) if rows is None else rows
    hosts = []
    for result in results:
        facts = result.facts
        hosts.append({
            "host": result.job.name,
            "python": result.job.python,
            "ok": result.error is None,
            "error": None if result.error is None else result.error.as_dict() | {"exit_code": result.error.exit_code},
            "models": [model for owner, model in chosen if owner is result],
            "warnings": result.warnings,
            "roots": facts.get("roots") or [],
            "hf_cache": facts.get("hf_cache"),
            "truncated": facts.get("truncated", False),
        })
    listing = (controls or Controls()).describe() | {"shown": len(chosen), "total": len(all_rows(results))}
    return {"schema": "introspect.models/v1", "hosts": hosts, "listing": listing}


def print_listing(results: list[HostResult], controls: Controls) -> list[Notice]:
    """The listing in the format asked for; the notices to print after it."""
    rows = apply(all_rows(results), controls, MODEL_FIELDS, EXAMPLE)
    errors_only = problems([r for r in results if r.error is not None])
    if controls.ids:
        for result, model in rows:
            click.echo(model_id(result, model, show_host(results)))
        return errors_only
    if controls.format == "json":
        echo_json(as_json(results, rows, controls))
        return errors_only  # only errors here: the warnings are in the document already
    if controls.format == "yaml":
        click.echo(yaml_text(stamped(as_json(results, rows, controls))), nl=False)
        return errors_only
    if controls.format == "csv":
        click.echo(as_csv(rows), nl=False)
        return errors_only
    if session().quiet:
        return errors_only
    return print_human(results, rows)


# --------------------------------------------------------------------------- command


@click.command("models", epilog="""\b
Examples:
  introspect models --host gpu-a1                          # /root/models, /data, ~/models, HF cache
  introspect models --hosts hosts.yaml --sort size --limit 10
  introspect models --filter type=deepseek_v3 --filter 'size>100GB' --format csv
  introspect models --filter 'accessed>30d' --sort accessed:asc -q   # not read for a month""")
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
@listing_options(MODEL_FIELDS)
@fleet_options
@connection_options
def models(roots: tuple[str, ...], hf_cache: str | None, venv: str | None, python_exe: str | None,
           max_depth: int, no_hf_scanner: bool, timeout: float, parallel: int | None, as_json_flag: bool,
           **kwargs: Any) -> Finished:
    """List the model directories on a host (or the inventory's hosts): plain dirs and the HF cache.

    Times are those of the model's files (newest modification, newest access: as `hf cache ls`
    reports them); the listing's own reads of config.json and tokenizer_config.json do not count.
    """
    controls = Controls.from_kwargs(kwargs, "introspect models", json_flag=as_json_flag)
    apply([], controls, MODEL_FIELDS, EXAMPLE)  # a bad --sort/--filter is exit 2 before any host is asked
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
    notices = print_listing(results, controls)
    return Finished(combined(r.error.exit_code for r in results if r.error is not None), tuple(notices))

