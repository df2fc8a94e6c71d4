"""Terminal output that never crops what identifies a row, and fixes that can be pasted.

- :func:`make_console`: rich without emoji codes or highlighting (``package:six:`` stays text);
  data goes through :func:`rich.markup.escape` at every call site, and control characters in it
  are shown as escapes (:mod:`introspect.cli.safe_text`).
- :func:`print_rows`: a table whose identifying columns (host, path, run id) and numbers
  never wrap and are never cut; free text comes last and folds at word boundaries, or goes on
  its own lines under the row; when the identifying columns alone are wider than the terminal,
  each row becomes a block of lines (:mod:`introspect.cli.render_fold`). Nothing is ever
  broken inside a value. ``--wide`` prints the table at its natural width.
- :func:`print_folded`: a line of prose folded at word boundaries with a hanging indent.
- :class:`Fixes` / :func:`print_fixes`: the "To fix:" block at the end of a report, one
  line per distinct fix, a command never folded so it pastes as it reads (a ``# comment``
  folds into several ``# `` lines: :func:`introspect.cli.fix_lines.paste_lines`); fixes added with
  the host that needs them print as one block per command with its hosts
  (:mod:`introspect.cli.fix_groups`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from introspect.cli.session import session

if TYPE_CHECKING:
    from rich.console import Console

WIDE_COLUMNS = 100_000  # --wide: no table is ever this wide, so none is folded


def human_count(value: Any) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "?"
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.2f}{unit}"
    return str(value)


def human_bytes(value: Any) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return str(value)


def escape(text: str) -> str:
    """:func:`rich.markup.escape`, with rich loaded only when a run prints for people."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def make_console(*, stderr: bool = False) -> Console:
    from introspect.cli.safe_text import safe_console  # host-controlled text shown, never obeyed

    console = safe_console(stderr=stderr, highlight=False, emoji=False, soft_wrap=False)
    if session().wide and not stderr:
        console.width = WIDE_COLUMNS
    return console


@dataclass(frozen=True)
class Col:
    name: str
    kind: Literal["id", "num", "text"] = "id"  # id/num: never wrapped or cut; text: folds, goes last


def print_rows(console: Console, cols: Sequence[Col], rows: Sequence[Sequence[str]],
               title: str | None = None, *, header: bool = True) -> None:
    """``rows`` hold rich markup (data already escaped), one cell per column of ``cols``; laid out
    by :class:`introspect.cli.render_fold.Rows`, never cropped (a word wider than the terminal
    is left for it to soft-wrap)."""
    from introspect.cli.render_fold import Rows

    console.print(Rows(cols, rows, title, header=header), crop=False)


def print_folded(console: Console, markup: str, hang: int = 4) -> None:
    """One line of prose (a problem, a drift, a finding) folded to the console at word boundaries,
    its continuation lines indented by ``hang``; a word wider than the line is kept whole."""
    from introspect.cli.render_fold import Prose

    console.print(Prose(markup, hang), crop=False)


def fold_lines(text: str, hang: int = 4) -> list[str]:
    """A plain line (for ``click.echo``) folded to the terminal's width like :func:`print_folded`;
    one line under ``--wide``."""
    from introspect.cli.render_fold import fold_plain

    return fold_plain(text, make_console().width, hang)


@dataclass
class Fixes:
    """Distinct fixes in the order first met; in a fleet, with the hosts that need each."""

    items: list[str] = field(default_factory=list)
    hosts: dict[str, list[str]] = field(default_factory=dict)  # fix -> the hosts that need it, in order met
    targets: dict[str, Mapping[str, Any]] = field(default_factory=dict)  # host -> its profile's target block (transport)
    order: list[str] = field(default_factory=list)  # the hosts, in the order first met

    def add(self, fix: object, host: str | None = None, target: Mapping[str, Any] | None = None) -> None:
        """``host``: which host needs it; ``target``: that host's target block, when a command for
        the host should be printed through its transport (``ssh ... 'pip install ...'``)."""
        text = str(fix).strip() if fix else ""
        if not text:
            return
        if text not in self.items:
            self.items.append(text)
        if host is not None:
            self.order += [host] if host not in self.order else []
            needing = self.hosts.setdefault(text, [])
            if host not in needing:
                needing.append(host)
            if target is not None:
                self.targets.setdefault(host, target)


def print_fixes(console: Console, fixes: Fixes | Sequence[str], *, gap: bool = False) -> None:
    """``gap``: a blank line first (after a report that does not end with one)."""
    items = fixes.items if isinstance(fixes, Fixes) else list(dict.fromkeys(fixes))
    if not items:
        return
    if gap:
        console.print()
    from introspect.cli.fix_lines import print_block, shell_line  # they build on this module's Fixes

    # A command as it is, a sentence as a '# comment': every line can be pasted.
    lines = [shell_line(fix) for fix in items]
    if isinstance(fixes, Fixes) and fixes.hosts:
        from introspect.cli.fix_groups import grouped_lines

        hosts: dict[str, list[str]] = {}
        for fix, needing in fixes.hosts.items():
            known = hosts.setdefault(shell_line(fix), [])
            known += [host for host in needing if host not in known]
        lines = grouped_lines(list(dict.fromkeys(lines)), hosts, fixes.targets, fixes.order)
    print_block(console, "To fix:", lines)  # prose folded into '# ' lines, commands whole
