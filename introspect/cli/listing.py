"""Listing controls as ``hf cache ls`` has them: ``--sort``, ``--filter``, ``--limit``, ``--format``, ``-q``.

A listing command describes its rows with :class:`Field` s (how to read a value from one
row, and what kind of value it is); this module parses the flags against them, before any
host is contacted, so a typo is exit 2 at once:

- ``--sort FIELD[:asc|:desc]`` as hf spells it, or ``-FIELD`` for descending. Without an order,
  sizes, counts and times sort descending (biggest, newest first) and text ascending, hf's
  defaults:
  https://github.com/huggingface/huggingface_hub/blob/v2.4.0/src/huggingface_hub/cli/cache.py#L61-L73.
  ``--reverse`` flips whatever order that gives. Rows without the value come last either way.
- ``--filter KEY OP VALUE`` (repeatable, all must hold; hf's grammar, cache.py#L208-L290):
  ``=`` / ``!=`` on text (case-insensitive, ``*`` globs, any of the field's names matches),
  ``= != > < >= <=`` on sizes (``100GB`` is 10^9 bytes each, ``100GiB`` 2^30: our ``ByteSize``),
  counts (``70B``: K, M, B/G, T are powers of 1000, as the table prints them) and times, which
  compare the age as hf does: ``modified<7d`` is "changed within the last 7 days" (units s, m,
  h, d, w, mo, y: hf's TIME_UNITS,
  https://github.com/huggingface/huggingface_hub/blob/v2.4.0/src/huggingface_hub/utils/_parsing.py#L35-L43).
  A row without the value never matches a comparison (hf's ``_compare_numeric``).
- ``--limit N`` after sorting and filtering; ``--format table|json|csv|yaml``; ``-q/--quiet-ids``
  prints only the ids, one a line (hf's quiet mode). ``-q`` is free: the global flag is
  ``--quiet`` only (cli/session.py).
"""

from __future__ import annotations

import csv
import datetime
import fnmatch
import io
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

import click

from introspect.cli.options import parse_size
from introspect.errors import UsageError

Kind = Literal["text", "bytes", "count", "time"]
FORMATS = ("table", "json", "csv", "yaml")
_FILTER = re.compile(r"^\s*(?P<key>[A-Za-z_]+)\s*(?P<op>==|!=|>=|<=|>|<|=)\s*(?P<value>.+?)\s*$")
_SORT = re.compile(r"^(?P<minus>-?)(?P<key>[A-Za-z_]+)(?::(?P<order>asc|desc))?$")
_COUNT = re.compile(r"^([0-9]+(?:\.[0-9]+)?)\s*([kmbgt]?)$", re.IGNORECASE)
_AGE = re.compile(r"^([0-9]+)\s*(mo|[smhdwy])$", re.IGNORECASE)
COUNT_UNITS = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9, "t": 10**12}
TIME_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "mo": 30 * 86400, "y": 365 * 86400}
# hf's format_timesince steps: (label, seconds, largest value shown before the next unit)
# https://github.com/huggingface/huggingface_hub/blob/v2.4.0/src/huggingface_hub/utils/_parsing.py#L94-L116
_AGES = (("second", 1, 59), ("minute", 60, 59), ("hour", 3600, 23), ("day", 86400, 6),
         ("week", 7 * 86400, 6), ("month", 30 * 86400, 11), ("year", 365 * 86400, None))


@dataclass(frozen=True)
class Field:
    """One column a listing can be sorted and filtered by. ``get`` returns the value of a row:
    for text, a string or a list of strings (any of them matches a filter; the first sorts)."""

    name: str
    kind: Kind
    get: Callable[[Any], Any]
    help: str = ""


class ControlsJSON(TypedDict):
    """How a listing was chosen, as the ``listing`` member of a document says it (``models --json``)."""

    sort: str | None
    reverse: bool
    filters: list[str]
    limit: int | None


@dataclass(frozen=True)
class Controls:
    sort: str | None = None
    reverse: bool = False
    filters: tuple[str, ...] = ()
    limit: int | None = None
    format: str = "table"
    ids: bool = False

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any], command: str, *, json_flag: bool = False) -> Controls:
        """Pop the listing flags from a command's kwargs; ``--json`` is ``--format json``.
        ``command`` (``introspect models``) starts the fix lines of a bad combination."""
        fmt = kwargs.pop("output_format", None)
        if json_flag and fmt not in (None, "json"):
            raise UsageError(f"--json and --format {fmt} ask for two formats",
                             hint=f"{command} --format {fmt}   # --json is --format json: give one of them")
        controls = cls(sort=kwargs.pop("sort", None), reverse=bool(kwargs.pop("reverse", False)),
                       filters=tuple(kwargs.pop("filters", ()) or ()), limit=kwargs.pop("limit", None),
                       format=fmt or ("json" if json_flag else "table"), ids=bool(kwargs.pop("quiet_ids", False)))
        if controls.ids and controls.format != "table":
            raise UsageError(f"-q prints only ids; --format {controls.format} prints whole rows",
                             hint=f"{command} -q   # or --format {controls.format} without -q")
        return controls

    @property
    def active(self) -> bool:
        return bool(self.sort or self.reverse or self.filters or self.limit is not None)

    def describe(self) -> ControlsJSON:
        return {"sort": self.sort, "reverse": self.reverse, "filters": list(self.filters), "limit": self.limit}


def listing_options(fields: Sequence[Field]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The listing flags, their help naming ``fields``."""
    names = ", ".join(f.name for f in fields)

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        options = [
            click.option("--sort", metavar="FIELD[:asc|:desc]",
                         help=f"Sort by FIELD ({names}); sizes, counts and times biggest/newest first unless "
                              ":asc; -FIELD is FIELD:desc."),
            click.option("--reverse", is_flag=True, help="Reverse the order (after --sort)."),
            click.option("--filter", "filters", multiple=True, metavar="EXPR",
                         help="Keep rows where EXPR holds, e.g. 'type=deepseek_v3', 'size>100GB', 'quant=fp8*', "
                              "'modified<7d' (repeatable: all must hold)."),
            click.option("--limit", type=click.IntRange(min=0), default=None, metavar="N",
                         help="Only the first N rows (after sorting and filtering)."),
            click.option("--format", "output_format", type=click.Choice(FORMATS), default=None,
                         help="table (default), json (as --json), csv (one row per line, ISO times) or yaml."),
            click.option("-q", "--quiet-ids", is_flag=True, help="Print only the ids, one a line (for xargs)."),
        ]
        for option in reversed(options):
            func = option(func)
        return func

    return decorate


# --------------------------------------------------------------------------- parsing


def _field(fields: Sequence[Field], key: str, flag: str, expr: str, example: str) -> Field:
    found = next((f for f in fields if f.name == key.lower()), None)
    if found is None:
        raise UsageError(f"{flag} {expr!r}: no field {key!r} (fields: {', '.join(f.name for f in fields)})",
                         hint=example)
    return found


def sort_key(controls: Controls, fields: Sequence[Field],
             example: str) -> tuple[Field, bool] | None:
    """(field, descending) of ``--sort`` (with ``--reverse`` applied), None when not sorting."""
    if not controls.sort:
        return None
    found = _SORT.match(controls.sort.strip())
    if found is None or (found.group("minus") and found.group("order")):
        raise UsageError(f"--sort {controls.sort!r} is not FIELD, FIELD:asc, FIELD:desc or -FIELD", hint=example)
    chosen = _field(fields, found.group("key"), "--sort", controls.sort, example)
    order = found.group("order") or ("desc" if found.group("minus") or chosen.kind != "text" else "asc")
    return chosen, (order == "desc") != controls.reverse


def _number(kind: Kind, text: str) -> float:
    if kind == "bytes":
        try:
            return float(parse_size(text, "--filter"))
        except UsageError:
            raise ValueError("a size: 100GB (10^9 bytes), 100GiB (2^30), 512MiB") from None
    if kind == "count":
        found = _COUNT.match(text)
        if found is None:
            raise ValueError("a count: 70B, 1.5T, 7000000")
        return float(found.group(1)) * COUNT_UNITS[found.group(2).lower()]
    found = _AGE.match(text)
    if found is None:
        raise ValueError("an age: 30m, 12h, 7d, 2w, 3mo, 1y")
    return float(found.group(1)) * TIME_UNITS[found.group(2).lower()]


def _compare(left: float, op: str, right: float) -> bool:
    return {"=": left == right, "==": left == right, "!=": left != right, ">": left > right,
            "<": left < right, ">=": left >= right, "<=": left <= right}[op]


def text_values(value: Any) -> list[str]:
    items = value if isinstance(value, (list, tuple)) else [value]
    return [str(v) for v in items if v is not None and v != ""]


def compile_filter(expr: str, fields: Sequence[Field], example: str) -> Callable[[Any, float], bool]:
    """One ``--filter`` as a test of a row (and the time now)."""
    found = _FILTER.match(expr)
    if found is None:
        raise UsageError(f"--filter {expr!r} is not KEY OP VALUE (OP: = != > < >= <=)", hint=example)
    chosen = _field(fields, found.group("key"), "--filter", expr, example)
    op, raw = found.group("op"), found.group("value")
    if chosen.kind == "text":
        if op not in ("=", "==", "!="):
            raise UsageError(f"--filter {expr!r}: {chosen.name} is text, compared with = or != only", hint=example)
        pattern = raw.lower()

        def text_test(row: Any, _now: float) -> bool:
            hit = any(fnmatch.fnmatchcase(v.lower(), pattern) for v in text_values(chosen.get(row)))
            return hit != (op == "!=")

        return text_test
    try:
        threshold = _number(chosen.kind, raw)
    except ValueError as exc:
        raise UsageError(f"--filter {expr!r}: {raw!r} is not {exc}", hint=example) from None

    def number_test(row: Any, now: float) -> bool:
        value = epoch(chosen.get(row)) if chosen.kind == "time" else chosen.get(row)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return False
        return _compare(now - value if chosen.kind == "time" else value, op, threshold)

    return number_test


def apply(rows: Iterable[Any], controls: Controls, fields: Sequence[Field], example: str,
          now: float | None = None) -> list[Any]:
    """``rows`` filtered, sorted and cut to ``--limit``. Raises :class:`UsageError` for a bad flag."""
    tests = [compile_filter(expr, fields, example) for expr in controls.filters]
    order = sort_key(controls, fields, example)
    moment = time.time() if now is None else now
    out = [row for row in rows if all(test(row, moment) for test in tests)]
    if order is not None:
        out = sort_rows(out, *order)
    elif controls.reverse:
        out.reverse()
    return out if controls.limit is None else out[:controls.limit]


def sort_rows(rows: list[Any], chosen: Field, descending: bool) -> list[Any]:
    """Stable sort by ``chosen``; rows without its value last in either direction."""
    def value(row: Any) -> Any:
        raw = chosen.get(row)
        if chosen.kind == "text":
            texts = text_values(raw)
            return texts[0].lower() if texts else None
        number = epoch(raw) if chosen.kind == "time" else raw
        return number if isinstance(number, (int, float)) and not isinstance(number, bool) else None

    present = [row for row in rows if value(row) is not None]
    missing = [row for row in rows if value(row) is None]
    return sorted(present, key=value, reverse=descending) + missing


# --------------------------------------------------------------------------- times


def epoch(value: Any) -> float | None:
    """Epoch seconds from a number or an ISO-8601 time (``...Z`` or with an offset)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value:
        try:
            return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def age(value: Any, now: float | None = None) -> str:
    """``3 days ago`` (hf's format_timesince wording), ``-`` without a time."""
    moment = epoch(value)
    if moment is None:
        return "-"
    delta = (time.time() if now is None else now) - moment
    if delta < 20:
        return "a few seconds ago" if delta > -60 else "in the future"  # a host clock ahead of ours
    label, count = _AGES[-1][0], round(delta / _AGES[-1][1])
    for name, seconds, most in _AGES:
        if most is not None and round(delta / seconds) <= most:
            label, count = name, round(delta / seconds)
            break
    return f"{count} {label}{'s' if count > 1 else ''} ago"


# --------------------------------------------------------------------------- output


@dataclass
class Table:
    """Flat rows for csv: column names and one list of plain values per row."""

    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)


def csv_text(table: Table) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(table.columns)
    for row in table.rows:
        writer.writerow(["" if cell is None else cell for cell in row])
    return out.getvalue()


def yaml_text(document: Mapping[str, object]) -> str:
    """The JSON document (as printed: ``jsonout.stamped``) as YAML (block style, keys in document order)."""
    import yaml

    return str(yaml.safe_dump(document, sort_keys=False, default_flow_style=False, allow_unicode=True))
