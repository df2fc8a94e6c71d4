"""Layout for a terminal of any width that never breaks a value: the engine of :func:`print_rows`.

- :func:`fold`: text folded at word boundaries, never inside a word and never between a number
  and its unit (``553.4 GiB``); a word longer than the width stays whole on its own line (the
  terminal soft-wraps it, so it is still copied whole) instead of being cut.
- :class:`Rows`: a table that folds at cell boundaries. At its natural width it is one line per
  row; narrower, its free-text columns fold inside their cells while each cell stays short,
  then go on their own lines under the row; when even the identifying and number columns do not
  fit, each row becomes a block: its identifying cells on one line, ``name: value`` pairs under it.
- :class:`KVTable`: the report's key/value sections (a rich ``Table`` to build, laid out here):
  values fold beside their key with a hanging indent, or under the key when the terminal is narrow.

Lines are never padded to the width, so piped output carries no trailing blanks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

    from introspect.cli.render_term import Col

PADDING = 2  # between table columns
MIN_TEXT = 16  # narrowest free-text column worth folding into
MAX_FOLD_LINES = 3  # a cell that folds to more lines reads better on its own line under the row
UNDER = 4  # indent of what goes under a row or a key
MIN_VALUE = 24  # narrowest value column of a key/value section before values go under their keys
_WORD = re.compile(r"\S+")
# A unit is kept on the line of the number before it: "553.4 GiB", "3.2 s", "90 %".
_UNIT = re.compile(r"(?:[KMGTPE]i?B|B|bytes|s|ms|%)[),.;:]*")
_NUMBER_END = re.compile(r"(?<![A-Za-z_])\d[\d.,]*$")


def _words(plain: str) -> list[tuple[int, int]]:
    """Spans of the unbreakable words of ``plain``: runs of non-blanks, a unit glued to its number."""
    spans: list[tuple[int, int]] = []
    for match in _WORD.finditer(plain):
        if spans and _UNIT.fullmatch(match.group()) and _NUMBER_END.search(plain[spans[-1][0]:spans[-1][1]]):
            spans[-1] = (spans[-1][0], match.end())
        else:
            spans.append(match.span())
    return spans


def _line_spans(plain: str, width: int, rest: int | None = None) -> list[tuple[int, int]]:
    """Greedy word-boundary breaks of one line of text, the first line ``width`` wide, the others
    ``rest`` (default the same); leading blanks stay on the first line."""
    lines: list[tuple[int, int]] = []
    start = end = -1
    for word_start, word_end in _words(plain):
        if start < 0:
            start, end = (0 if not lines else word_start), word_end
        elif cell_len(plain[start:word_end]) <= (width if not lines or rest is None else rest):
            end = word_end
        else:
            lines.append((start, end))
            start, end = word_start, word_end
    if start >= 0:
        lines.append((start, end))
    return lines or [(0, 0)]


def fold(text: Text, width: int, rest: int | None = None) -> list[Text]:
    """``text`` as lines of at most ``width`` cells (``rest`` after the first line), broken only
    between words; a word wider than its line is a line of its own. Its own newlines are kept."""
    out: list[Text] = []
    for line in text.split("\n", allow_blank=True):
        first = width if not out or rest is None else rest
        spans = _line_spans(line.plain, max(first, 1), None if rest is None else max(rest, 1))
        out.extend(line[start:end] for start, end in spans)
    return out


def width_of(text: Text) -> int:
    return max((cell_len(line) for line in text.plain.split("\n")), default=0)


def word_widths(text: Text) -> list[int]:
    """The width of each unbreakable word of ``text`` (a number with its unit is one)."""
    return [cell_len(text.plain[s:e]) for s, e in _words(text.plain)]


def longest_word(text: Text) -> int:
    return max(word_widths(text), default=0)


def indent(lines: Iterable[Text], first: int, rest: int | None = None) -> list[Text]:
    """``lines`` shifted right: the first by ``first`` blanks, the others by ``rest`` (hanging)."""
    out = []
    for i, line in enumerate(lines):
        out.append(Text(" " * (first if i == 0 or rest is None else rest)) + line)
    return out


def hanging(text: Text, width: int, first: int, rest: int) -> list[Text]:
    """``text`` folded to ``width`` with a hanging indent. A line that holds one word too wide for
    its place starts at ``UNDER`` when it fits there; else it stays in place, past the width (the
    terminal soft-wraps it, and it is still copied whole)."""
    out: list[Text] = []
    for i, line in enumerate(fold(text, width - first, width - rest)):
        lead = first if i == 0 else rest
        if lead + cell_len(line.plain) > width >= UNDER + cell_len(line.plain):
            lead = min(lead, UNDER)
        out.append(Text(" " * lead) + line)
    return out


def pairs(items: Sequence[Text], width: int, lead: int) -> list[Text]:
    """Items (``name: value`` pairs, id cells) on lines of ``width`` at indent ``lead``, two blanks
    apart, broken only between items; an item too wide for a line of its own folds at its words."""
    out: list[Text] = []
    line: Text | None = None
    for item in items:
        if line is not None and lead + cell_len(line.plain) + PADDING + cell_len(item.plain) <= width:
            line = line + Text(" " * PADDING) + item
            continue
        if line is not None:
            out.append(Text(" " * lead) + line)
            line = None
        if lead + cell_len(item.plain) <= width and "\n" not in item.plain:
            line = item
        else:
            out.extend(hanging(item, width, lead, lead + 2))
    if line is not None:
        out.append(Text(" " * lead) + line)
    return out


def emit(console: Console, lines: Iterable[Text]) -> RenderResult:
    """Lines as segments, each whole: a line is never wrapped or padded here."""
    for line in lines:
        line.rstrip()
        yield from line.render(console, end="")
        yield Segment.line()


def to_text(console: Console, cell: Any) -> Text:
    """A cell as :class:`Text`: rich markup (data already escaped) through the console's own
    parser, which shows host-controlled control characters as escapes."""
    if isinstance(cell, Text):
        return cell
    return console.render_str(str(cell), markup=True, emoji=False, highlight=False)


class Rows:
    """``cols`` and ``rows`` of :func:`introspect.cli.render_term.print_rows`, laid out at the width
    the console gives (see the module docstring)."""

    def __init__(self, cols: Sequence[Col], rows: Sequence[Sequence[Any]], title: str | None = None, *,
                 header: bool = True, header_style: str = "bold") -> None:
        self.cols, self.rows, self.title, self.header, self.header_style = cols, rows, title, header, header_style

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from emit(console, self.lines(console, options.max_width))

    def lines(self, console: Console, width: int) -> list[Text]:
        from introspect.cli.render_table import rows_lines

        return rows_lines(console, self, width)


class KVTable(Table):
    """A report section of ``key  value`` rows, built with :meth:`Table.add_row` (a value is markup
    or a renderable: a nested :class:`Rows` goes under its key), laid out by :func:`kv_lines`."""

    def __init__(self, title: str | None = None, gap: int = 2, key_style: str = "dim") -> None:
        super().__init__(title=title, show_header=False, box=None, padding=(0, gap))
        self.gap, self.key_style = gap, key_style
        self.add_column(style=key_style, no_wrap=True)
        self.add_column()

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from emit(console, self.lines(console, options.max_width))

    def lines(self, console: Console, width: int) -> list[Text]:
        from introspect.cli.render_table import kv_lines

        keys, values = (list(column.cells) for column in self.columns)
        title = Text(str(self.title), style="bold") if self.title else None
        return kv_lines(console, title, list(zip(keys, values, strict=True)), width, self.gap, self.key_style)


class Prose:
    """One line of prose (markup) folded at the console's width: its own leading blanks, then
    continuation lines indented by ``hang``."""

    def __init__(self, markup: str, hang: int = 4) -> None:
        self.markup, self.hang = markup, hang

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        text = to_text(console, self.markup)
        lead = len(text.plain) - len(text.plain.lstrip(" "))
        yield from emit(console, hanging(text[lead:], options.max_width, lead, self.hang))


def fold_plain(text: str, width: int, hang: int = 4) -> list[str]:
    """:func:`hanging` for a plain line of text (no markup), its own leading blanks kept."""
    lead = len(text) - len(text.lstrip(" "))
    return [line.plain.rstrip() for line in hanging(Text(text[lead:]), width, lead, hang)]
