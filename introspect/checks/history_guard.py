"""The history database as ``health`` uses it: nothing that happens to it costs the run.

A run's results are worth more than its row in the history. :class:`GuardedHistory`
wraps :class:`~introspect.checks.history.HistoryStore` so that every database failure
becomes a warning (:attr:`GuardedHistory.notes`) instead of an exception:

- locked by another process: SQLite's busy timeout, then a few retries with a short
  backoff (an ``SQLITE_BUSY`` on upgrading a WAL read transaction returns at once,
  without the busy handler: https://sqlite.org/wal.html#sometimes_queries_return_sqlite_busy_in_wal_mode),
  then "history not recorded";
- damaged (``PRAGMA quick_check`` fails: every run while the file is small, daily once it
  is large; or SQLite says malformed / not a database on any page a run touches): moved
  aside to ``<db>.damaged-<timestamp>`` and a new one started;
- full, read-only, newer schema, unopenable: "history not recorded", with the cause
  and its fix; drift still read from the old runs when the file can be read.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from introspect.checks.history import HistoryStore, Snapshot
from introspect.checks.history_db import DbFault, describe, move_aside
from introspect.checks.result import CheckResult

BUSY_TIMEOUT_S = 2.5
RETRY_DELAYS_S = (0.5, 1.0, 2.0)
Errors = (OSError, sqlite3.Error)


@dataclass(frozen=True)
class HistoryNote:
    """One warning about the history database: its text and a paste-able fix."""

    text: str
    fix: str | None = None


class GuardedHistory:
    """Open with :meth:`open`; then :meth:`previous_snapshot`, :meth:`record_run` and
    :meth:`prune` never raise a database error."""

    def __init__(self, path: Path, *, busy_timeout: float = BUSY_TIMEOUT_S,
                 delays: Sequence[float] = RETRY_DELAYS_S, sleep: Callable[[float], None] = time.sleep) -> None:
        self.path = path
        self.notes: list[HistoryNote] = []
        self.run_id: int | None = None
        self._busy_timeout = busy_timeout
        self._delays = tuple(delays)
        self._sleep = sleep
        self._store: HistoryStore | None = None
        self._writable = False
        self._read_fault: DbFault | None = None
        self._replaced = False

    # ------------------------------------------------------------------ open

    def open(self) -> GuardedHistory:
        """Open for writing (moving a damaged file aside); else, for drift, read-only."""
        try:
            self._open_writer()
        except Errors as exc:
            fault = describe(exc, self.path)
            if fault.kind == "damaged":
                self._replace(fault)
                return self
            self._open_reader(fault)
        return self

    def _open_writer(self) -> None:
        self.close()
        store = HistoryStore(self.path, timeout=self._busy_timeout)
        try:
            problem = store.damage_check()
        except BaseException:
            store.close()
            raise
        if problem is not None:
            store.close()
            raise sqlite3.DatabaseError(f"database disk image is malformed: quick_check: {problem}")
        self._store, self._writable = store, True

    def _open_reader(self, fault: DbFault) -> None:
        """Drift can still come from a file that cannot be written (read-only, full, locked)."""
        if self.path.is_file():
            try:
                self._store = HistoryStore(self.path, read_only=True)
                readable = self._store.has_runs_table()
            except Errors:
                readable = False
            if not readable:
                self.close()
        if self._store is None:
            self._read_fault = fault

    def _replace(self, fault: DbFault) -> None:
        """Move the damaged file aside and start a new one (once per run)."""
        self.close()
        self._replaced = True
        try:
            aside = move_aside(self.path)
        except OSError as exc:
            self._read_fault = describe(exc, self.path)
            return
        self.notes.append(HistoryNote(
            f"the history database {self.path} was damaged ({fault.detail}); "
            f"moved it aside to {aside} and started a new one (drift restarts from this run)",
            f"sqlite3 {_quote(aside)} .recover | sqlite3 {_quote(self.path)}.recovered  # salvage old runs, "
            "or delete it"))
        try:
            self._open_writer()
        except Errors as exc:
            self._read_fault = describe(exc, self.path)

    # ------------------------------------------------------------- read, write

    def previous_snapshot(self, host: str, venv: str) -> Snapshot | None:
        if self._store is None or self._read_fault is not None:
            return None
        try:
            return self._store.previous_snapshot(host, venv)
        except Errors as exc:  # stop reading: one failure per host would cost a busy timeout each
            self._read_fault = describe(exc, self.path)
            self.notes.append(HistoryNote(f"drift not computed: {self._read_fault.cause}", self._read_fault.fix))
            return None

    def record_run(self, *, argv: Sequence[str], started_at: float, finished_at: float | None,
                   results: Iterable[tuple[str, str | None, CheckResult]],
                   snapshots: Iterable[Snapshot] = ()) -> int | None:
        """Store the run; None (and a note) when it could not be, after retrying a busy lock."""
        rows, snaps = list(results), list(snapshots)
        for delay in (*self._delays, None):
            try:
                if self._store is None or not self._writable:
                    self._open_writer()
                assert self._store is not None
                self.run_id = self._store.record_run(argv=argv, started_at=started_at, finished_at=finished_at,
                                                     results=rows, snapshots=snaps)
                return self.run_id
            except Errors as exc:
                fault = describe(exc, self.path)
            if fault.kind == "damaged" and not self._replaced:
                self._replace(fault)
                continue
            if fault.kind != "busy" or delay is None:
                break
            self._sleep(delay)
        self.notes.append(HistoryNote(f"history not recorded: {fault.cause}", fault.fix))
        return None

    def prune(self, keep_days: float) -> None:
        if self._store is None or self.run_id is None:
            return  # nothing was recorded: leave the old runs for a run that is
        try:
            self._store.prune(keep_days)
        except Errors as exc:
            fault = describe(exc, self.path)
            self.notes.append(HistoryNote(f"old runs not pruned: {fault.cause}", fault.fix))

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
        self._store, self._writable = None, False

    def __enter__(self) -> GuardedHistory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def summary(self) -> dict[str, object]:
        """The ``history`` member of a health document."""
        return {"db": str(self.path), "recorded": self.run_id is not None, "run_id": self.run_id,
                "warnings": [{"message": n.text, "fix": n.fix} for n in self.notes]}


def _quote(path: Path) -> str:
    import shlex

    return shlex.quote(str(path))


__all__ = ["BUSY_TIMEOUT_S", "GuardedHistory", "HistoryNote", "RETRY_DELAYS_S"]
