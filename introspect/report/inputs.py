"""What the report is made of: each INPUT read back, validated once into its typed document, and
sorted into pages.

An INPUT is a saved document introspect writes (a profile, raw facts, a plan, a compare, a
fleet of profiles, a health run) or a history database (recognised by SQLite's file header);
live ``HOST:PATH`` targets are probed by the CLI and arrive here as profiles. Raw facts are
profiled by :func:`introspect.analysis.profile.build_profile`, the code path of
``introspect profile RAW``; a fleet document or several profiles are compared by
:func:`introspect.analysis.diff.compare.compare_document`, the code of ``introspect compare``.

A file is JSON from outside (written by hand, or by another version): it is masked
(:func:`introspect.redact.scrub_document`, the last guard of every file introspect writes: a page
is pasted into tickets) and validated here, once; the pages read typed records only. A document
that does not validate is an :class:`InputError` naming the first field that did not fit.
"""

from __future__ import annotations

import shlex
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import ValidationError

from introspect.client.documents import read_document
from introspect.documents.base import Record
from introspect.documents.compare import CompareDocument
from introspect.documents.health import HealthDocument
from introspect.documents.listing import FleetProfilesDocument
from introspect.documents.profile import ProfileDocument
from introspect.documents.profile_serving import Plan
from introspect.errors import InputError
from introspect.redact import scrub_document
from introspect.remote.contract import RAW_SCHEMA
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
# kind -> (its words, the command that writes it with this version: the fix of one that does not validate).
REMAKE = {"profile": ("profile", "introspect probe --model PATH --json -o profile.json"),
          "plan": ("plan", "introspect plan PROFILE.json --json > plan.json"),
          "compare": ("compare document", "introspect compare A.json B.json --json > compare.json"),
          "fleet": ("fleet document", "introspect probe --all-hosts --model PATH --json > fleet.json"),
          "health": ("health run", "introspect health --json > health.json")}
# The envelope keys of a plan document that its plan section (profile_serving.Plan) does not hold.
PLAN_ENVELOPE = ("schema", "introspect_version", "error")

ReportDocument = ProfileDocument | Plan | CompareDocument | FleetProfilesDocument | HealthDocument
# kind -> the typed document a saved file of that kind is validated into (a plan: its section, read_plan).
MODELS: dict[str, type[ProfileDocument | CompareDocument | FleetProfilesDocument | HealthDocument]] = {
    "profile": ProfileDocument, "compare": CompareDocument, "fleet": FleetProfilesDocument, "health": HealthDocument}
Model = TypeVar("Model", bound=Record)


@dataclass
class Loaded:
    kind: str  # profile, plan, compare, fleet, health, history
    label: str
    document: ReportDocument | None  # None for a history database
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


def validated(model: type[Model], data: Mapping[str, object], kind: str, where: str) -> Model:
    """``data`` (a document as read, masked) as its typed model; an InputError (exit 2) naming the
    first field that does not fit, with the command that writes this version's document as its fix."""
    try:
        return model.model_validate(scrub_document(dict(data)))
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(p) for p in first["loc"])
        words, command = REMAKE[kind]
        raise InputError(f"{where}: the {words} is not one this introspect reads ({path}: {first['msg']})",
                         hint=f"{command}  # a {words} from this version, instead of {where}") from None


def read_plan(section: Mapping[str, object], where: str) -> Plan:
    """The typed plan of a plan document (``introspect plan --json``: the profile's plan section, stamped)."""
    return validated(Plan, {key: value for key, value in section.items() if key not in PLAN_ENVELOPE}, "plan", where)


def load(path: str) -> Loaded:
    """One saved INPUT; an InputError (exit 2) for a file that is none of the accepted documents,
    or one of them that this version does not read."""
    if is_database(path):
        return Loaded("history", label_of(path), None, path)
    data = read_document(path, ACCEPTED, what="a document introspect writes", hint=READ_HINT)
    schema, label = data["schema"], label_of(path)
    if schema == RAW_SCHEMA:
        from introspect.analysis.profile import build_profile  # the aggregator, only for raw facts

        data = build_profile(data)
    kind = KINDS[schema]
    where = "stdin" if path == "-" else path
    document: ReportDocument = read_plan(data, where) if kind == "plan" else validated(MODELS[kind], data, kind, where)
    return Loaded(kind, label, document, path)


def live(label: str, profile: Mapping[str, object]) -> Loaded:
    """A live target's profile (``introspect.profile/v1`` as ``probe --json`` prints it), typed."""
    return Loaded("profile", label, validated(ProfileDocument, profile, "profile", label), None)


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


def compare_profiles(profiles: list[tuple[str, str | None, ProfileDocument]]) -> CompareDocument:
    """The compare document of several (label, file, profile): one row each, judged as ``introspect compare`` judges."""
    from introspect.analysis.diff.compare import compare_document
    from introspect.client.compare import row_of, unique_labels

    rows = [row_of({"host": label, "exit_code": 0, "profile": profile.to_dict(), "error": None}, source="file",
                   file=path) for label, path, profile in profiles]
    return compare_document(unique_labels(rows))


def compare_fleet(fleet: FleetProfilesDocument, path: str | None) -> CompareDocument:
    """The compare document of a fleet document's hosts (``probe --all-hosts --json``)."""
    from introspect.analysis.diff.compare import compare_document
    from introspect.client.compare import row_of, unique_labels

    document = compare_document(unique_labels([row_of(item, source="file", file=path) for item in fleet.hosts]))
    return document.model_copy(update={"model": fleet.model})


__all__ = ["ACCEPTED", "HISTORY_RUNS", "Loaded", "ReportDocument", "compare_fleet", "compare_profiles", "history",
           "is_database", "label_of", "live", "load", "read_plan", "validated"]
