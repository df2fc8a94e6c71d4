"""The fleet page: the hosts x facts matrix with the odd values marked, and each host's health
over time, unreachable hosts first.

The matrix is ``introspect compare``'s document (:func:`introspect.analysis.diff.compare.compare_rows`
makes it from saved profiles or a fleet document when the report is given those): its columns,
majorities and odd cells are shown as they are, never judged again here. The health comes from
:mod:`introspect.report.history`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone

from markupsafe import Markup

from introspect.documents.compare import Column as CompareColumn
from introspect.documents.compare import CompareDocument
from introspect.documents.compare import Row as CompareRow
from introspect.remote.contract import as_dict
from introspect.report.history import Change, Health
from introspect.report.svg import Picture, group, legend, rect, tag, text, title

STATUS_WORDS = {"pass": "every check passed", "warn": "warnings", "fail": "a check failed",
                "unreachable": "unreachable", "none": "not checked"}
LABEL_W, CELL, GAP, MARGIN, HEAD = 190.0, 22.0, 3.0, 10.0, 34.0


@dataclass
class MatrixCell:
    key: str
    text: str
    known: bool
    odd: bool
    reason: str | None


@dataclass
class Column:
    key: str
    title: str
    differs: bool


@dataclass
class MatrixRow:
    label: str
    host: str | None
    error: str | None  # why the row has no profile
    hint: str | None  # its fix
    exit_code: int | None  # the compare run's: 3 is unreachable
    cells: list[MatrixCell]


@dataclass
class Matrix:
    """The facts that differ as columns (and free disk, never the same twice), as ``introspect compare``
    prints them; the facts every host agrees on, and those none knows, listed once below."""

    columns: list[Column]
    rows: list[MatrixRow]
    differing: list[str]
    compared: int  # rows with a profile
    total: int  # rows
    model: str | None
    same: list[tuple[str, str, str]]  # (title, the common value, "known for k of n" or "")
    unknown: list[tuple[str, str]]  # (title, why no row knows it)


@dataclass
class FleetPage:
    id: str
    title: str
    matrix: Matrix | None
    health: Health | None
    health_svg: Markup | None
    kind: str = field(default="fleet", init=False)


def matrix_of(document: CompareDocument) -> Matrix:
    """The page's matrix of a compare document; the rows without a profile (unreachable first) on top."""
    from introspect.cli.cmd_compare import shown  # the same words the terminal table uses

    wide = [c for c in document.columns if c.differs or (not c.judged and c.distinct > 1)]
    rows = []
    for row in document.rows:
        cells = []
        for column in wide:
            fact = _fact(row, column.key)
            known = bool(fact.get("known"))
            reason = fact.get("reason")
            cells.append(MatrixCell(column.key, shown(column.kind, fact.get("value")) if known else "?", known,
                                    column.key in row.odd, reason if isinstance(reason, str) else None))
        error = row.error or {}  # why the row has no profile, as the compare run wrote it
        rows.append(MatrixRow(row.label, row.host, str(error.get("message") or "no profile") if row.error else None,
                              str(error["hint"]) if error.get("hint") else None, row.exit_code, cells))
    rows.sort(key=lambda r: 0 if r.error and r.exit_code == 3 else 1 if r.error else 2)  # stable: else as given
    same, unknown = _agreed(document, [c for c in document.columns if c not in wide], shown)
    columns_shown = [Column(c.key, c.title, c.differs) for c in wide]
    compared = sum(1 for row in rows if row.error is None)
    return Matrix(columns_shown, rows, list(document.differing), compared, len(rows), document.model, same, unknown)


def _fact(row: CompareRow, key: str) -> Mapping[str, object]:
    """The cell of fact ``key`` in ``row`` (value, known, reason), as the compare document holds it."""
    return as_dict(row.facts.get(key))


def _agreed(document: CompareDocument, columns: list[CompareColumn], shown: Callable[[str, object], str]
            ) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """The columns one value fills on every row that knows it, and those no row knows (with why)."""
    rows = [r for r in document.rows if not r.error]
    compared = len(rows)
    same, unknown = [], []
    for column in columns:
        facts = [_fact(r, column.key) for r in rows]
        known = [f for f in facts if f.get("known")]
        if known:
            partial = f"known for {len(known)} of {compared}" if len(known) < compared else ""
            same.append((column.title, shown(column.kind, known[0].get("value")), partial))
        elif facts:
            unknown.append((column.title, str(facts[0].get("reason"))))
    return same, unknown


def fleet_page(page_id: str, label: str, matrix: Matrix | None, health: Health | None) -> FleetPage:
    picture = draw_health(health) if health is not None and health.runs else None
    return FleetPage(page_id, f"fleet: {label}", matrix, health, picture.markup() if picture else None)


def when(ts: float) -> str:
    """A run's start as the page prints it (UTC, so that two readers of a ticket agree)."""
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def draw_health(health: Health) -> Picture:
    """Hosts down, runs across (oldest left): one cell per host and run, a ring where versions changed."""
    runs, hosts = health.runs, health.hosts
    width = 2 * MARGIN + LABEL_W + max(len(runs), 1) * (CELL + GAP) + 120
    picture = Picture(width, 0, f"health of {len(hosts)} hosts over {len(runs)} runs", "health-timeline")
    changed = {(c.run_id, c.host) for c in health.changes}
    for slot, run in enumerate(runs):
        if slot in (0, len(runs) - 1) or slot % 5 == 0:
            x = MARGIN + LABEL_W + slot * (CELL + GAP)
            picture.add(text(x, MARGIN + 10, f"#{run.id}" if run.id is not None else "run", "small"))
    for row, host in enumerate(hosts):
        y = MARGIN + HEAD + row * (CELL + GAP)
        picture.add(text(MARGIN, y + 15, host if len(host) <= 28 else host[:27] + "…", "label"))
        for slot, run in enumerate(runs):
            state = run.hosts.get(host)
            status = state.status if state is not None else "none"
            x = MARGIN + LABEL_W + slot * (CELL + GAP)
            tip = f"{host}, run #{run.id} ({when(run.started_at)}): {STATUS_WORDS[status]}"
            if state is not None and state.problems:
                tip += "\n" + "\n".join(state.problems[:8])
            marks = [rect(x, y, CELL, CELL, f"cell s-{status}", title(tip))]
            if (run.id, host) in changed:
                marks.append(tag("circle", {"cx": x + CELL / 2, "cy": y + CELL / 2, "r": 4.5, "class_": "changed"}))
            picture.add(group({"class_": "health-cell", "data-host": host, "data-run": run.id, "data-status": status,
                               "data-changed": "true" if (run.id, host) in changed else None}, marks))
    bottom = MARGIN + HEAD + len(hosts) * (CELL + GAP)
    items = [(f"s-{s}", STATUS_WORDS[s]) for s in ("pass", "warn", "fail", "unreachable", "none")]
    items.append(("changed", "versions or state changed in this run"))
    marks, used = legend(items, MARGIN, bottom + 6, width - 2 * MARGIN)
    picture.add(*marks)
    picture.height = bottom + 6 + used + MARGIN
    return picture


def change_rows(changes: list[Change]) -> list[dict[str, str]]:
    """The "what changed and when" table, latest first."""
    out = []
    for change in sorted(changes, key=lambda c: (-c.started_at, c.host)):
        what = (f"{change.what} {change.before or '(none)'} → {change.after or '(removed)'}"
                if change.before is not None or change.after is not None else change.what)
        out.append({"when": when(change.started_at), "run": f"#{change.run_id}" if change.run_id is not None else "",
                    "host": change.host, "venv": change.venv or "", "kind": change.kind, "what": what})
    return out


__all__ = ["FleetPage", "Matrix", "MatrixCell", "MatrixRow", "change_rows", "draw_health", "fleet_page", "matrix_of",
           "when"]
