"""What a command hands back to ``main``: its exit code and the error lines to print.

Commands render their report and return a :class:`Finished`; ``main`` is the only
place that writes ``error:``/``fix:`` (and ``warning:``) lines, after the report, so
every failure reads the same whichever command met it.

One exit-code rule for every command (documented in docs/output.md):

- 0: everything asked for was done and nothing failed;
- 1: the run completed but found problems (error findings, failed checks, differences);
- 2: bad usage or bad input (flags, inventory, a missing model dir or venv, a file that is no profile);
- 3: a host could not be reached, refused authentication or showed a wrong host key.

A run over several hosts (or two diff operands) exits with the highest code of any of
them (:func:`combined`): one unreachable host makes the whole run 3, as a cron job must
notice.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from introspect.errors import EXIT_OK, IntrospectError


@dataclass(frozen=True)
class Notice:
    """One ``error: <text>`` line (then ``fix: <hint>`` when there is one), or a ``warning:``."""

    text: str
    hint: str | None = None
    level: Literal["error", "warning"] = "error"
    kind: str | None = None  # the exception class behind an error (its --json error code)
    host: str | None = None


@dataclass(frozen=True)
class Finished:
    code: int
    notices: tuple[Notice, ...] = ()


def notice(exc: IntrospectError, where: str | None = None) -> Notice:
    """The notice of ``exc`` (its one line), prefixed with ``where:`` when given."""
    text = exc.one_line()
    return Notice(f"{where}: {text}" if where else text, exc.hint, kind=type(exc).__name__, host=exc.host or where)


def combined(codes: Iterable[int]) -> int:
    """The exit code of a run over several units (hosts, operands): the highest of theirs."""
    return max(codes, default=EXIT_OK)
