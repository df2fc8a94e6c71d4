"""``introspect preflight``: flags to :func:`introspect.client.preflight.run_preflight`, and the checklist."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import click

from introspect.checks.preflight import Check, ready
from introspect.cli import help_examples
from introspect.cli.connect import (
    ConnectionFlags,
    connection_options,
    executor_for,
    fleet_known_hosts,
    load_inventory_for,
    select_fleet,
)
from introspect.cli.jsonout import echo_json
from introspect.cli.options import HostSelection, fleet_options
from introspect.cli.outcome import Finished, Notice
from introspect.cli.progress import Phases
from introspect.cli.remote_fix import fix_on_target
from introspect.cli.render_term import Col, Fixes, escape, make_console, print_fixes, print_folded, print_rows
from introspect.cli.session import session
from introspect.client.preflight import (
    DEFAULT_ENDPOINT_TIMEOUT,
    DEFAULT_MIN_FREE_GB,
    DEFAULT_TIMEOUT,
    PreflightHostResult,
    PreflightRequest,
    PreflightTarget,
    preflight_hosts,
    run_preflight,
    validate,
)
from introspect.errors import EXIT_FINDINGS, EXIT_OK
from introspect.transport.base import Executor

if TYPE_CHECKING:  # rich loads only when a run prints for people
    from rich.console import Console

    from introspect.inventory import HostEntry

ICONS = {"pass": "[green]✔ pass[/]", "warn": "[yellow]! warn[/]", "fail": "[bold red]✘ fail[/]",
         "skipped": "[dim]- skipped[/]"}
CHECK_COLUMNS = (Col(""), Col("check"), Col("result", "text"))
FLEET_COLUMNS = (Col("verdict"), Col("host"), Col("checks", "text"))


@click.command("preflight", epilog=help_examples.PREFLIGHT)
@click.option("--model", "-m", required=True, help="Model directory on the target.")
@click.option("--venv", help="The data pipeline's virtualenv on the target (its bin/python runs the checks).")
@click.option("--python", "python_exe", help="Interpreter on the target instead of --venv (default python3).")
@click.option("--endpoint", help="OpenAI-compatible server base URL, as the host sees it (http://127.0.0.1:30000).")
@click.option("--api-key-env", help="Name of a variable in the host's environment holding the endpoint's API key "
              "(its value is never shown).")
@click.option("--endpoint-timeout", type=float, default=DEFAULT_ENDPOINT_TIMEOUT, show_default=True,
              help="Seconds for each endpoint request.")
@click.option("--output-dir", help="Where the data will be written on the target (default: the home directory).")
@click.option("--min-free-gb", type=float, default=DEFAULT_MIN_FREE_GB, show_default=True,
              help="Free space required at --output-dir.")
@click.option("--packages", "packages", multiple=True, metavar="P[,P...]",
              help="Distributions the pipeline needs, besides transformers, jinja2 and the tokenizer code's "
                   "imports (repeatable, or comma-separated).")
@click.option("--timeout", type=float, default=DEFAULT_TIMEOUT, show_default=True,
              help="Seconds for the tokenizer part (killed with its process group after that).")
@click.option("--json", "as_json", is_flag=True, help="Print every check (status, evidence, fix) as JSON.")
@click.option("--no-remote-code", is_flag=True, help="Never run the model's own code (trust_remote_code).")
@click.option("--parallel", type=click.IntRange(1, 1024), default=None,
              help="Fleet mode: hosts gated at once (default: the inventory's, 8).")
@fleet_options
@connection_options
def preflight(model: str, venv: str | None, python_exe: str | None, endpoint: str | None,
              api_key_env: str | None, endpoint_timeout: float, output_dir: str | None, min_free_gb: float,
              packages: tuple[str, ...], timeout: float, as_json: bool, no_remote_code: bool,
              parallel: int | None, **kwargs: Any) -> int | Finished:
    """Gate a data-generation job: tokenizer, chat template, loss masks, mask token, ids, endpoint, disk."""
    selection = HostSelection.from_kwargs(kwargs)
    flags = ConnectionFlags.from_kwargs(kwargs)
    request = PreflightRequest(model=model, venv=venv, python_exe=python_exe, endpoint=endpoint,
                               api_key_env=api_key_env, endpoint_timeout=endpoint_timeout, output_dir=output_dir,
                               min_free_gb=min_free_gb, packages=packages, timeout=timeout,
                               no_remote_code=no_remote_code)
    validate(request)
    if selection.fleet:
        return preflight_fleet(request, flags, selection, parallel, as_json=as_json)
    inventory = load_inventory_for(flags.hosts_file) if flags.host else None
    executor, entry = executor_for(flags, inventory)
    with Phases(f"checking {model} on {flags.host or 'this machine'}"):
        report = run_preflight(request, executor, entry, local=not flags.host, inventory=inventory)
    if as_json:
        echo_json(report.document.to_dict())
    elif not session().quiet:
        print_checklist(report.checks, report.target)
    return EXIT_OK if report.ready else EXIT_FINDINGS


def preflight_fleet(request: PreflightRequest, flags: ConnectionFlags, selection: HostSelection,
                    parallel: int | None, *, as_json: bool) -> Finished:
    """The gate on every selected inventory host; the exit code is the worst host's."""
    inventory, hosts = select_fleet(flags.hosts_file, selection)
    known_hosts = fleet_known_hosts(flags, inventory, hosts)  # parsed once for the whole fleet

    def make_executor(entry: HostEntry) -> Executor:
        return executor_for(dataclasses.replace(flags, host=entry.name), inventory, known_hosts)[0]

    results = preflight_hosts(request, hosts, make_executor, parallel=parallel or inventory.defaults.parallel,
                              inventory=inventory)
    if as_json:
        document = {"schema": "introspect.fleet-preflight/v1", "model": request.model,
                    "hosts": [{"host": item.host, "exit_code": item.exit_code, "ready": item.ready,
                               "report": item.report.document.to_dict() if item.report else None,
                               "error": item.error} for item in results],
                    "ready": sum(1 for item in results if _ready(item)), "total": len(results)}
        echo_json(document)  # through documents.dumps: scrubbed like every other document
    elif not session().quiet:
        console = make_console()
        fixes = Fixes()  # one block after the summary: each command once, with the hosts that need it
        for item in results:
            if item.report is not None:
                console.print(f"[bold]== {escape(item.host)} ==[/]", soft_wrap=True)
                print_checklist(item.report.checks, item.report.target, console, fixes=False)
                console.print()
                for line in fix_lines(item.report.checks):
                    fixes.add(line, item.host, item.report.target)
        print_fleet_summary(console, results)
        print_fixes(console, fixes, gap=True)
    notices = tuple(Notice(f"{item.host}: {item.error.get('message')}", item.error.get("hint"))
                    for item in results if item.error)
    return Finished(max((item.exit_code for item in results), default=0), notices)


def _ready(item: PreflightHostResult) -> bool:
    return item.report is not None and item.report.ready


def print_fleet_summary(console: Console, results: list[PreflightHostResult]) -> None:
    """One line per host (its verdict and counts, or why it was not gated), then 'N of M ready':
    what a job scheduler's operator reads first."""
    rows = []
    for item in results:
        report = item.report
        if report is None:
            message = str((item.error or {}).get("message") or "no report")
            rows.append(["[bold red]NOT CHECKED[/]", escape(item.host), escape(message)])
            continue
        counts = {s: sum(1 for c in report.checks if c.status == s) for s in ("pass", "warn", "fail")}
        failed = ", ".join(c.name for c in report.checks if c.status == "fail")
        verdict = "[bold green]READY[/]" if report.ready else "[bold red]NOT READY[/]"
        detail = f"{counts['pass']} passed, {counts['warn']} warnings, {counts['fail']} failed"
        rows.append([verdict, escape(item.host), escape(detail + (f" ({failed})" if failed else ""))])
    print_rows(console, FLEET_COLUMNS, rows, header=False)
    ready_hosts = sum(1 for item in results if _ready(item))
    console.print(f"[bold]{ready_hosts} of {len(results)} hosts ready[/]")


def print_checklist(checks: list[Check], target: PreflightTarget, console: Console | None = None, *,
                    fixes: bool = True) -> None:
    """The human report: one row per check, the verdict, then every distinct fix (unwrapped);
    ``fixes=False``: a fleet's, whose fixes are printed once for all hosts."""
    console = console or make_console()
    where = target.get("host") or "local"
    print_folded(console, f"[bold]Preflight[/] {escape(str(target.get('model_path')))} on {escape(str(where))} "
                 f"with {escape(str(target.get('python')))}", hang=2)
    rows = [[ICONS[check.status], escape(check.name), escape(check.message)] for check in checks]
    print_rows(console, CHECK_COLUMNS, rows, header=False)
    verdict = "[bold green]READY[/]" if ready(checks) else "[bold red]NOT READY[/]"
    counts = {s: sum(1 for c in checks if c.status == s) for s in ("pass", "warn", "fail", "skipped")}
    console.print(f"{verdict}: {counts['pass']} passed, {counts['warn']} warnings, {counts['fail']} failed"
                  + (f", {counts['skipped']} skipped" if counts["skipped"] else ""))
    if fixes:  # a command for the host runs through its transport (ssh ..., podman exec ...), as probe's do
        print_fixes(console, [fix_on_target(line, target) for line in fix_lines(checks)], gap=True)


def fix_lines(checks: list[Check]) -> list[str]:
    """The fix lines of the checks that did not pass: a check's fix may be several lines (a
    command, then a ``# comment`` naming the alternative), each printed on its own."""
    return [line for check in checks if check.fix and check.status != "pass" for line in check.fix.splitlines()]
