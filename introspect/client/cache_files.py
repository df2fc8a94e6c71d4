"""The result cache's file I/O: it never trusts what it finds in its directory.

A cache directory is shared state that other runs, other tools or a full disk may
have left in any shape, so: an entry is opened with ``O_NOFOLLOW | O_NONBLOCK`` and
read only when ``fstat`` says it is a regular file under the size cap (a FIFO would
block the read forever, a link to ``/dev/zero`` would fill memory); entries and
partial files are created 0600 and the directories introspect creates 0700 (raw
facts name hosts, paths and package versions); a partial ``*.tmp-PID-*`` file is
removed when its write fails, and by eviction once its writer is gone.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
import time
from pathlib import Path

# A Kimi K2 profile's raw facts are ~2 MB; an entry 30 times that is no entry we wrote.
ENTRY_MAX_BYTES = 64 * 1024 * 1024
# A partial file older than this is left over even if a process with its PID runs (PID reuse).
PARTIAL_STALE_S = 600.0
_PARTIAL = re.compile(r"\.tmp-(\d+)(?:-[0-9a-f]+)?$")
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"))


class Untrusted(Exception):
    """An entry that cannot be used as it is; the message says why (``... is a FIFO``)."""


def file_kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def read_entry(path: Path, cap: int = ENTRY_MAX_BYTES) -> bytes | None:
    """The bytes of the regular file ``path`` (None when there is none); Untrusted otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a symbolic link: never read what it points to
            raise Untrusted("is a symbolic link") from None
        raise Untrusted(f"cannot be read ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Untrusted(f"is {file_kind(st.st_mode)}, not a regular file")
        if st.st_size > cap:
            raise Untrusted(f"is {st.st_size} bytes, over the {cap}-byte cap of an entry")
        chunks, size = [], 0
        while size <= cap:  # the size stat gave may have grown since: read up to the cap only
            chunk = os.read(fd, min(1 << 20, cap + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > cap:
            raise Untrusted(f"grew past the {cap}-byte cap of an entry while being read")
        with contextlib.suppress(OSError):
            os.utime(fd)  # recently used: evicted last
        return b"".join(chunks)
    except OSError as exc:
        raise Untrusted(f"cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def write_private(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically, as a 0600 file; no partial file is left on failure."""
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process (EPERM): alive
    return True


def remove_stale_partials(root: Path, now: float | None = None) -> int:
    """Remove partial files whose writer is gone (dead PID, or older than PARTIAL_STALE_S)."""
    now = time.time() if now is None else now
    removed = 0
    try:
        names = os.listdir(root)
    except OSError:
        return 0
    for name in names:
        match = _PARTIAL.search(name)
        if match is None:
            continue
        path = root / name
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            continue
        if _pid_alive(int(match.group(1))) and now - st.st_mtime < PARTIAL_STALE_S:
            continue  # a write in progress
        with contextlib.suppress(OSError):
            os.unlink(path)
            removed += 1
    return removed


def is_partial(name: str) -> bool:
    return _PARTIAL.search(name) is not None
