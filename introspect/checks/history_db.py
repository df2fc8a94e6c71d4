"""The history database's file: created private, opened read-only, named when it fails.

What can happen to a SQLite file under a cron job, and what each is called here
(:func:`describe`): another process holds the write lock (``busy``), the file system
is full (``full``) or read-only (``read-only``), the file is damaged or not a
database at all (``damaged``), a newer introspect wrote it (``newer``), or the path
cannot be opened (``cannot-open``). Each comes with the one line naming the cause and
a paste-able command as its fix; :mod:`introspect.checks.history_guard` decides what
a ``health`` run does about it.
"""

from __future__ import annotations

import errno
import os
import shlex
import shutil
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

# The files SQLite keeps next to the database (WAL mode, or a rollback journal).
SIDECARS = ("-wal", "-shm", "-journal")
# Below this much free space a write error is the full disk, whatever SQLite called it
# (a full tmpfs can surface as SQLITE_IOERR from the WAL or the shared-memory file).
NEARLY_FULL_BYTES = 64 * 1024


class NewerSchema(sqlite3.DatabaseError):
    """The database was written by a newer introspect (its ``user_version`` is higher)."""


@dataclass(frozen=True)
class DbFault:
    kind: str  # busy, full, read-only, damaged, newer, cannot-open, io
    cause: str  # one line naming the real cause
    fix: str  # a paste-able command; prose only as a trailing # comment
    detail: str = ""  # what SQLite or the OS said


def create_private(path: Path) -> bool:
    """Create ``path`` empty with mode 0600 unless it exists; True when it was created here.

    SQLite creates a missing database with 0644 & ~umask, and gives its -wal/-shm/-journal
    files the database's own mode (``robust_open``/``findCreateFileMode`` in os_unix.c,
    https://sqlite.org/src/file/src/os_unix.c), so one private file keeps all of them private.
    """
    # The history names hosts, paths and the package sets of the fleet.
    from introspect.userconfig import make_private_dirs

    make_private_dirs(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def connect_read_only(path: Path) -> sqlite3.Connection:
    """A connection that never writes: ``mode=ro``; on a read-only file system where the WAL's
    -shm cannot be created either, ``immutable=1`` (https://sqlite.org/uri.html)."""
    uri = "file:" + quote(str(path.absolute()), safe="/") + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError:
        conn.close()
    # Immutable skips locking and the WAL: right for a file nothing can write to anyway.
    conn = sqlite3.connect(uri + "&immutable=1", uri=True)
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return conn


def quick_check(conn: sqlite3.Connection) -> str | None:
    """None when ``PRAGMA quick_check`` finds the file sound, else its first complaint, on one
    line (its report starts with "*** in database main ***" and a newline)."""
    rows = conn.execute("PRAGMA quick_check(1)").fetchall()
    first = str(rows[0][0]) if rows else "no answer"
    return None if first == "ok" else " ".join(first.replace("*** in database main ***", "").split())


def move_aside(path: Path) -> Path:
    """Rename a damaged database (and its sidecars, so the new file never replays the old
    WAL) to ``<name>.damaged-<timestamp>``; returns the new path of the database."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    aside = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    os.replace(path, aside)
    for suffix in SIDECARS:
        side = Path(f"{path}{suffix}")
        if side.exists():
            os.replace(side, Path(f"{aside}{suffix}"))
    return aside


_SQLITE_KINDS = (
    # (kind, SQLite result-code names, message fragments for Pythons without sqlite_errorname)
    ("busy", ("SQLITE_BUSY", "SQLITE_LOCKED"), ("database is locked", "database table is locked")),
    ("damaged", ("SQLITE_CORRUPT", "SQLITE_NOTADB"), ("malformed", "not a database")),
    ("full", ("SQLITE_FULL",), ("database or disk is full",)),
    ("read-only", ("SQLITE_READONLY", "SQLITE_PERM", "SQLITE_AUTH"), ("readonly database", "read-only")),
    ("cannot-open", ("SQLITE_CANTOPEN",), ("unable to open database",)),
)
_ERRNO_KINDS = {errno.ENOSPC: "full", errno.EDQUOT: "full", errno.EROFS: "read-only", errno.EACCES: "read-only",
                errno.EPERM: "read-only"}


def fault_kind(exc: BaseException) -> str:
    """``exc``'s kind (see the module docstring); ``io`` when nothing more precise fits."""
    if isinstance(exc, NewerSchema):
        return "newer"
    if isinstance(exc, OSError):
        return _ERRNO_KINDS.get(exc.errno or 0, "cannot-open")
    name = str(getattr(exc, "sqlite_errorname", "") or "")  # Python >= 3.11
    text = str(exc).lower()
    for kind, names, fragments in _SQLITE_KINDS:
        if any(name.startswith(n) for n in names) or any(f in text for f in fragments):
            return kind
    return "io"


def describe(exc: BaseException, path: Path) -> DbFault:
    """The fault behind ``exc`` met on the database at ``path``: its kind, cause and fix."""
    kind, detail = fault_kind(exc), _detail(exc)
    if kind in ("io", "cannot-open", "read-only", "full"):
        kind, detail = _refine(kind, detail, path.parent)
    return _fault(kind, detail, path)


def _fault(kind: str, detail: str, path: Path) -> DbFault:
    db, folder = shlex.quote(str(path)), shlex.quote(str(path.parent))
    if kind == "busy":
        return DbFault(kind, f"another process holds the lock on {path} ({detail}; another introspect run, "
                             "a `history prune`, a sqlite3 shell?)",
                       f"fuser -v {db} {shlex.quote(f'{path}-wal')}  # who holds it; rerun once it is done", detail)
    if kind == "full":
        return DbFault(kind, f"the file system holding {path} is full ({detail})",
                       f"df -h {folder}  # free space there, or pass --db FILE on another file system", detail)
    if kind == "read-only":
        return DbFault(kind, f"{path} cannot be written: {detail}",
                       f"touch {db}  # shows why; make it writable, or pass --db FILE elsewhere", detail)
    if kind == "damaged":
        return DbFault(kind, f"{path} is damaged ({detail})",
                       f"sqlite3 {db} 'PRAGMA integrity_check'  # the next `introspect health` moves it aside",
                       detail)
    if kind == "newer":
        return DbFault(kind, detail, "git pull && pip install .  # in your introspect clone (a newer introspect "
                       "wrote it), or pass --db FILE", detail)
    return DbFault(kind, f"cannot use {path}: {detail}",
                   f"ls -ld {folder} {db}  # check the path, or pass --db FILE elsewhere", detail)


def _detail(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror or exc}{where}"
    return str(exc) or type(exc).__name__


def _refine(kind: str, detail: str, folder: Path) -> tuple[str, str]:
    """SQLite often says only "unable to open" or "disk I/O error": the file system says why."""
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return "read-only", f"{folder} is on a read-only file system; SQLite said: {detail}"
        if shutil.disk_usage(folder).free < NEARLY_FULL_BYTES:
            return "full", detail
    except OSError:
        pass
    return kind, detail


__all__ = ["DbFault", "NewerSchema", "connect_read_only", "create_private", "describe", "fault_kind",
           "move_aside", "quick_check"]
