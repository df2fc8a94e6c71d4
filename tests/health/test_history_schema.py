"""The history database's layout: snapshot bodies stored once, the first layout migrated, pruned
space reused or given back, and the full damage check bounded on a large file."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from introspect.checks import history as history_module
from introspect.checks.health import CheckResult
from introspect.checks.history import HistoryStore, Snapshot

# Version 1 as introspect wrote it up to commit ff4740a (introspect/checks/history.py, _SCHEMA), the
# same tables, columns and indexes.
V1_SCHEMA = """
CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, started_at REAL NOT NULL, finished_at REAL,
                   argv TEXT NOT NULL);
CREATE TABLE results (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, host TEXT NOT NULL,
                      venv TEXT NOT NULL, "check" TEXT NOT NULL,
                      status TEXT NOT NULL CHECK (status IN ('pass', 'fail', 'warn', 'info')),
                      message TEXT NOT NULL, evidence_json TEXT NOT NULL);
CREATE INDEX results_by_run_host ON results (run_id, host);
CREATE TABLE snapshots (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, host TEXT NOT NULL,
                        venv TEXT NOT NULL, reachable INTEGER NOT NULL, packages_json TEXT, tokenizer_ok_json TEXT,
                        PRIMARY KEY (run_id, host, venv));
CREATE INDEX snapshots_by_target ON snapshots (host, venv, run_id);
PRAGMA user_version = 1;
"""
VENV = "/opt/venvs/serve"
OLD = {"torch": "2.7.1", "transformers": "4.57.1"}
NEW = {"torch": "2.8.0", "transformers": "4.57.1"}


def v1_database(path: Path) -> None:
    """Three runs of hosts a and b; b is down in run 3 (packages unknown), a is upgraded in run 3."""
    conn = sqlite3.connect(path)
    conn.executescript(V1_SCHEMA)
    for run in (1, 2, 3):
        conn.execute("INSERT INTO runs VALUES (?, ?, ?, ?)", (run, run * 100.0, run * 100.0 + 5, '["health"]'))
        conn.execute("INSERT INTO results VALUES (?, 'a', '', 'reachable', 'pass', 'ok', '{}')", (run,))
        for host in ("a", "b"):
            down = host == "b" and run == 3
            packages = None if down else json.dumps(NEW if host == "a" and run == 3 else OLD, sort_keys=True)
            tokenizers = None if down else json.dumps({"/m": True})
            conn.execute("INSERT INTO snapshots VALUES (?, ?, ?, ?, ?, ?)",
                         (run, host, VENV, int(not down), packages, tokenizers))
    conn.commit()
    conn.close()


def count(path: Path, table: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()


def test_snapshot_bodies_are_stored_once(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    with HistoryStore(path) as store:
        for run in range(5):
            store.record_run(argv=["health"], started_at=run, finished_at=run + 1, results=[], snapshots=[
                Snapshot(host, VENV, True, dict(OLD), {"/m": True}) for host in ("a", "b", "c")])
        snap = store.previous_snapshot("b", VENV)
    assert snap is not None and snap.packages == OLD and snap.tokenizer_ok == {"/m": True} and snap.run_id == 5
    assert count(path, "snapshots") == 15
    assert count(path, "blobs") == 2  # one package set, one set of tokenizer verdicts


def test_a_version_1_file_is_read_as_it_is_and_migrated_by_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    v1_database(path)
    before = path.read_bytes()
    with HistoryStore(path, read_only=True) as reader:
        assert reader.version == 1
        old_b = reader.previous_snapshot("b", VENV)
        old_a2 = reader.previous_snapshot("a", VENV, before_run=3)
    assert path.read_bytes() == before  # reading changed nothing
    # b was down in run 3: its packages and tokenizers carried forward from run 2
    assert old_b == Snapshot("b", VENV, False, OLD, {"/m": True}, 3)
    assert old_a2 == Snapshot("a", VENV, True, OLD, {"/m": True}, 2)
    with HistoryStore(path) as writer:
        assert writer.version == 2
        assert writer.previous_snapshot("b", VENV) == old_b
        assert writer.previous_snapshot("a", VENV, before_run=3) == old_a2
        assert writer.previous_snapshot("a", VENV) == Snapshot("a", VENV, True, NEW, {"/m": True}, 3)
        assert [r.id for r in writer.runs()] == [3, 2, 1]
        assert writer.quick_check() is None
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
    cols = [row[1] for row in conn.execute("PRAGMA table_info(snapshots)")]
    assert cols == ["run_id", "host", "venv", "reachable", "packages_id", "tokenizer_ok_id"]
    assert conn.execute("SELECT count(*) FROM blobs").fetchone()[0] == 3  # OLD, NEW, one verdict set
    conn.close()


def test_prune_drops_unreferenced_bodies_and_reuses_pages(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    with HistoryStore(path) as store:
        for run in range(40):  # each run its own package set: 40 bodies
            store.record_run(argv=["health"], started_at=run * 86400.0, finished_at=run * 86400.0 + 1, results=[
                ("a", VENV, CheckResult("reachable", "pass", "ok " * 200))], snapshots=[
                Snapshot("a", VENV, True, {"torch": f"2.{run}.0", "pad": "x" * 3000})])
        assert count(path, "blobs") == 40
        assert store.prune(keep_days=35, now=40 * 86400.0) == 5  # a tenth: pages kept for the next runs
        assert count(path, "blobs") == 35
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA freelist_count").fetchone()[0] > 0  # not vacuumed
        conn.close()
        assert store.prune(keep_days=1, now=40 * 86400.0) == 34  # most of the file: given back
        assert count(path, "blobs") == 1
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA freelist_count").fetchone()[0] == 0  # vacuumed
        conn.close()
        assert store.previous_snapshot("a", VENV) == Snapshot("a", VENV, True, {"torch": "2.39.0", "pad": "x" * 3000},
                                                              None, 40)


def damage_last_page(path: Path) -> None:
    """Overwrite the file's last page (a leaf of the results): opening the store never reads it."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size, pages = (conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_size", "page_count"))
    conn.close()
    with open(path, "r+b") as fh:
        fh.seek((pages - 1) * page_size)
        fh.write(b"\xa5" * page_size)


def test_a_large_file_is_checked_in_full_once_a_day(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "h.sqlite3"
    with HistoryStore(path) as store:
        assert store.damage_check(now=1000.0) is None  # small: read in full, and found clean
        store.record_run(argv=["health"], started_at=1, finished_at=2, snapshots=[], results=[
            (f"h{i}", None, CheckResult("reachable", "pass", "ok " * 40)) for i in range(2000)])
    monkeypatch.setattr(history_module, "FULL_CHECK_BYTES", 4096)  # now "large"
    damage_last_page(path)
    with HistoryStore(path) as store:
        assert store.quick_check() is not None  # the damage is there
        assert store.damage_check(now=1000.0 + 3600) is None  # checked clean an hour ago: not read
        problem = store.damage_check(now=1000.0 + 86400 + 1)  # a day later: read in full
    assert problem is not None and os.path.getsize(path) > 4096


def test_a_file_migrated_by_another_run_meanwhile_is_left_as_it_is(tmp_path: Path) -> None:
    """Two runs open a version-1 file at once (a cron job and a manual one): both read version 1,
    one migrates under the write lock, the other must then find version 2 and change nothing."""
    path = tmp_path / "h.sqlite3"
    v1_database(path)
    late = HistoryStore(path, read_only=True)  # read version 1 before the other run migrated
    assert late.version == 1
    HistoryStore(path).close()  # the other run migrates
    late.close()
    writer = HistoryStore.__new__(HistoryStore)  # the late run's upgrade step, on its own connection
    writer._conn = sqlite3.connect(path)
    writer._upgrade(1)
    writer._conn.close()
    with HistoryStore(path) as store:
        assert store.version == 2 and [r.id for r in store.runs()] == [3, 2, 1]
        assert store.previous_snapshot("a", VENV) == Snapshot("a", VENV, True, NEW, {"/m": True}, 3)


def test_space_not_given_back_is_no_failure(tmp_path: Path) -> None:
    """VACUUM needs room for a copy of the file; when it cannot run (a full disk, a lock), the
    pruned pages stay free for the next runs and nothing fails."""
    from introspect.checks.history_schema import reclaim

    path = tmp_path / "h.sqlite3"
    with HistoryStore(path) as store:
        for run in range(8):
            store.record_run(argv=["health"], started_at=run * 86400.0, finished_at=run * 86400.0 + 1, results=[],
                             snapshots=[Snapshot("a", VENV, True, {"pad": "x" * 5000, "run": str(run)})])
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM snapshots")  # most of the file's pages free
    conn.execute("DELETE FROM blobs")
    conn.commit()

    class FullDisk:  # SQLite's answer to VACUUM on a full file system
        def execute(self, sql: str) -> sqlite3.Cursor:
            if sql == "VACUUM":
                raise sqlite3.OperationalError("database or disk is full")
            return conn.execute(sql)

    assert reclaim(FullDisk()) is False  # type: ignore[arg-type]
    assert reclaim(conn) is True and conn.execute("PRAGMA freelist_count").fetchone()[0] == 0
    conn.close()
