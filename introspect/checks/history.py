"""Run history of `introspect health` in SQLite, and drift between runs.

Each run stores its check results and, per host and venv, a *snapshot*: was the host
reachable, which packages at which versions, which tokenizers AutoTokenizer loaded. The
next run compares its snapshot with the previous one (:func:`drift`, in
:mod:`.history_drift`) and reports what changed as findings: a package silently removed
or downgraded, a host newly down, a tokenizer that stopped loading or loads again.

Standard-library ``sqlite3``: one file, no server, safe for a cron job and a manual
run overlapping (WAL journal, busy timeout, one transaction per run).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from introspect.checks import history_schema as schema
from introspect.checks.history_db import NewerSchema, connect_read_only, create_private, quick_check
from introspect.checks.history_drift import drift, tokenizer_verdicts
from introspect.checks.packages import canonical_name
from introspect.checks.result import CheckResult
from introspect.redact import scrub_document, scrub_fields

SCHEMA_VERSION = schema.SCHEMA_VERSION
# A file up to this size is checked in full (PRAGMA quick_check reads every page: ~4.5 ms per MB
# measured here) by every writer; a larger one at most once per FULL_CHECK_EVERY_S.
FULL_CHECK_BYTES = 16 * 2**20
FULL_CHECK_EVERY_S = 24 * 3600


@dataclass(frozen=True)
class Snapshot:
    host: str
    venv: str
    reachable: bool
    packages: dict[str, str] | None = None  # normalized name -> version; None: unknown
    # model dir -> AutoTokenizer loaded it (a native-library fallback load is False); the
    # column is the same as before, so databases of earlier runs are read as they are.
    tokenizer_ok: dict[str, bool] | None = None
    run_id: int | None = None


@dataclass(frozen=True)
class RunSummary:
    id: int
    started_at: float
    finished_at: float | None
    argv: list[str]
    hosts: int
    passed: int
    failed: int
    warned: int
    info: int


@dataclass(frozen=True)
class StoredResult:
    run_id: int
    host: str
    venv: str
    result: CheckResult


def snapshot_from(
    host: str,
    venv: str,
    facts: Mapping[str, Any] | None,
    reach_error: str | None,
    tokenizer_results: Mapping[str, Mapping[str, Any]] | None = None,
) -> Snapshot:
    """The snapshot of one (host, venv) from the same inputs the checks get."""
    packages = None
    if reach_error is None and facts and isinstance(facts.get("distributions"), Mapping):
        packages = {
            canonical_name(name): str(info.get("version"))
            for name, info in facts["distributions"].items()
            if isinstance(info, Mapping)
        }
    tokenizer_ok = None
    if reach_error is None and tokenizer_results is not None:
        tokenizer_ok = tokenizer_verdicts(tokenizer_results)
    return Snapshot(host, venv, reach_error is None, packages, tokenizer_ok)


def default_path() -> Path:
    from introspect.userconfig import user_dir  # a run with --db never needs platformdirs

    return user_dir("state") / "history.sqlite3"


class HistoryStore:
    """The history database; ``path=None`` uses the user's state directory.

    ``read_only`` never writes, not even the schema (``introspect history`` on a read-only
    file system or an immutable file); a writer creates the file 0600 first.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, read_only: bool = False,
                 timeout: float = 30.0) -> None:
        self.path = Path(path) if path is not None else default_path()
        self.version = 0
        self._checked_clean: float | None = None  # when damage_check last read the whole file clean
        created = False
        if read_only:
            self._conn = connect_read_only(self.path)
        else:
            created = create_private(self.path)
            self._conn = sqlite3.connect(self.path, timeout=timeout)
        self._conn.row_factory = sqlite3.Row
        try:
            self._setup(read_only)
        except BaseException:
            self._conn.close()
            if created and self.path.stat().st_size == 0:  # a full disk must not leave an empty file
                self.path.unlink()
            raise

    def _setup(self, read_only: bool) -> None:
        self._conn.execute("PRAGMA foreign_keys = ON")
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise NewerSchema(f"{self.path} has schema version {version}, newer than this introspect "
                              f"({SCHEMA_VERSION})")
        if not read_only:
            # WAL lets `introspect history` read while a scheduled run writes. Set only when it
            # is not already: changing the journal mode needs the lock another run may hold.
            if self._conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                self._conn.execute("PRAGMA journal_mode = WAL")
            if version < SCHEMA_VERSION:  # an existing database is only read until a run is recorded
                self._upgrade(version)
                version = SCHEMA_VERSION
        self.version = version
        if version:
            schema.create_view(self._conn, version)

    def _upgrade(self, version: int) -> None:
        """Create the tables, or migrate version 1's, in one transaction (explicit: Python's
        sqlite3 opens none before DDL statements). The version is read again under the write
        lock: another run (a cron job and a manual one) may have upgraded the file meanwhile."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 1:
                schema.migrate_v1(self._conn)
            elif version < 1:
                schema.create(self._conn)
            if version < SCHEMA_VERSION:
                self._conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except BaseException:
            self._conn.rollback()
            raise
        self._conn.commit()
        if version == 1:
            schema.reclaim(self._conn)  # the old snapshot rows' pages, once

    def has_runs_table(self) -> bool:
        """False for a file no run was ever recorded in (created empty, never set up)."""
        row = self._conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs'").fetchone()
        return row is not None

    def quick_check(self) -> str | None:
        """None when SQLite's ``PRAGMA quick_check`` finds the file sound, else its first complaint."""
        return quick_check(self._conn)

    def damage_check(self, now: float | None = None) -> str | None:
        """:meth:`quick_check` when the file is small or its last clean full check is older than
        :data:`FULL_CHECK_EVERY_S` (kept in the file by :meth:`record_run`); else None unread:
        damage on the pages a run reads or writes still surfaces as SQLite's own error."""
        now = time.time() if now is None else now
        if self.path.stat().st_size > FULL_CHECK_BYTES and now - self._checked_at() < FULL_CHECK_EVERY_S:
            return None
        problem = self.quick_check()
        self._checked_clean = now if problem is None else None
        return problem

    def _checked_at(self) -> float:
        if self.version < 2:
            return 0.0
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'checked_at'").fetchone()
        try:
            return float(row[0]) if row else 0.0
        except ValueError:
            return 0.0

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def record_run(
        self,
        *,
        argv: Sequence[str],
        started_at: float,
        finished_at: float | None,
        results: Iterable[tuple[str, str | None, CheckResult]],
        snapshots: Iterable[Snapshot] = (),
    ) -> int:
        """Store one run atomically: ``results`` as (host, venv or None, result). Returns the run id."""
        argv, results = scrub_document(list(argv)), [(h, v, scrub_fields(r)) for h, v, r in results]
        with self._conn:
            cur = self._conn.execute(
                "INSERT INTO runs (started_at, finished_at, argv) VALUES (?, ?, ?)",
                (started_at, finished_at, json.dumps(list(argv))),
            )
            run_id = int(cur.lastrowid or 0)
            self._conn.executemany(
                'INSERT INTO results (run_id, host, venv, "check", status, message, evidence_json) '
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (run_id, host, venv or "", r.check, r.status, r.message,
                     json.dumps(_with_fix(r), sort_keys=True, default=str))
                    for host, venv, r in results
                ],
            )
            self._insert_snapshots(run_id, list(snapshots))
            if self._checked_clean is not None:
                self._conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('checked_at', ?)",
                                   (repr(self._checked_clean),))
        return run_id

    def _insert_snapshots(self, run_id: int, snapshots: list[Snapshot]) -> None:
        def text(value: Mapping[str, Any] | None) -> str | None:
            return None if value is None else json.dumps(value, sort_keys=True)

        bodies = [(text(s.packages), text(s.tokenizer_ok)) for s in snapshots]
        ids = schema.blob_ids(self._conn, [t for pair in bodies for t in pair if t is not None])
        self._conn.executemany(
            "INSERT OR REPLACE INTO snapshots (run_id, host, venv, reachable, packages_id, tokenizer_ok_id) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [(run_id, s.host, s.venv, int(s.reachable), None if p is None else ids[p], None if t is None else ids[t])
             for s, (p, t) in zip(snapshots, bodies, strict=True)])

    def previous_snapshot(self, host: str, venv: str, before_run: int | None = None) -> Snapshot | None:
        """The latest snapshot of (host, venv), before ``before_run`` if given.

        ``reachable`` is that run's; when it knew no packages or tokenizers (host down),
        they are carried forward from the latest run that did, so a host that comes back
        is compared with its last known state, not with nothing.
        """
        bound = before_run if before_run is not None else -1
        base = "SELECT * FROM temp.snapshot_rows WHERE host = ? AND venv = ? AND (? < 0 OR run_id < ?)"
        args = (host, venv, bound, bound)
        row = self._conn.execute(base + " ORDER BY run_id DESC LIMIT 1", args).fetchone()
        if row is None:
            return None
        packages, tokenizers = _loads(row["packages_json"]), _loads(row["tokenizer_ok_json"])
        if packages is None:
            known = self._conn.execute(
                base + " AND packages_json IS NOT NULL ORDER BY run_id DESC LIMIT 1", args).fetchone()
            packages = _loads(known["packages_json"]) if known else None
        if tokenizers is None:
            known = self._conn.execute(
                base + " AND tokenizer_ok_json IS NOT NULL ORDER BY run_id DESC LIMIT 1", args).fetchone()
            tokenizers = _loads(known["tokenizer_ok_json"]) if known else None
        return Snapshot(host, venv, bool(row["reachable"]), packages, tokenizers, row["run_id"])

    def runs(self, host: str | None = None, limit: int = 20) -> list[RunSummary]:
        """Latest runs first; with ``host``, only runs that checked it, counted for it alone."""
        host_filter = "AND res.host = ?" if host is not None else ""
        where = "WHERE EXISTS (SELECT 1 FROM results x WHERE x.run_id = r.id AND x.host = ?)" if host is not None else ""
        sql = f"""
            SELECT r.id, r.started_at, r.finished_at, r.argv,
                   COUNT(DISTINCT res.host) AS hosts,
                   COALESCE(SUM(res.status = 'pass'), 0) AS passed,
                   COALESCE(SUM(res.status = 'fail'), 0) AS failed,
                   COALESCE(SUM(res.status = 'warn'), 0) AS warned,
                   COALESCE(SUM(res.status = 'info'), 0) AS info
            FROM runs r LEFT JOIN results res ON res.run_id = r.id {host_filter}
            {where}
            GROUP BY r.id ORDER BY r.id DESC LIMIT ?"""
        params: list[Any] = ([host, host] if host is not None else []) + [int(limit)]
        return [
            RunSummary(row["id"], row["started_at"], row["finished_at"], json.loads(row["argv"]),
                       row["hosts"], row["passed"], row["failed"], row["warned"], row["info"])
            for row in self._conn.execute(sql, params)
        ]

    def prune(self, keep_days: float, now: float | None = None) -> int:
        """Delete the runs started more than ``keep_days`` days ago (their results and snapshots
        go with them); the latest run is always kept, so the next run still has a baseline to
        report drift against. Returns how many runs were deleted."""
        cutoff = (time.time() if now is None else now) - keep_days * 86400
        with self._conn:
            cur = self._conn.execute(
                "DELETE FROM runs WHERE started_at < ? AND id <> (SELECT MAX(id) FROM runs)", (cutoff,))
            deleted = cur.rowcount or 0
            if deleted:
                schema.sweep_blobs(self._conn)
        if deleted:
            schema.reclaim(self._conn)  # give the space back when much of the file is free
        return deleted

    def run_results(self, run_id: int, host: str | None = None) -> list[StoredResult]:
        sql = 'SELECT run_id, host, venv, "check", status, message, evidence_json FROM results WHERE run_id = ?'
        params: list[Any] = [run_id]
        if host is not None:
            sql += " AND host = ?"
            params.append(host)
        out = []
        for row in self._conn.execute(sql + " ORDER BY rowid", params):
            evidence = json.loads(row["evidence_json"])
            fix = evidence.pop("_fix", None)
            out.append(StoredResult(row["run_id"], row["host"], row["venv"],
                                    CheckResult(row["check"], row["status"], row["message"], fix, evidence)))
        return out


def _with_fix(r: CheckResult) -> dict[str, Any]:
    # The results table has no fix column; keep the fix inside the evidence JSON.
    evidence = dict(r.evidence)
    if r.fix:
        evidence["_fix"] = r.fix
    return evidence


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


__all__ = [
    "HistoryStore",
    "RunSummary",
    "Snapshot",
    "StoredResult",
    "default_path",
    "drift",
    "snapshot_from",
]
