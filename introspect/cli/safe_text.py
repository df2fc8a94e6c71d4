"""Host-controlled text shown on a terminal as text, never obeyed as a control sequence.

A model directory's name, config.json's ``model_type``, a special token, a chat template, an
error message or the remote interpreter's stderr all come from the host, and a terminal acts on
what it is sent: ``ESC ] 0 ; title BEL`` retitles the window, ``ESC [ 2 J`` clears the screen,
``ESC [ 8 m`` hides what follows, CR and backspace overwrite what was printed, and U+202E
(RIGHT-TO-LEFT OVERRIDE) reorders it ("Trojan Source", https://trojansource.codes/).
:func:`visible` replaces each such character with its Python escape (``\\x1b``, ``\\u202e``):
the sequence shows as inert text, and the reader sees that it was there.

Escaped: Unicode categories Cc (C0, DEL, C1) and Cf (BiDi overrides and isolates, zero-width
characters, the BOM), lone surrogates (Cs: a non-UTF-8 byte decoded with ``surrogateescape``,
which a UTF-8 terminal stream cannot even encode) and the line/paragraph separators
U+2028/U+2029. Kept: the newlines and tabs the renderers lay out themselves.

Applied at the two places text reaches the terminal: :func:`safe_console` (every rich console:
strings before markup is parsed, so tables measure the escaped width, and every rendered
segment as a net for ``Text`` built directly), and the plain ``click.echo`` lines (``error:``,
``fix:``, ``warning:``, diff). JSON output needs none of it: ``json.dumps`` already writes every
control character and, with its default ``ensure_ascii``, every non-ASCII one as ``\\uXXXX``.
"""

from __future__ import annotations

import functools
import unicodedata
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable

    from rich.console import Console, ConsoleOptions, RenderableType
    from rich.segment import Segment
    from rich.text import Text

ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
LAYOUT = "\n\t"  # what the renderers themselves lay out with: kept by default


def escape_char(char: str) -> str:
    """``\\x1b``, ``\\u202e``, ``\\U000e0001``: the Python escape of one character."""
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: str, keep: str = LAYOUT) -> str:
    """``text`` with every control, format and separator character escaped, except ``keep``."""
    if text.isprintable():  # the common case, in C: nothing to escape
        return text
    return "".join(escape_char(c) if c not in keep and not c.isprintable()
                   and unicodedata.category(c) in ESCAPED_CATEGORIES else c for c in text)


def one_line(text: str) -> str:
    """:func:`visible` with newlines and tabs escaped too: for a line that must stay one line."""
    return visible(text, keep="")


@functools.cache
def _console_class() -> type[Console]:
    """rich's Console, escaping data on its way in; built on first use (rich loads lazily)."""
    from rich.console import Console
    from rich.segment import Segment

    class SafeConsole(Console):
        def render_str(self, text: str, **kwargs: Any) -> Text:
            # Before markup is parsed and cells are measured: the table is laid out for the
            # escaped text. Markup itself never holds a control character.
            return super().render_str(visible(text), **kwargs)

        def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
            # A net for ``Text`` objects built without render_str (progress columns, titles).
            # Control segments (cursor moves, our own styling) are rich's, never the host's.
            for segment in super().render(renderable, options):
                if segment.control or segment.text.isprintable():
                    yield segment
                else:
                    yield Segment(visible(segment.text), segment.style)

    return SafeConsole


def safe_console(**kwargs: Any) -> Console:
    """A rich Console (same arguments) that prints host-controlled text through :func:`visible`."""
    return _console_class()(**kwargs)
