"""The layouts of :class:`introspect.cli.render_fold.Rows` and ``KVTable``, as lines of text.

A table takes the first layout that fits the width:

1. one line per row, every column at its natural width;
2. free-text columns folded inside their cells (each at least as wide as its longest word and
   ``MIN_TEXT``, no cell over ``MAX_FOLD_LINES`` lines), the other columns whole;
3. the identifying and number columns as a table, each row's free text on its own lines under it;
4. one block per row: its identifying cells on a line, its other cells as ``name: value`` pairs
   under it, broken only between pairs.

Layouts 1 to 3 are tried with the headers whole, then again with each header folded at its words
to the width of its column's values (``max`` over ``context`` above ``262,144``), before layout 4.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.text import Text

from introspect.cli.render_fold import (
    MAX_FOLD_LINES,
    MIN_TEXT,
    MIN_VALUE,
    PADDING,
    fold,
    hanging,
    indent,
    longest_word,
    pairs,
    to_text,
    width_of,
    word_widths,
)

if TYPE_CHECKING:
    from rich.console import Console

    from introspect.cli.render_fold import Rows
    from introspect.cli.render_term import Col

ROW_UNDER = 2  # indent of a row's free text (layout 3) and of a block's pairs (layout 4)
KEY_UNDER = 2  # a value under its key: this much further right than the key


def _span(widths: Sequence[int]) -> int:
    return sum(widths) + PADDING * max(len(widths) - 1, 0)


def _text_widths(cols: Sequence[Col], cells: list[list[Text]], natural: list[int], width: int) -> list[int] | None:
    """Widths for layout 2 (None: it does not fit): the fixed columns at their natural width,
    the free-text columns sharing the rest, each at least its longest word."""
    texts = [i for i, col in enumerate(cols) if col.kind == "text"]
    room = width - _span([natural[i] for i, col in enumerate(cols) if col.kind != "text"]) - PADDING * len(texts)
    if not texts or len(texts) == len(cols):
        room += PADDING
    need = {i: min(natural[i], max(MIN_TEXT, *(longest_word(row[i]) for row in cells))) for i in texts}
    if sum(need.values()) > room:
        return None
    widths = list(natural)
    extra = room - sum(need.values())
    for i in texts:  # the rest shared in column order, each up to its natural width
        widths[i] = need[i] + min(natural[i] - need[i], extra)
        extra -= widths[i] - need[i]
    if any(len(fold(row[i], widths[i])) > MAX_FOLD_LINES for row in cells for i in texts):
        return None
    return widths


def _grid(cols: Sequence[Col], rows: Sequence[Sequence[Text]], widths: Sequence[int]) -> list[Text]:
    """Rows at the given column widths: free text folded in its cell, numbers right-aligned."""
    out = []
    for row in rows:
        cells = [fold(cell, w) if col.kind == "text" else cell.split("\n", allow_blank=True)
                 for col, cell, w in zip(cols, row, widths, strict=True)]
        for j in range(max((len(c) for c in cells), default=0)):
            line = Text()
            for i, (col, lines, w) in enumerate(zip(cols, cells, widths, strict=True)):
                piece = lines[j] if j < len(lines) else Text()
                pad = Text(" " * max(w - cell_len(piece.plain), 0))
                line += (pad + piece) if col.kind == "num" else (piece + pad)
                if i < len(cols) - 1:
                    line += Text(" " * PADDING)
            out.append(line)
    return out


def _pair(col: Col, cell: Text) -> Text:
    # The colon ends the name: "params (total / active): 1.03T / 31.69B" reads as one pair even
    # where the dim style is lost (a log, a file, NO_COLOR).
    return Text(f"{col.name}:", style="dim") + Text(" ") + cell


def _under(cols: Sequence[Col], row: Sequence[Text], width: int) -> list[Text]:
    """A row's free-text cells on their own lines: one alone as it is, several as name/value pairs."""
    texts = [(col, cell) for col, cell in zip(cols, row, strict=True) if col.kind == "text" and cell.plain]
    if len(texts) == 1:
        return hanging(texts[0][1], width, ROW_UNDER, ROW_UNDER + 2)
    return pairs([_pair(col, cell) for col, cell in texts], width, ROW_UNDER)


def _blocks(cols: Sequence[Col], cells: list[list[Text]], width: int) -> list[Text]:
    """Layout 4: per row, its identifying cells on a line (broken only between cells), the rest under."""
    out: list[Text] = []
    for row in cells:
        ids = [cell for col, cell in zip(cols, row, strict=True) if col.kind == "id" and cell.plain]
        rest = [_pair(col, cell) for col, cell in zip(cols, row, strict=True)
                if col.kind != "id" and cell.plain]
        out.extend(pairs(ids, width, 0))
        out.extend(pairs(rest, width, ROW_UNDER))
    return out


def rows_lines(console: Console, table: Rows, width: int) -> list[Text]:
    cols = list(table.cols)
    cells = [[to_text(console, cell) for cell in row] for row in table.rows]
    heads = [Text(col.name, style=table.header_style) for col in cols] if table.header else None
    out = hanging(to_text(console, table.title), width, 0, ROW_UNDER) if table.title else []
    for line in out:
        line.stylize("bold")
    # Layouts 1 to 3 with the headers whole, then with each header folded at its words to the
    # width of its column's values ("max context" over "262,144"), before a block per row.
    for header in (heads, _folded(heads, cells)):
        lines = _table(cols, header, cells, width)
        if lines is not None:
            return out + lines
        if header is None:
            break
    return out + _blocks(cols, cells, width)


def _folded(heads: list[Text] | None, cells: list[list[Text]]) -> list[Text] | None:
    """The headers folded to their values' width (never narrower than a header's longest word),
    or None when that changes none of them."""
    if heads is None:
        return None
    widths = [max([longest_word(head), *(width_of(row[i]) for row in cells)]) for i, head in enumerate(heads)]
    folded = [Text("\n").join(fold(head, w)) for head, w in zip(heads, widths, strict=True)]
    return folded if any(width_of(f) < width_of(h) for f, h in zip(folded, heads, strict=True)) else None


def _table(cols: Sequence[Col], heads: list[Text] | None, cells: list[list[Text]], width: int) -> list[Text] | None:
    """Layouts 1 to 3 under ``heads`` (None: no header row), or None when none fits."""
    natural = [max([width_of(heads[i]) if heads else 0, *(width_of(row[i]) for row in cells)])
               for i in range(len(cols))]
    header = [heads] if heads else []
    if _span(natural) <= width:
        return _grid(cols, header + cells, natural)
    widths = _text_widths(cols, cells, natural, width)
    if widths is not None:
        return _grid(cols, header + cells, widths)
    fixed = [i for i, col in enumerate(cols) if col.kind != "text"]
    if not fixed or _span([natural[i] for i in fixed]) > width:
        return None
    keep = [cols[i] for i in fixed]
    out = _grid(keep, [[heads[i] for i in fixed]], [natural[i] for i in fixed]) if heads else []
    for row in cells:
        out += _grid(keep, [[row[i] for i in fixed]], [natural[i] for i in fixed])
        out += _under(cols, row, width)
    return out


def _nested(console: Console, value: Any, width: int) -> list[Text]:
    """A renderable value (a nested table) as lines of ``width``, never cropped."""
    if hasattr(value, "lines"):
        return list(value.lines(console, width))
    from rich.segment import Segment

    rendered = console.render(value, console.options.update_width(width))
    return [Text.assemble(*((s.text, s.style or "") for s in line if not s.control))
            for line in Segment.split_lines(rendered)]


def kv_lines(console: Console, title: Text | None, rows: list[tuple[Any, Any]], width: int, gap: int,
             key_style: str) -> list[Text]:
    """``key  value`` lines: values beside their keys, folded with a hanging indent under the
    value column; under their keys when the value column would be narrower than ``MIN_VALUE``
    or than a word of a value."""
    out = [title] if title is not None else []
    keys = []
    for key, _ in rows:
        text = to_text(console, key).copy()
        text.style = key_style
        keys.append(text)
    key_width = max((width_of(k) for k in keys), default=0)
    value_at = gap + key_width + 2 * gap  # the look of rich's Table with padding (0, gap): kept
    # A word wider than the value column that fits under a key (a dotted config key, a path)
    # would leave its line and the lines around it at two indents: then every value of the
    # section goes under its key, so the section keeps one layout. A word too wide even there
    # (a sha256 at 60 columns) moves only its own value under its key.
    room, under = width - value_at, width - gap - KEY_UNDER
    texts = [to_text(console, value) for _, value in rows if isinstance(value, (str, Text))]
    beside = room >= MIN_VALUE and not any(room < w <= under for text in texts for w in word_widths(text))
    for key, (_, value) in zip(keys, rows, strict=True):
        label = Text(" " * gap) + key
        if not isinstance(value, (str, Text)):
            out.append(label)
            out += indent(_nested(console, value, width - gap - KEY_UNDER), gap + KEY_UNDER)
            continue
        text = to_text(console, value)
        if not beside or longest_word(text) > room:
            out += [label, *_under_key(text, width, gap + KEY_UNDER)]
            continue
        body = hanging(text, width, value_at, value_at)
        out.append(label + Text(" " * (value_at - cell_len(label.plain))) + body[0][value_at:])
        out += body[1:]
    return out


def _under_key(text: Text, width: int, at: int) -> list[Text]:
    """A value under its key at ``at``: each of its lines (``from a, b, c`` after the answer)
    starts there, its continuation lines two further right, so where each begins stays clear."""
    out: list[Text] = []
    for line in text.split("\n", allow_blank=True):
        out += hanging(line, width, at, at + 2)
    return out
