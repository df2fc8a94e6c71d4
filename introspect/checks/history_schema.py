"""The history database's tables, the step from the first layout to this one, and its upkeep.

Version 2 keeps each distinct snapshot body (a venv's package set, its tokenizer verdicts)
once, in ``blobs``, named by its SHA-256; a snapshot row points at its bodies. Measured on a
simulated 1,000-host fleet (``scripts/fleet_sim``): version 1 stored every venv's 2 kB package
list in every run's snapshot row, 3.7 kB on disk each; 57 runs filled 210 MB of a 301 MB file
with 27 distinct lists. The results table is as it was.

Readers see either layout through one temporary view, ``snapshot_rows``: a version-1 file that
cannot be written (read-only file system, immutable) is read as it is, and the first writer
migrates it once, in one transaction.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable

SCHEMA_VERSION = 2

_RUNS_AND_RESULTS = """
CREATE TABLE IF NOT EXISTS runs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at  REAL NOT NULL,            -- unix seconds, UTC
    finished_at REAL,
    argv        TEXT NOT NULL             -- JSON list
);
CREATE TABLE IF NOT EXISTS results (
    run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    host          TEXT NOT NULL,
    venv          TEXT NOT NULL,          -- '' for host-level checks
    "check"       TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('pass', 'fail', 'warn', 'info')),
    message       TEXT NOT NULL,
    evidence_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS results_by_run_host ON results (run_id, host)
"""

# No foreign key from snapshots to blobs: deleting a blob would then scan every snapshot for
# each one (no index on the ids); :func:`sweep_blobs` removes the unreferenced ones in one pass.
_SNAPSHOTS = """
CREATE TABLE IF NOT EXISTS blobs (
    id     INTEGER PRIMARY KEY,
    digest BLOB NOT NULL UNIQUE,          -- sha256 of text
    text   TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS {table} (
    run_id          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    host            TEXT NOT NULL,
    venv            TEXT NOT NULL,
    reachable       INTEGER NOT NULL,
    packages_id     INTEGER,              -- blobs.id of the packages JSON; NULL: unknown this run
    tokenizer_ok_id INTEGER,              -- blobs.id of the tokenizer verdicts JSON
    PRIMARY KEY (run_id, host, venv)
);
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
)
"""
_SNAPSHOTS_INDEX = "CREATE INDEX IF NOT EXISTS snapshots_by_target ON snapshots (host, venv, run_id)"

_VIEW_V1 = """CREATE TEMP VIEW IF NOT EXISTS snapshot_rows AS
    SELECT run_id, host, venv, reachable, packages_json, tokenizer_ok_json FROM main.snapshots"""
_VIEW_V2 = """CREATE TEMP VIEW IF NOT EXISTS snapshot_rows AS
    SELECT s.run_id, s.host, s.venv, s.reachable, p.text AS packages_json, t.text AS tokenizer_ok_json
    FROM main.snapshots s LEFT JOIN main.blobs p ON p.id = s.packages_id LEFT JOIN main.blobs t ON t.id = s.tokenizer_ok_id"""

# Give pages back to the file system only when a quarter of the file is free: SQLite reuses
# free pages for the next runs' rows, so a history pruned on every run stays the same size
# without rewriting the whole file (VACUUM) each time.
RECLAIM_FRACTION = 0.25


def digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";\n") if s.strip()]


def create(conn: sqlite3.Connection) -> None:
    """The tables of a new database, in the caller's transaction."""
    for statement in _statements(_RUNS_AND_RESULTS) + _statements(_SNAPSHOTS.format(table="snapshots")):
        conn.execute(statement)
    conn.execute(_SNAPSHOTS_INDEX)


def migrate_v1(conn: sqlite3.Connection) -> None:
    """Version 1's snapshots, their bodies moved into ``blobs``, in the caller's transaction."""
    conn.create_function("introspect_digest", 1, lambda text: None if text is None else digest(text),
                         deterministic=True)
    conn.execute("DROP INDEX IF EXISTS snapshots_by_target")
    for statement in _statements(_SNAPSHOTS.format(table="snapshots_v2")):
        conn.execute(statement)
    for column in ("packages_json", "tokenizer_ok_json"):
        conn.execute(f"INSERT OR IGNORE INTO blobs (digest, text) SELECT introspect_digest({column}), {column} "
                     f"FROM snapshots WHERE {column} IS NOT NULL")
    conn.execute("""INSERT INTO snapshots_v2 SELECT s.run_id, s.host, s.venv, s.reachable,
            (SELECT id FROM blobs WHERE digest = introspect_digest(s.packages_json)),
            (SELECT id FROM blobs WHERE digest = introspect_digest(s.tokenizer_ok_json)) FROM snapshots s""")
    conn.execute("DROP TABLE snapshots")
    conn.execute("ALTER TABLE snapshots_v2 RENAME TO snapshots")
    conn.execute(_SNAPSHOTS_INDEX)


def create_view(conn: sqlite3.Connection, version: int) -> None:
    """``temp.snapshot_rows``: every snapshot with its bodies' JSON text, in either layout."""
    conn.execute("DROP VIEW IF EXISTS temp.snapshot_rows")
    conn.execute(_VIEW_V1 if version == 1 else _VIEW_V2)


def blob_ids(conn: sqlite3.Connection, texts: Iterable[str]) -> dict[str, int]:
    """The blob id of each text, storing the ones not stored yet (in the caller's transaction)."""
    by_digest = {digest(text): text for text in set(texts)}
    conn.executemany("INSERT OR IGNORE INTO blobs (digest, text) VALUES (?, ?)", by_digest.items())
    ids: dict[str, int] = {}
    for key, text in by_digest.items():
        ids[text] = int(conn.execute("SELECT id FROM blobs WHERE digest = ?", (key,)).fetchone()[0])
    return ids


def sweep_blobs(conn: sqlite3.Connection) -> int:
    """Delete the blobs no snapshot points at any more (after runs were pruned); how many."""
    cur = conn.execute("""DELETE FROM blobs WHERE id NOT IN (
        SELECT packages_id FROM snapshots WHERE packages_id IS NOT NULL
        UNION SELECT tokenizer_ok_id FROM snapshots WHERE tokenizer_ok_id IS NOT NULL)""")
    return cur.rowcount or 0


def reclaim(conn: sqlite3.Connection) -> bool:
    """VACUUM when at least :data:`RECLAIM_FRACTION` of the file's pages are free; True if it did."""
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    if not pages or free < pages * RECLAIM_FRACTION:
        return False
    try:
        conn.execute("VACUUM")  # needs room for a copy of the file, and no other reader
    except sqlite3.OperationalError:
        return False  # full or busy: the free pages are reused by the next runs all the same
    return True


__all__ = ["RECLAIM_FRACTION", "SCHEMA_VERSION", "blob_ids", "create", "create_view", "digest", "migrate_v1",
           "reclaim", "sweep_blobs"]
