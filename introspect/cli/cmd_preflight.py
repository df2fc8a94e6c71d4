"""``introspect preflight``: is this host ready to generate drafter training data? (issue 5)

Two requests of the remote ``preflight`` task run at once over one connection: the
quick standard-library part (endpoint, disk, packages) and the isolated tokenizer
part (transformers, the model's own code, a hard deadline). A hung tokenizer load
therefore still leaves the endpoint, disk and package verdicts. The verdicts are
``introspect.checks.preflight``'s; this module only gathers and renders.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import posixpath
import shlex
import urllib.parse
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from introspect.checks.preflight import Check, evaluate, ready
from introspect.cli.connect import ConnectionFlags, connection_options, executor_for, load_inventory_for
from introspect.errors import (
    EXIT_FINDINGS,
    EXIT_OK,
    ConnectError,
    InterpreterError,
    IntrospectError,
    ModelPathError,
    UsageError,
)
from introspect.probe import interpreter, target_of
from introspect.transport.base import Executor

SCHEMA = "introspect.preflight/v1"
TASK = "preflight"
DEFAULT_PACKAGES = ("transformers", "jinja2")
LIGHT_GRACE_S = 30.0  # on top of two endpoint calls: disk and package metadata are quick
ICONS = {"pass": "[green]✔ pass[/]", "warn": "[yellow]! warn[/]", "fail": "[bold red]✘ fail[/]"}


@click.command("preflight")
@click.option("--model", "-m", required=True, help="Model directory on the target.")
@click.option("--venv", help="The data pipeline's virtualenv on the target (its bin/python runs the checks).")
@click.option("--python", "python_exe", help="Interpreter on the target instead of --venv (default python3).")
@click.option("--endpoint", help="OpenAI-compatible server base URL, as the host sees it (http://127.0.0.1:30000).")
@click.option("--api-key-env", help="Name of a variable in the host's environment holding the endpoint's API key "
              "(its value is never shown).")
@click.option("--endpoint-timeout", type=float, default=30.0, show_default=True,
              help="Seconds for each endpoint request.")
@click.option("--output-dir", help="Where the data will be written on the target (default: the home directory).")
@click.option("--min-free-gb", type=float, default=50.0, show_default=True,
              help="Free space required at --output-dir.")
@click.option("--packages", "packages", multiple=True, metavar="P[,P...]",
              help="Distributions the pipeline needs, besides transformers, jinja2 and the tokenizer code's "
                   "imports (repeatable, or comma-separated).")
@click.option("--timeout", type=float, default=300.0, show_default=True,
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
    _validate(venv, python_exe, endpoint, api_key_env, endpoint_timeout, min_free_gb, timeout)
    inventory = load_inventory_for(flags.hosts_file) if flags.host else None
    executor, entry = executor_for(flags, inventory)
    if entry is not None and not venv and not python_exe and entry.venvs:
        venv = entry.venvs[0].path  # as `probe` does: the entry's first venv is the natural default
    if not flags.host:
        # Local run: paths are the user's, relative to this shell (remote ones resolve from $HOME).
        model = os.path.abspath(model)
        output_dir = os.path.abspath(output_dir) if output_dir else None
    remote_code = not no_remote_code and (entry.remote_code if entry else True)
    if entry is not None and venv:  # an inventory may forbid remote code per venv, as for `probe`
        remote_code = remote_code and all(v.remote_code for v in entry.venvs if v.path == venv)
    request = {"model_path": model, "trust_remote_code": remote_code,
               "endpoint": endpoint.rstrip("/") if endpoint else None, "endpoint_timeout": endpoint_timeout,
               "api_key_env": api_key_env, "output_dir": output_dir,
               "pipeline_packages": _packages(packages)}
    python = interpreter(python_exe, venv)
    with executor:
        evidence = gather(executor, python, request, timeout=timeout,
                          light_timeout=2 * endpoint_timeout + LIGHT_GRACE_S)
    _require_model_dir(evidence, model)
    checks = evaluate(evidence, min_free_gb=min_free_gb, pip=pip_command(venv, python_exe), model_path=model)
    target = target_of(executor, python, venv, model) | {"endpoint": request["endpoint"],
                                                          "output_dir": output_dir}
    report = build_report(checks, evidence, target)
    if as_json:
        click.echo(json.dumps(report, indent=2, default=str))
    else:
        print_checklist(checks, target)
    return EXIT_OK if report["ready"] else EXIT_FINDINGS


def _validate(venv: str | None, python_exe: str | None, endpoint: str | None, api_key_env: str | None,
              endpoint_timeout: float, min_free_gb: float, timeout: float) -> None:
    if venv and python_exe:
        raise UsageError("--venv and --python are exclusive", hint="pass one: --venv DIR or --python EXE")
    if endpoint is not None:
        parts = urllib.parse.urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"--endpoint {endpoint!r} is not an http(s) URL",
                             hint="pass the server's base URL, e.g. --endpoint http://127.0.0.1:30000")
    if api_key_env is not None and not api_key_env.isidentifier():
        raise UsageError(f"--api-key-env {api_key_env!r} is not a variable name",
                         hint="pass the NAME of the variable (e.g. --api-key-env OPENAI_API_KEY), never the key")
    if min_free_gb < 0 or endpoint_timeout <= 0 or timeout <= 0:
        raise UsageError("--min-free-gb must be >= 0 and the timeouts > 0", hint="check the numbers given")


def _packages(given: tuple[str, ...]) -> list[str]:
    names = list(DEFAULT_PACKAGES)
    for value in given:
        for name in value.split(","):
            name = name.strip()
            if not name:
                continue
            if not all(c.isalnum() or c in "-_." for c in name):
                raise UsageError(f"--packages {name!r} is not a distribution name",
                                 hint="name distributions as pip does (e.g. --packages datasets,pyarrow)")
            if name not in names:
                names.append(name)
    return names


def pip_command(venv: str | None, python_exe: str | None) -> str:
    """The install command the fixes name: the pipeline venv's own pip."""
    if venv:
        return shlex.quote(posixpath.join(venv.rstrip("/") or "/", "bin", "pip"))
    return f"{shlex.quote(python_exe or 'python3')} -m pip"


def gather(executor: Executor, python: str, request: dict[str, Any], *, timeout: float,
           light_timeout: float) -> dict[str, Any]:
    """Both parts' evidence merged; a part that failed leaves its error records instead."""
    executor.connect()  # host, auth and host-key errors surface here, before any thread (exit 3)
    jobs = {"light": (light_timeout, False), "tokenizer": (timeout, True)}
    evidence: dict[str, Any] = {"errors": [], "timings": {}}
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = {part: pool.submit(executor.run_python, python, TASK, dict(request, parts=[part]),
                                     timeout=part_timeout, isolate=isolate)
                   for part, (part_timeout, isolate) in jobs.items()}
        for part, future in futures.items():
            _merge(evidence, part, future)
    return evidence


def _merge(evidence: dict[str, Any], part: str, future: concurrent.futures.Future) -> None:
    try:
        reply = future.result()
    except (ConnectError, InterpreterError):
        raise  # unreachable host (3) or unusable interpreter (2): no verdict is possible
    except IntrospectError as exc:  # a timeout or crash of one part costs that part only
        evidence["errors"].append({"probe": f"{TASK}.{part}", "type": type(exc).__name__,
                                   "message": exc.message, "hint": exc.hint})
        return
    facts = reply.facts if isinstance(reply.facts, dict) else {}
    for key, value in facts.items():
        if key not in ("errors", "timings"):
            evidence[key] = value
    evidence["errors"].extend(e for e in reply.errors if isinstance(e, dict))
    evidence["timings"].update({f"{part}.{k}": v for k, v in (facts.get("timings") or {}).items()})
    evidence["timings"][part] = reply.seconds


def _require_model_dir(evidence: dict[str, Any], model: str) -> None:
    status = (evidence.get("model") or {}).get("status")
    if status and status != "ok":
        raise ModelPathError(f"model path {model!r}: {status}",
                             hint="pass --model the directory that holds config.json (on the target)",
                             stage="preflight")


def build_report(checks: list[Check], evidence: dict[str, Any], target: dict[str, Any]) -> dict[str, Any]:
    """The --json document: every check with status, evidence and fix."""
    return {"schema": SCHEMA, "ready": ready(checks), "target": target,
            "checks": [dataclasses.asdict(c) | {"title": c.title} for c in checks],
            "errors": evidence.get("errors") or [], "timings": evidence.get("timings") or {}}


def print_checklist(checks: list[Check], target: dict[str, Any], console: Console | None = None) -> None:
    """The human report: one row per check, its fix under it, and the verdict."""
    console = console or Console()
    where = target.get("host") or "local"
    console.print(f"[bold]Preflight[/] {escape(str(target.get('model_path')))} on {escape(str(where))} "
                  f"with {escape(str(target.get('python')))}")
    table = Table(show_header=False, box=None, padding=(0, 1))
    table.add_column(no_wrap=True)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for check in checks:
        table.add_row(ICONS[check.status], check.name, escape(check.message))
        if check.fix and check.status != "pass":
            table.add_row("", "", f"[cyan]fix:[/] {escape(check.fix)}")
    console.print(table)
    verdict = "[bold green]READY[/]" if ready(checks) else "[bold red]NOT READY[/]"
    counts = {s: sum(1 for c in checks if c.status == s) for s in ("pass", "warn", "fail")}
    console.print(f"{verdict}: {counts['pass']} passed, {counts['warn']} warnings, {counts['fail']} failed")

