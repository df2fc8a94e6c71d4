"""What the report is made of: each INPUT read back and sorted into pages.

An INPUT is a saved document introspect writes (a profile, raw facts, a plan, a compare, a
fleet of profiles, a health run) or a history database (recognised by SQLite's file header);
live ``HOST:PATH`` targets are probed by the CLI and arrive here as profiles. Raw facts are
profiled by :func:`introspect.analysis.profile.build_profile`, the code path of
``introspect profile RAW``; a fleet document or several profiles are compared by
:func:`introspect.analysis.diff.compare.compare_rows`, the code of ``introspect compare``.
"""

from __future__ import annotations

import shlex
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from introspect.client.documents import read_document
from introspect.errors import InputError
from introspect.remote.contract import RAW_SCHEMA, as_dict
from introspect.report.history import Health, from_store

PROFILE = "introspect.profile/v1"
PLAN = "introspect.plan/v1"
COMPARE = "introspect.compare/v1"
FLEET = "introspect.fleet-profiles/v1"
HEALTH = "introspect.health/v1"
ACCEPTED = (PROFILE, RAW_SCHEMA, PLAN, COMPARE, FLEET, HEALTH)
KINDS = {PROFILE: "profile", RAW_SCHEMA: "profile", PLAN: "plan", COMPARE: "compare", FLEET: "fleet", HEALTH: "health"}
SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every database file (sqlite.org/fileformat.html)
READ_HINT = ("introspect probe --model PATH --json -o model.json  # report reads a profile, raw facts, a plan, "
             "a compare, a fleet or a health document, a history database, or HOST:PATH")
HISTORY_RUNS = 30  # the runs of the history database the timeline shows, latest


@dataclass
class Loaded:
    kind: str  # profile, plan, compare, fleet, health, history
    label: str
    document: dict[str, Any] | None  # None for a history database
    path: str | None


def label_of(path: str) -> str:
    return "stdin" if path == "-" else Path(path).name.removesuffix(".json")


def is_database(path: str) -> bool:
    if path == "-":
        return False
    try:
        with open(path, "rb") as handle:
            return handle.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def load(path: str) -> Loaded:
    """One saved INPUT; an InputError (exit 2) for a file that is none of the accepted documents."""
    if is_database(path):
        return Loaded("history", label_of(path), None, path)
    document = read_document(path, ACCEPTED, what="a document introspect writes", hint=READ_HINT)
    schema = document["schema"]
    if schema == RAW_SCHEMA:
        from introspect.analysis.profile import build_profile  # the aggregator, only for raw facts

        document = build_profile(document)
    return Loaded(KINDS[schema], label_of(path), document, path)


def history(path: str, limit: int = HISTORY_RUNS) -> Health:
    """The health timeline of a history database, read-only; its faults named as ``history`` names them."""
    from introspect.checks.history import HistoryStore
    from introspect.checks.history_db import describe

    where = Path(path).expanduser()
    if not where.is_file():
        raise InputError(f"no history database at {where}",
                         hint=f"introspect health --db {shlex.quote(str(where))}  # records one; or check the path")
    try:
        with HistoryStore(where, read_only=True, timeout=10.0) as store:
            timeline = from_store(store, f"history database {where}", limit) if store.has_runs_table() \
                else Health(f"history database {where}", [], [], [])
    except (OSError, sqlite3.Error) as exc:
        fault = describe(exc, where)
        raise InputError(f"cannot read the history database: {fault.cause}", hint=fault.fix) from None
    return timeline


def compare_profiles(profiles: list[Loaded]) -> dict[str, Any]:
    """The compare document of several profiles: one row each, judged as ``introspect compare`` judges."""
    from introspect.analysis.diff.compare import compare_rows
    from introspect.client.compare import row_of, unique_labels

    rows = [row_of({"host": item.label, "exit_code": 0, "profile": item.document, "error": None}, source="file",
                   file=item.path) for item in profiles]
    return compare_rows(unique_labels(rows))


def compare_fleet(loaded: Loaded) -> dict[str, Any]:
    """The compare document of a fleet document's hosts (``probe --all-hosts --json``)."""
    from introspect.analysis.diff.compare import compare_rows
    from introspect.client.compare import row_of, unique_labels

    items = [item for item in as_dict(loaded.document).get("hosts") or [] if isinstance(item, dict)]
    document = compare_rows(unique_labels([row_of(item, source="file", file=loaded.path) for item in items]))
    return {**document, "model": as_dict(loaded.document).get("model")}


__all__ = ["ACCEPTED", "HISTORY_RUNS", "Loaded", "compare_fleet", "compare_profiles", "history", "is_database",
           "label_of", "load"]
