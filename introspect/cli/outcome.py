"""What a command hands back to ``main``: its exit code and the error lines to print.

Commands render their report and return a :class:`Finished`; ``main`` is the only
place that writes ``error:``/``fix:`` (and ``warning:``) lines, after the report, so
every failure reads the same whichever command met it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from introspect.errors import IntrospectError


@dataclass(frozen=True)
class Notice:
    """One ``error: <text>`` line (then ``fix: <hint>`` when there is one), or a ``warning:``."""

    text: str
    hint: str | None = None
    level: Literal["error", "warning"] = "error"


@dataclass(frozen=True)
class Finished:
    code: int
    notices: tuple[Notice, ...] = ()


def notice(exc: IntrospectError, where: str | None = None) -> Notice:
    """The notice of ``exc`` (its one line), prefixed with ``where:`` when given."""
    text = exc.one_line()
    return Notice(f"{where}: {text}" if where else text, exc.hint)
