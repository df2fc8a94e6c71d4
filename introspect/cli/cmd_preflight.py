"""``introspect preflight``: flags to :func:`introspect.client.preflight.run_preflight`, and the checklist."""

from __future__ import annotations

from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from introspect.checks.preflight import Check, ready
from introspect.cli.connect import ConnectionFlags, connection_options, executor_for, load_inventory_for
from introspect.cli.jsonout import echo_json
from introspect.cli.progress import Phases
from introspect.cli.render_term import Col, make_console, print_fixes, print_rows
from introspect.cli.session import session
from introspect.client.preflight import (
    DEFAULT_ENDPOINT_TIMEOUT,
    DEFAULT_MIN_FREE_GB,
    DEFAULT_TIMEOUT,
    PreflightRequest,
    run_preflight,
    validate,
)
from introspect.errors import EXIT_FINDINGS, EXIT_OK

ICONS = {"pass": "[green]✔ pass[/]", "warn": "[yellow]! warn[/]", "fail": "[bold red]✘ fail[/]",
         "skipped": "[dim]- skipped[/]"}
CHECK_COLUMNS = (Col(""), Col("check"), Col("result", "text"))


@click.command("preflight")
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
@connection_options
def preflight(model: str, venv: str | None, python_exe: str | None, endpoint: str | None,
              api_key_env: str | None, endpoint_timeout: float, output_dir: str | None, min_free_gb: float,
              packages: tuple[str, ...], timeout: float, as_json: bool, no_remote_code: bool,
              **kwargs: Any) -> int:
    """Gate a data-generation job: tokenizer, chat template, loss masks, mask token, ids, endpoint, disk."""
    flags = ConnectionFlags.from_kwargs(kwargs)
    request = PreflightRequest(model=model, venv=venv, python_exe=python_exe, endpoint=endpoint,
                               api_key_env=api_key_env, endpoint_timeout=endpoint_timeout, output_dir=output_dir,
                               min_free_gb=min_free_gb, packages=packages, timeout=timeout,
                               no_remote_code=no_remote_code)
    validate(request)
    inventory = load_inventory_for(flags.hosts_file) if flags.host else None
    executor, entry = executor_for(flags, inventory)
    with Phases(f"checking {model} on {flags.host or 'this machine'}"):
        report = run_preflight(request, executor, entry, local=not flags.host)
    if as_json:
        echo_json(report.document)
    elif not session().quiet:
        print_checklist(report.checks, report.target)
    return EXIT_OK if report.ready else EXIT_FINDINGS


def print_checklist(checks: list[Check], target: dict[str, Any], console: Console | None = None) -> None:
    """The human report: one row per check, the verdict, then every distinct fix (unwrapped)."""
    console = console or make_console()
    where = target.get("host") or "local"
    console.print(f"[bold]Preflight[/] {escape(str(target.get('model_path')))} on {escape(str(where))} "
                  f"with {escape(str(target.get('python')))}", soft_wrap=True)
    rows = [[ICONS[check.status], escape(check.name), escape(check.message)] for check in checks]
    print_rows(console, CHECK_COLUMNS, rows, header=False)
    verdict = "[bold green]READY[/]" if ready(checks) else "[bold red]NOT READY[/]"
    counts = {s: sum(1 for c in checks if c.status == s) for s in ("pass", "warn", "fail", "skipped")}
    console.print(f"{verdict}: {counts['pass']} passed, {counts['warn']} warnings, {counts['fail']} failed"
                  + (f", {counts['skipped']} skipped" if counts["skipped"] else ""))
    print_fixes(console, [c.fix for c in checks if c.fix and c.status != "pass"], gap=True)
