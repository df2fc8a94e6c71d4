"""What ``health`` shows while it runs: one line per finished host and how the run is going so far.

On a terminal a rich bar keeps the tally (``812/1000 … 790 healthy · 12 failing · 10 unreachable``)
under the hosts' lines; elsewhere (cron mail, journald, a pipe) each host is one plain line that
starts with its place in the run and the tally so far, so a log read while the run goes on says
how it is going, not only which host finished last.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

import click

from introspect.checks.health import CheckResult
from introspect.cli.progress import bar_rows
from introspect.cli.safe_text import one_line, safe_console
from introspect.cli.session import session
from introspect.client.health import HostReport

STATUS_STYLE = {"pass": "green", "fail": "bold red", "warn": "yellow", "info": "cyan"}


def status_counts(results: Iterable[CheckResult]) -> Counter[str]:
    return Counter(r.status for r in results)


class Tally:
    """Hosts finished so far: healthy (reached, no failed check), failing, unreachable."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.healthy = self.failing = self.unreachable = 0

    @property
    def done(self) -> int:
        return self.healthy + self.failing + self.unreachable

    def add(self, report: HostReport) -> str:
        """Count ``report``'s host; the tally so far."""
        if not report.reachable:
            self.unreachable += 1
        elif any(r.status == "fail" for _, _, r in report.rows()):
            self.failing += 1
        else:
            self.healthy += 1
        return self.text()

    def text(self) -> str:
        return f"{self.healthy} healthy · {self.failing} failing · {self.unreachable} unreachable"


@contextmanager
def health_progress(total: int) -> Iterator[Callable[[HostReport], None]]:
    """A callback for each finished host (see the module doc); nothing under ``--quiet``."""
    if session().quiet:
        yield lambda report: None
        return
    tally = Tally(total)
    if not _may_be_terminal():  # decided before importing rich: a cron or --json run never loads it
        yield lambda report: _echo_plain(tally, report)
        return
    console = safe_console(stderr=True, highlight=False, soft_wrap=True, emoji=False)
    if not console.is_terminal:
        yield lambda report: _echo_plain(tally, report)
        return
    with bar_rows(console, total, "checking hosts", rich_line, tally.add) as done:
        yield done


def _echo_plain(tally: Tally, report: HostReport) -> None:
    summary = tally.add(report)
    click.echo(one_line(f"[{tally.done}/{tally.total}: {summary}] {plain_line(report)}"), err=True)


def _may_be_terminal() -> bool:  # False: rich would certainly not see a terminal on stderr
    return sys.stderr.isatty() or any(os.environ.get(v) for v in ("FORCE_COLOR", "FORCE_TERMINAL", "TTY_COMPATIBLE"))


def plain_line(report: HostReport) -> str:
    counts = status_counts(r for _, _, r in report.rows())
    if not report.reachable:
        cause = next(r.message for r in report.host_results if r.check == "reachable")
        return f"{report.name}: UNREACHABLE ({report.seconds:.1f} s): {cause}"
    verdict = "FAIL" if counts["fail"] else "ok"
    return (f"{report.name}: {verdict} ({report.seconds:.1f} s): {counts['pass']} pass, {counts['fail']} fail, "
            f"{counts['warn']} warn, {counts['info']} info")


def rich_line(report: HostReport) -> str:
    from introspect.cli.render_term import escape

    counts = status_counts(r for _, _, r in report.rows())
    name = escape(report.name)
    if not report.reachable:
        cause = next(r.message for r in report.host_results if r.check == "reachable")
        return f"[bold red]✗[/] {name} [red]unreachable[/] [dim]({report.seconds:.1f} s)[/] {escape(cause)}"
    mark = "[bold red]✗[/]" if counts["fail"] else "[green]✓[/]"
    parts = [f"[green]{counts['pass']} pass[/]"]
    parts += [f"[{STATUS_STYLE[s]}]{counts[s]} {s}[/]" for s in ("fail", "warn") if counts[s]]
    return f"{mark} {name} [dim]({report.seconds:.1f} s)[/] " + ", ".join(parts)


__all__ = ["STATUS_STYLE", "Tally", "health_progress", "plain_line", "rich_line", "status_counts"]
