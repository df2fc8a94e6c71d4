"""Terminal output that never crops what identifies a row, and fixes that can be pasted.

- :func:`make_console`: rich without emoji codes or highlighting (``package:six:`` stays text);
  data goes through :func:`rich.markup.escape` at every call site, and control characters in it
  are shown as escapes (:mod:`introspect.cli.safe_text`).
- :func:`print_rows`: a table whose identifying columns (host, path, run id) and numbers
  never wrap and are never cut; free text comes last and folds. When the identifying
  columns alone are wider than the terminal, each row becomes a block of lines
  (soft-wrapped by the terminal, so every value stays whole and copyable). ``--wide``
  prints the table at its natural width.
- :class:`Fixes` / :func:`print_fixes`: the "To fix:" block at the end of a report, one
  line per distinct fix, printed unwrapped so a command pastes as it reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from introspect.cli.session import session

if TYPE_CHECKING:
    from rich.console import Console

WIDE_COLUMNS = 100_000  # --wide: no table is ever this wide, so none is folded
MIN_TEXT = 16  # narrowest useful width of a folded free-text column
PADDING = 2


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


def _width(cell: str) -> int:
    from rich.text import Text

    from introspect.cli.safe_text import visible

    # The width the console will print: control characters as their escapes (safe_text).
    return max((Text.from_markup(visible(line)).cell_len for line in cell.splitlines()), default=0)


def _natural(cols: Sequence[Col], rows: Sequence[Sequence[str]], kinds: tuple[str, ...]) -> int:
    widths = [max([len(c.name), *(_width(r[i]) for r in rows)]) for i, c in enumerate(cols) if c.kind in kinds]
    return sum(widths) + PADDING * max(len(widths) - 1, 0)


def print_rows(console: Console, cols: Sequence[Col], rows: Sequence[Sequence[str]],
               title: str | None = None, *, header: bool = True) -> None:
    """``rows`` hold rich markup (data already escaped), one cell per column of ``cols``."""
    from rich.table import Table

    fixed = _natural(cols, rows, ("id", "num"))
    texts = sum(c.kind == "text" for c in cols)
    if fixed + texts * (MIN_TEXT + PADDING) > console.width:
        _print_blocks(console, cols, rows, title)
        return
    table = Table(title=title, title_justify="left", title_style="bold", header_style="bold", box=None,
                  padding=(0, PADDING, 0, 0), pad_edge=False, show_header=header)
    for col in cols:
        table.add_column(col.name, justify="right" if col.kind == "num" else "left",
                         no_wrap=col.kind != "text", overflow="fold")
    for row in rows:
        table.add_row(*row)
    console.print(table)


def _print_blocks(console: Console, cols: Sequence[Col], rows: Sequence[Sequence[str]], title: str | None) -> None:
    """Too narrow for one line per row: the identifying cells on a line, the rest under them."""
    if title:
        console.print(f"[bold]{title}[/]", soft_wrap=True)
    for row in rows:
        ids = [cell for col, cell in zip(cols, row, strict=True) if col.kind == "id" and cell]
        rest = [f"[dim]{col.name}[/] {cell}" for col, cell in zip(cols, row, strict=True)
                if col.kind != "id" and cell]
        console.print("  ".join(ids), soft_wrap=True)
        if rest:
            console.print("  " + "  ".join(rest), soft_wrap=True)


@dataclass
class Fixes:
    """Distinct fixes in the order first met."""

    items: list[str] = field(default_factory=list)

    def add(self, fix: object) -> None:
        text = str(fix).strip() if fix else ""
        if text and text not in self.items:
            self.items.append(text)


def print_fixes(console: Console, fixes: Fixes | Sequence[str], *, gap: bool = False) -> None:
    """``gap``: a blank line first (after a report that does not end with one)."""
    from rich.markup import escape

    items = fixes.items if isinstance(fixes, Fixes) else list(dict.fromkeys(fixes))
    if not items:
        return
    if gap:
        console.print()
    from introspect.cli.fix_lines import shell_line  # it builds on this module's Fixes

    console.print("[bold]To fix:[/]")
    for fix in items:  # a command as it is, a sentence as a '# comment': every line can be pasted
        console.print("  " + escape(shell_line(fix)), soft_wrap=True)
