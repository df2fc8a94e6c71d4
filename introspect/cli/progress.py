"""Progress on stderr, only when stderr is a terminal (and not ``--quiet``).

Two shapes: :class:`Phases`, a spinner naming what a single-target command is doing
now; :func:`host_rows`, a bar with one printed row per finished host for fleets.
Nothing is written when stderr is a pipe or a file, so logs and ``2>err`` stay clean.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any

from introspect.cli.session import session

if TYPE_CHECKING:
    from rich.console import Console
    from rich.status import Status


def enabled() -> bool:
    return not session().quiet and sys.stderr.isatty()


class Phases:
    """``with Phases("connecting to gpu-a1") as p: ...; p.phase("probing ...")``."""

    def __init__(self, first: str) -> None:
        self.first = first
        self._status: Status | None = None

    def __enter__(self) -> Phases:
        if enabled():
            from introspect.cli.safe_text import safe_console

            console = safe_console(stderr=True, highlight=False, emoji=False)
            self._status = console.status(self._text(self.first))
            self._status.start()
        return self

    @staticmethod
    def _text(text: str) -> str:
        from rich.markup import escape

        return escape(text) + " ..."

    def phase(self, text: str) -> None:
        if self._status is not None:
            self._status.update(self._text(text))

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


@contextmanager
def host_rows(total: int, label: str, row: Callable[[Any], str],
              ok: Callable[[Any], bool] | None = None) -> Iterator[Callable[[Any], None]]:
    """A callback for each finished host: prints ``row(result)`` (rich markup) above a bar; with
    ``ok``, the bar also keeps the summary so far (``812 ok · 43 failed``): a run of thousands of
    hosts shows how it is going, not only how far."""
    if not enabled():
        yield lambda _result: None
        return
    from introspect.cli.safe_text import safe_console

    console = safe_console(stderr=True, highlight=False, emoji=False, soft_wrap=True)
    with bar_rows(console, total, label, row, _ok_failed(ok) if ok is not None else None) as done:
        yield done


def _ok_failed(ok: Callable[[Any], bool]) -> Callable[[Any], str]:
    counts = [0, 0]  # ok, failed

    def tally(result: Any) -> str:
        counts[0 if ok(result) else 1] += 1
        return f"{counts[0]} ok · {counts[1]} failed"

    return tally


@contextmanager
def bar_rows(console: Console, total: int, label: str, row: Callable[[Any], str],
             tally: Callable[[Any], str] | None = None) -> Iterator[Callable[[Any], None]]:
    """The bar of :func:`host_rows` on a console the caller found to be a terminal: ``row(result)``
    printed above it for each finished host, and ``tally(result)``, the summary so far, kept on it."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    summary = [TextColumn("{task.fields[tally]}")] if tally is not None else []
    progress = Progress(SpinnerColumn(), TextColumn(label), BarColumn(), MofNCompleteColumn(), *summary,
                        TimeElapsedColumn(), console=console, transient=True)
    task = progress.add_task(label, total=total, tally="")

    def done(result: Any) -> None:
        progress.console.print(row(result))
        if tally is not None:
            progress.update(task, tally=tally(result))
        progress.advance(task)

    with progress:
        yield done
