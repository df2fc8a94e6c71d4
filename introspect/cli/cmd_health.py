"""``introspect health`` (``introspect history`` reads what it stores: :mod:`.cmd_history`).

``health`` checks every selected host of the inventory in parallel (bounded, staggered
connects, one connection per host, known_hosts parsed once), stores the run in the
history database, reports drift against the previous run, and exits 0 (all healthy),
1 (a check failed) or 2 (inventory or usage error). Built to run from cron or a
systemd timer: no prompt, plain lines when stderr is not a terminal, ``--prom`` for
node_exporter's textfile collector.

Rendering lives here, at the edge: the checks produce plain
dataclasses; this module turns them into a progress display, a table or JSON.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from introspect.checks.health import CheckResult, exit_code
from introspect.checks.history import default_path
from introspect.checks.history_guard import GuardedHistory
from introspect.cli import help_examples
from introspect.cli.connect import (
    ConnectionFlags,
    check_output_path,
    entry_executors,
    find_entry,
    fleet_known_hosts,
    load_inventory_for,
    select_fleet,
)
from introspect.cli.health_progress import STATUS_STYLE, health_progress, status_counts
from introspect.cli.jsonout import echo_json, with_error
from introspect.cli.options import HostSelection, LateHelpOption, host_selectors
from introspect.cli.outcome import Finished, Notice, combined, notice
from introspect.cli.session import session
from introspect.client.health import (
    HealthOptions,
    HostReport,
    all_results,
)
from introspect.client.health_document import run_json
from introspect.client.health_stop import HealthInterrupted, check_or_stop
from introspect.errors import EXIT_UNREACHABLE, UsageError
from introspect.interrupts import describe
from introspect.inventory import Defaults, HostEntry, Inventory, InventoryError, VenvEntry, select_hosts

if TYPE_CHECKING:  # rich, paramiko and prometheus_client load only when a run uses them
    from rich.console import Console

    from introspect.cli.render_term import Col, Fixes
    from introspect.client.fleet import FleetStats



# ============================================================================ health


ADHOC_HOST_HELP = ("Check this one host instead of the inventory's: an entry name, an address, an "
                   "~/.ssh/config alias or a URL (ssh://, openssh://...). Without an inventory entry it gets "
                   "the reachability check, and each --venv its python, disk and GPU checks.")
VENV_HELP = ("With --host: check this venv there (python, dependency conflicts, disk, GPUs), instead of "
             "the inventory entry's venvs (repeatable).")


def db_help() -> str:
    return f"History database (default {default_path()})."


def _health_selectors(func: Callable[..., Any]) -> Callable[..., Any]:
    return host_selectors(func, ADHOC_HOST_HELP)


@click.command("health", epilog=help_examples.HEALTH)
@_health_selectors
@click.option("--parallel", type=click.IntRange(1, 1024), default=None,
              help="Hosts checked at once (default: defaults.parallel in the inventory, 8).")
@click.option("--json", "as_json", is_flag=True, help="Print the run as JSON on stdout.")
@click.option("--prom", type=click.Path(dir_okay=False),
              help="Write a Prometheus textfile (node_exporter textfile collector), atomically.")
@click.option("--db", type=click.Path(dir_okay=False), cls=LateHelpOption, late_help=db_help)
@click.option("--keep-days", type=click.FloatRange(min=0), default=None,
              help="After recording this run, delete runs older than this many days (the latest run is kept).")
@click.option("--known-hosts", type=click.Path(dir_okay=False),
              help="known_hosts file (default: defaults.known_hosts in the inventory, else ~/.ssh/known_hosts).")
@click.option("--accept-new", is_flag=True,
              help="Record keys of never-seen hosts (StrictHostKeyChecking=accept-new); a changed key is "
                   "always refused.")
@click.option("--ssh-config", type=click.Path(dir_okay=False),
              help="ssh_config file to read instead of ~/.ssh/config and /etc/ssh/ssh_config.")
@click.option("--venv", "venvs", multiple=True, metavar="PATH", help=VENV_HELP)
@click.option("--port", "-p", type=click.IntRange(1, 65535),
              help="SSH port (default: the inventory entry's, else ssh_config, else 22).")
@click.option("--user", "-u", help="SSH user (default: the inventory entry's, else ssh_config, else the local user).")
@click.option("--identity", "-i", type=click.Path(dir_okay=False),
              help="Private key file (default: the inventory's; agent keys and ~/.ssh keys are tried too).")
@click.option("--jump", "-J", help="ProxyJump host ([user@]host[:port]); ssh_config ProxyJump works too.")
@click.option("--banner-timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds to wait for the SSH banner after connecting (default 10).")
@click.option("--auth-timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds for SSH authentication (default 15).")
@click.option("--connect-timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds for TCP connect (default: defaults.connect_timeout in the inventory, 5).")
@click.option("--transport", type=click.Choice(["openssh", "ssh"]), default=None,
              help="Transport for entries whose address is a bare name (default ssh; url: entries name their own).")
@click.option("--ssh-option", "ssh_options", multiple=True, metavar="KEY=VALUE",
              help="openssh: passed as ssh -o KEY=VALUE (repeatable).")
@click.option("--control-persist", metavar="TIME", help="openssh: keep each ControlMaster for TIME after the run.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds for each remote check task, tokenizer loads included "
                   "(default: defaults.probe_timeout in the inventory, 120).")
@click.option("--ansible-tree", type=click.Path(file_okay=False),
              help="Check nothing: report the --tree DIR of an `introspect.models.venv_health` Ansible run "
                   "(hosts and venvs from --inventory when given, else from the results).")
def health(parallel: int | None, as_json: bool, prom: str | None, db: str | None, keep_days: float | None,
           timeout: float | None, ansible_tree: str | None, venvs: tuple[str, ...], **kwargs: Any) -> Finished:
    """Check the venvs of every host in the inventory (or one --host): packages, imports, tokenizers, disk, GPUs.

    Exit 0 all healthy, 1 a check failed, 2 bad usage or inventory, 3 a host could not be reached.
    """
    selection = HostSelection.from_kwargs(kwargs)
    flags = ConnectionFlags.from_kwargs(kwargs)  # --port, --user, --identity... over the inventory's
    hosts_file = selection.hosts_file
    _check_prom_path(prom)
    check_output_path(db, "--db")
    if venvs and not selection.host:
        raise UsageError("--venv names venvs of the one --host",
                         hint="introspect health --host HOST --venv PATH  # or list the venvs in the inventory")
    if ansible_tree:
        from introspect.client.ansible_runs import tree_hosts

        inventory, hosts, factory = tree_hosts(ansible_tree, load_inventory_for(hosts_file) if hosts_file else None,
                                               lambda inv: _select_in(inv, selection))
    else:
        inventory, hosts = _select(selection, venvs)
        known = fleet_known_hosts(flags, inventory, hosts)  # parsed once, shared by every connection
        factory = entry_executors(flags, inventory, known)
    options = HealthOptions(probe_timeout=timeout or inventory.defaults.probe_timeout)
    workers = parallel or inventory.defaults.parallel
    argv = _argv(inventory.source, selection, workers, prom, db) + (["--ansible-tree", ansible_tree] if ansible_tree else [])

    # Whatever happens to the database (locked, full, read-only, damaged), the run goes on and
    # is reported; the history's troubles are warnings, and the exit code is the hosts'.
    with GuardedHistory(Path(db) if db else default_path()).open() as store, health_progress(len(hosts)) as on_done:
        run, stopped = check_or_stop(hosts, factory, store, parallel=workers, options=options, argv=argv,
                                     on_done=on_done)
        if keep_days is not None and stopped is None:
            store.prune(keep_days)
    # One rule for every command (cli/outcome.py): a host that could not be reached is exit 3.
    code = combined([exit_code(all_results(run.reports)), *(EXIT_UNREACHABLE for r in run.reports if not r.reachable)])
    error = _stopped_notice(stopped) if stopped is not None else None
    code = stopped.exit_code if stopped is not None else code
    if as_json:
        document = run_json(run.reports, run.run_id, run.started, run.finished, code, run.fleet, store.summary())
        echo_json(with_error(document, (error,), code) if error is not None else document)
    elif not session().quiet:
        _print_summary(run.reports, run.run_id, store.path, run.finished - run.started, run.fleet)
    notices = tuple(Notice(n.text, n.fix, level="warning") for n in store.notes)
    if error is not None:  # no --prom file either: a partial run's metrics would hide the unchecked hosts
        return Finished(code, (*notices, error))
    if prom:  # after the report: a failed write must not hide the results
        try:
            _write_prom(prom, run.reports, run.started, run.finished)
        except UsageError as exc:
            return Finished(combined([code, exc.exit_code]), (*notices, notice(exc)))
    return Finished(code, notices)


def _stopped_notice(stop: HealthInterrupted) -> Notice:
    text, fix, kind = describe(stop.signum)
    return Notice(text, fix, kind=kind)


def _select(selection: HostSelection, venvs: Sequence[str] = ()) -> tuple[Inventory, list[HostEntry]]:
    """The inventory's selected hosts, or the one ``--host``: its inventory entry when it has one,
    else an ad-hoc entry; either way ``--venv`` names the venvs to check (its python, disk, GPUs)."""
    if not selection.host:
        return select_fleet(selection.hosts_file, selection)
    if selection.fleet:
        select_fleet(selection.hosts_file, selection)  # the one error for --host with --only/--tags
    inventory = load_inventory_for(selection.hosts_file)
    entry = find_entry(inventory, selection.host) or HostEntry(name=selection.host, address=selection.host)
    if venvs:  # an inventory venv keeps its requires/imports/models; another is checked plainly
        known = {v.path: v for v in entry.venvs}
        entry = dataclasses.replace(entry, venvs=tuple(known.get(p) or VenvEntry(p) for p in dict.fromkeys(venvs)))
    base = inventory or Inventory(defaults=Defaults(), hosts=(), source="--host")
    others = tuple(h for h in base.hosts if h.name != entry.name)
    return dataclasses.replace(base, hosts=(*others, entry)), [entry]


def _select_in(inventory: Inventory, selection: HostSelection) -> list[HostEntry]:
    """The hosts ``--only``/``--tags`` select in an inventory that is already read (an Ansible tree's)."""
    try:
        return select_hosts(inventory, selection.only, selection.tags)
    except InventoryError as exc:
        raise UsageError(str(exc), hint="check --only/--tags against the inventory's host names and tags") from None


def _check_prom_path(prom: str | None) -> None:
    if prom and not Path(prom).expanduser().parent.is_dir():
        raise UsageError(f"--prom {prom}: directory {Path(prom).parent} does not exist",
                         hint="create it, or point --prom at node_exporter's --collector.textfile.directory")


def _write_prom(path: str, reports: Sequence[HostReport], started: float, finished: float) -> None:
    from introspect.checks.prom import write_prom

    rows = [row for report in reports for row in report.rows()]
    try:
        write_prom(Path(path).expanduser(), rows, {r.name: r.reachable for r in reports}, started, finished)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}",
                         hint=f"ls -ld {shlex.quote(str(Path(path).expanduser().parent))}  # check its "
                              "permissions and free space; the report above is complete") from None


def _argv(source: str, selection: HostSelection, parallel: int, prom: str | None, db: str | None) -> list[str]:
    # Stored with the run, so `introspect history` can tell a cron run from a manual one.
    argv = ["health", "--host", selection.host] if selection.host else ["health"]
    if source != "--host":
        argv += ["--hosts", source]
    argv += ["--parallel", str(parallel)]
    for name in selection.only:
        argv += ["--only", name]
    for tag in selection.tags:
        argv += ["--tags", tag]
    if prom:
        argv += ["--prom", prom]
    if db:
        argv += ["--db", db]
    return argv


# ------------------------------------------------------------------------ progress


# ------------------------------------------------------------------------- output


def _print_summary(reports: Sequence[HostReport], run_id: int | None, db: Path, seconds: float,
                   fleet: FleetStats) -> None:
    # The terminal's tables load here, for a report printed for people (never for --json).
    from introspect.cli.render_term import Fixes, escape, make_console, print_fixes, print_folded, print_rows

    console = make_console()
    print_rows(console, *_summary_rows(reports), title="introspect health")
    problems = [(h, v, r) for report in reports for h, v, r in report.rows() if r.status in ("fail", "warn")
                and not r.check.startswith("drift:")]
    drift_rows = [(h, v, r) for report in reports for h, v, r in report.rows() if r.check.startswith("drift:")]
    fixes = Fixes()
    _print_findings(console, "Problems", problems, fixes)
    _print_findings(console, "Drift since the previous run", drift_rows, fixes)
    failed = sum(r.status == "fail" for r in all_results(reports))
    down, unchecked = sum(not r.reachable for r in reports), sum(not r.checked for r in reports)
    verdict = (f"[bold red]{failed} check(s) failed[/]" if failed else "[green]all healthy[/]" if not unchecked
               else f"[yellow]{unchecked} not checked[/] (the run was stopped)")
    stored = (f"run #{run_id} stored in {escape(str(db))}" if run_id is not None
              else f"[yellow]history not recorded[/] in {escape(str(db))} (see the warning)")
    print_folded(console, f"{len(reports)} host(s), {down} unreachable, {verdict} in {seconds:.1f} s "
                 f"(at most {fleet['max_open_connections']} connection(s) open; --parallel {fleet['parallel']}); "
                 f"{stored}", hang=2)
    print_fixes(console, fixes, gap=True)


def _summary_rows(reports: Sequence[HostReport]) -> tuple[list[Col], list[list[str]]]:
    from introspect.cli.render_term import Col, escape

    columns = [Col("host"), Col("venv"), *(Col(s, "num") for s in ("pass", "fail", "warn", "info", "drift")),
               Col("time", "num")]
    rows: list[list[str]] = []
    for report in reports:
        host_counts = status_counts(report.host_results)
        if not report.reachable or not report.checked or not report.venvs:
            status = ("[bold red]unreachable[/]" if not report.reachable else "[yellow]not checked[/]"
                      if not report.checked else "[dim](no venvs)[/]")
            rows.append([escape(report.name), status, *_count_cells(host_counts), "", f"{report.seconds:.1f}s"])
            if not report.reachable or not report.checked:
                continue
        for venv in report.venvs:
            counts = status_counts(venv.results)
            drift_cell = f"[yellow]{len(venv.drift)}[/]" if venv.drift else ""
            rows.append([escape(report.name), escape(venv.path), *_count_cells(counts), drift_cell,
                         f"{report.seconds:.1f}s"])
    return columns, rows


def _count_cells(counts: Counter[str]) -> list[str]:
    return [f"[{STATUS_STYLE[s]}]{counts[s]}[/]" if counts[s] else "[dim]0[/]"
            for s in ("pass", "fail", "warn", "info")]


def _print_findings(console: Console, title: str, rows: Sequence[tuple[str, str | None, CheckResult]],
                    fixes: Fixes | None = None) -> None:
    if not rows:
        return
    from introspect.cli.render_term import escape, print_folded

    console.print(f"\n[bold]{title}[/]")
    for host, venv, r in rows:
        where = f"{host}:{venv}" if venv else host
        # Folded at word boundaries under the status: a path or package name is never split.
        print_folded(console, f"  [{STATUS_STYLE[r.status]}]{r.status:4}[/] {escape(where)} {escape(r.check)}: "
                     f"{escape(r.message)}", hang=7)
        if r.fix and fixes is not None:
            fixes.add(r.fix, host)  # the To fix: block names the hosts that need each command
        elif r.fix:
            console.print(f"       [dim]fix:[/] {escape(r.fix)}", soft_wrap=True)
