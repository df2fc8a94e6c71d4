"""``introspect history``: the runs ``introspect health`` stored, and their retention."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TypedDict

import click

from introspect.checks.history import HistoryStore, RunSummary, StoredResult, default_path
from introspect.checks.history_db import describe
from introspect.checks.result import Status
from introspect.cli import help_examples
from introspect.cli.cmd_health import _count_cells, _print_findings, db_help
from introspect.cli.jsonout import echo_json
from introspect.cli.options import LateHelpOption
from introspect.cli.render_term import Col, Fixes, escape, make_console, print_fixes, print_rows
from introspect.cli.session import session
from introspect.client.health import result_dict
from introspect.errors import UsageError

HISTORY_SCHEMA = "introspect.history/v1"
KEEP_HELP = "Delete the runs older than this many days first (the latest run is always kept)."


@click.group("history", invoke_without_command=True, epilog=help_examples.HISTORY)
@click.option("--host", help="Only runs that checked this host (counts are for it alone).")
@click.option("--db", type=click.Path(dir_okay=False), cls=LateHelpOption, late_help=db_help)
@click.option("--limit", type=click.IntRange(1, 100000), default=20, show_default=True,
              help="How many runs, latest first.")
@click.option("--run", "run_id", type=int, default=None, help="Show every result of this run.")
@click.option("--keep-days", type=click.FloatRange(min=0), default=None, help=KEEP_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON on stdout.")
@click.pass_context
def history(ctx: click.Context, host: str | None, db: str | None, limit: int, run_id: int | None,
            keep_days: float | None, as_json: bool) -> int:
    """Past `introspect health` runs: when, how many hosts, what passed and failed, what drifted.

    `introspect history prune --keep-days N` only deletes old runs.
    """
    ctx.ensure_object(dict)["history_db"] = db
    if ctx.invoked_subcommand is not None:
        return 0
    path = _existing_db(db)
    if path is None:
        _emit_history([], [], as_json, default_path())
        return 0
    with _open_store(path, write=keep_days is not None) as store:
        if keep_days is not None:
            store.prune(keep_days)
        stored = store.has_runs_table()  # False: a file no run was ever recorded in
        runs = store.runs(host=host, limit=limit) if stored else []
        details = store.run_results(run_id, host=host) if run_id is not None and stored else []
        if run_id is not None and not details:
            raise UsageError(f"run #{run_id} has no results{f' for {host}' if host else ''} in {path}",
                             hint="see `introspect history` for the run ids")
        problems = {run.id: [s for s in store.run_results(run.id, host=host) if s.result.status in ("fail", "warn")]
                    for run in runs} if as_json else {}
    _emit_history(runs, details, as_json, path, problems)
    return 0


def _emit_history(runs: Sequence[RunSummary], details: Sequence[StoredResult], as_json: bool, path: Path,
                  problems: dict[int, list[StoredResult]] | None = None) -> None:
    if as_json:
        doc = {"db": str(path), "runs": [_run_summary(run, (problems or {}).get(run.id, [])) for run in runs]}
        if details:
            doc["results"] = [{"host": s.host, "venv": s.venv or None, **result_dict(s.result).to_dict()} for s in details]
        echo_json(doc, HISTORY_SCHEMA)
        return
    if session().quiet:
        return
    console = make_console()
    if details:
        fixes = Fixes()
        _print_findings(console, f"Run #{details[0].run_id}", [(s.host, s.venv or None, s.result) for s in details],
                        fixes)
        print_fixes(console, fixes, gap=True)
        return
    if not runs:
        console.print(f"no runs recorded in {escape(str(path))} yet", soft_wrap=True)
        return
    rows = []
    for run in runs:
        took = f"{run.finished_at - run.started_at:.1f}s" if run.finished_at else "?"
        rows.append([str(run.id), _when(run.started_at), took, str(run.hosts),
                     *_count_cells(Counter({"pass": run.passed, "fail": run.failed, "warn": run.warned,
                                            "info": run.info})),
                     escape(" ".join(run.argv))])
    # The command is the least important column: last, and folded to what width is left.
    print_rows(console, HISTORY_COLUMNS, rows, title=f"introspect health runs ({escape(str(path))})")


HISTORY_COLUMNS = [Col("run", "num"), Col("started"), Col("took", "num"),
                   *(Col(s, "num") for s in ("hosts", "pass", "fail", "warn", "info")), Col("command", "text")]


class ProblemJSON(TypedDict):
    """A failed or warning result of a run, as ``history --json`` lists it (documents/health.py ``Problem``)."""

    host: str
    venv: str | None
    check: str
    status: Status
    message: str


# A run as ``history --json`` lists it (documents/health.py ``RunSummary``); ``pass`` is a keyword.
RunJSON = TypedDict("RunJSON", {"id": int, "started_at": float, "finished_at": float | None, "argv": list[str],
                                "hosts": int, "pass": int, "fail": int, "warn": int, "info": int,
                                "problems": list[ProblemJSON]})


def _run_summary(run: RunSummary, problems: Sequence[StoredResult]) -> RunJSON:
    return {"id": run.id, "started_at": run.started_at, "finished_at": run.finished_at, "argv": run.argv,
            "hosts": run.hosts, "pass": run.passed, "fail": run.failed, "warn": run.warned, "info": run.info,
            "problems": [{"host": s.host, "venv": s.venv or None, "check": s.result.check,
                          "status": s.result.status, "message": s.result.message} for s in problems]}


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


@history.command("prune", epilog=help_examples.HISTORY_PRUNE)
@click.option("--keep-days", type=click.FloatRange(min=0), required=True,
              help="Delete the runs older than this many days (the latest run is always kept).")
@click.option("--db", type=click.Path(dir_okay=False), cls=LateHelpOption, late_help=db_help)
@click.pass_context
def prune(ctx: click.Context, keep_days: float, db: str | None) -> int:
    """Delete old runs from the history database (retention for a long-running cron job)."""
    db = db or (ctx.obj or {}).get("history_db")
    path = _existing_db(db)
    if path is None:
        click.echo(f"no history database at {default_path()}; nothing to prune")
        return 0
    with _open_store(path, write=True) as store:
        deleted = store.prune(keep_days)
        left = len(store.runs(limit=100000))
    click.echo(f"deleted {deleted} run(s) older than {keep_days:g} day(s) from {path}; {left} left")
    return 0


@contextmanager
def _open_store(path: Path, *, write: bool = False) -> Iterator[HistoryStore]:
    """The database, read-only unless pruning: reading then works on a read-only file system or
    an immutable file and changes nothing; any failure is one error naming its cause."""
    try:
        store = HistoryStore(path, read_only=not write, timeout=10.0)
        try:
            yield store
        finally:
            store.close()
    except (OSError, sqlite3.Error) as exc:
        fault = describe(exc, path)
        raise UsageError(f"cannot {'prune' if write else 'read'} the history database: {fault.cause}",
                         hint=fault.fix) from None


def _existing_db(db: str | None) -> Path | None:
    """The database to read: ``--db`` must exist; the default may not yet (then None)."""
    path = Path(db).expanduser() if db else default_path()
    if path.exists():
        return path
    if db:
        # Not created here: a typo in --db must not leave an empty database behind.
        raise UsageError(f"no history database at {path}", hint="run `introspect health --db FILE` first, "
                         "or check the path")
    return None
