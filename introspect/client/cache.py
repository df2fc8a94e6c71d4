"""Local cache of raw facts, so a repeated probe of an unchanged model costs one round trip.

Where: ``$INTROSPECT_CACHE_DIR``, else ``user_cache_dir("introspect")/probes``, one JSON
file per key. Key: introspect's version, host, port, user, interpreter, model path and the
probe options. Value: the raw facts, a sha256 of them, and the remote fingerprint (sizes and
mtimes of the model dir's entries and of the interpreter's import path) they were gathered
under. A hit needs the fingerprint taken now to equal the stored one; ``--refresh`` skips
the lookup. Runs that ended in a fatal error or a timeout are never stored.

Nothing read from the directory is trusted (see :mod:`.cache_files`): an entry that is no
regular file, too big, not JSON, of another schema or version, or whose raw facts are
damaged is removed (healed) with a warning, and the probe runs live. A write that fails
(a full disk) is a warning, never a failure of the probe. The directory is capped
(``$INTROSPECT_CACHE_MAX_BYTES``, default 256 MiB): the least recently used entries go
first, and partial files of writers that are gone go too. ``introspect cache info|clear``
shows and empties it.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import errno
import hashlib
import json
import os
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from introspect.client.cache_files import (
    ENTRY_MAX_BYTES,
    Untrusted,
    is_partial,
    read_entry,
    remove_stale_partials,
    write_private,
)
from introspect.userconfig import make_private_dirs

if TYPE_CHECKING:
    from introspect.client.model import ProbeOptions
    from introspect.remote.contract import RawFacts, TargetBlock

CACHE_SCHEMA = 2  # 2: the tool's version and a sha256 of the raw facts in every entry
CACHE_MAX_ENV = "INTROSPECT_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES = 256 * 1024 * 1024  # a Kimi K2 profile's raw facts are ~2 MB: over 100 models
# Sections a stored run always has as objects (a run without them is never stored).
REQUIRED_SECTIONS = ("target", "options", "files", "fingerprint")
# What the cache had to say during this process's runs, drained by the CLI as warning lines.
_WARNINGS: collections.deque[tuple[str, str | None]] = collections.deque(maxlen=32)


@dataclass(frozen=True)
class CacheInfo:
    path: Path
    entries: int
    bytes: int
    max_bytes: int
    partial_files: int = 0


def max_bytes() -> int:
    try:
        return max(0, int(os.environ.get(CACHE_MAX_ENV, DEFAULT_MAX_BYTES)))
    except ValueError:
        return DEFAULT_MAX_BYTES


def default_dir() -> Path:
    override = os.environ.get("INTROSPECT_CACHE_DIR")
    if override:
        return Path(override)
    # Through userconfig: an XDG_CACHE_HOME that names a file falls back to ~/.cache with a
    # warning naming the variable, instead of every cache write failing on a path that cannot be.
    from introspect.userconfig import user_dir

    return user_dir("cache") / "probes"


def tool_version() -> str:
    import introspect  # read at call time: the version of the code that runs

    return str(introspect.__version__)


def cache_key(target: TargetBlock, options: ProbeOptions) -> str:
    # The version is part of the key: another release may gather or read raw facts differently.
    material = json.dumps({"version": tool_version(), "target": target, "options": dataclasses.asdict(options)},
                          sort_keys=True, default=str)
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


def cacheable(raw: RawFacts) -> bool:
    files = raw.get("files")
    if raw.get("fatal") or not isinstance(files, dict) or files.get("status") != "ok":
        return False
    errors = raw.get("errors") or []
    return not any(isinstance(e, dict) and e.get("type") in ("timeout", "ProbeTimeout", "killed")
                   for e in errors)


def drain_warnings() -> list[tuple[str, str | None]]:
    """(text, fix) of each warning since the last call, once each, in order (then forgotten)."""
    items = list(dict.fromkeys(_WARNINGS))
    _WARNINGS.clear()
    return items


def _warn(text: str, hint: str | None = None) -> None:
    _WARNINGS.append((text, hint))


def _canonical(raw: Any) -> str:
    return json.dumps(raw, sort_keys=True, separators=(",", ":"))


def _checksum(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def damage(raw: Any, digest: str) -> str | None:
    """Why the raw facts of an entry cannot be served (None when they can)."""
    if not isinstance(raw, dict) or raw.get("schema") != "introspect.raw/v1":
        return "its raw facts are not introspect.raw/v1"
    wrong = [name for name in REQUIRED_SECTIONS if not isinstance(raw.get(name), dict)]
    if wrong:
        return f"its raw facts lack {', '.join(wrong)}"
    if raw["fingerprint"].get("digest") != digest:
        return "its raw facts were gathered under another fingerprint"
    if not cacheable(cast("RawFacts", raw)):  # its sections are objects (checked above)
        return "its raw facts are of a failed run"
    from introspect.analysis.raw_guard import repair_raw  # the shapes `profile RAW.json` checks too

    findings = repair_raw(raw)[1]
    return f"its raw facts are damaged ({findings[0].message})" if findings else None


def _check(entry: Any, key: str) -> tuple[str, RawFacts]:
    """(digest, raw facts) of a parsed entry; Untrusted when any part of it does not hold."""
    if not isinstance(entry, dict) or not entry:
        raise Untrusted("is empty" if entry in ({}, None, [], "") else "is not a cache entry")
    if entry.get("schema") != CACHE_SCHEMA:
        raise Untrusted(f"has schema {entry.get('schema')!r}, expected {CACHE_SCHEMA}")
    if entry.get("version") != tool_version() or entry.get("key") != key:
        raise Untrusted("was written by another introspect version or for another key")
    digest, raw = entry.get("digest"), entry.get("raw")
    if not isinstance(digest, str) or not digest:
        raise Untrusted("has no fingerprint digest")
    if entry.get("sha256") != _checksum(_canonical(raw)):
        raise Untrusted("has raw facts that do not match their checksum (changed after they were written)")
    reason = damage(raw, digest)
    if reason:
        raise Untrusted(reason)
    assert isinstance(raw, dict)
    return digest, cast("RawFacts", raw)  # damage() checked its shapes as `profile RAW.json` does


def _write_hint(root: Path, exc: OSError) -> str:
    where = shlex.quote(str(root))
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"df -h {where}  # free space there, or set INTROSPECT_CACHE_DIR to another file system"
    if exc.errno in (errno.ENOTDIR, errno.EEXIST):
        return f"ls -ld {where}  # not a directory: set INTROSPECT_CACHE_DIR to a directory, or pass --no-cache"
    return f"ls -ld {where}  # make it writable, or set INTROSPECT_CACHE_DIR to a writable directory"


class ProbeCache:
    def __init__(self, root: Path | None = None, limit: int | None = None) -> None:
        self.root = root or default_dir()
        self.limit = max_bytes() if limit is None else limit

    def _path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def get(self, key: str, digest: str | None) -> RawFacts | None:
        stored = self.entry(key) if digest else None
        return stored[1] if stored is not None and stored[0] == digest else None

    def entry(self, key: str) -> tuple[str, RawFacts] | None:
        """(the digest it was stored under, the raw facts) of a sound entry, else None.

        An entry that is there but cannot be trusted is removed, with a warning."""
        path = self._path(key)
        try:
            data = read_entry(path)
            if data is None:
                return None
            try:
                parsed = json.loads(data.decode("utf-8")) if data.strip() else None
            except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
                raise Untrusted(f"is not JSON ({type(exc).__name__})") from None
            return _check(parsed, key)
        except Untrusted as why:
            self._heal(path, str(why))
            return None

    def _heal(self, path: Path, why: str) -> None:
        try:
            if stat.S_ISDIR(os.lstat(path).st_mode):
                raise IsADirectoryError(errno.EISDIR, "is a directory")
            os.unlink(path)  # a link itself, never its target
        except FileNotFoundError:
            pass
        except OSError as exc:
            _warn(f"result cache entry {path} {why}, and cannot be removed ({exc.strerror or exc}); "
                  "probed live", f"rm -r -- {shlex.quote(str(path))}  # then the cache works again")
            return
        _warn(f"result cache entry {path} {why}; removed it and probed live")

    def put(self, key: str, raw: RawFacts) -> None:
        fingerprint = raw.get("fingerprint")
        digest = fingerprint.get("digest") if isinstance(fingerprint, dict) else None
        if not digest or not cacheable(raw):
            return
        try:
            text = _canonical(raw)
            text = _canonical(json.loads(text))  # as a reader will see it: keys as strings, lists
            head = json.dumps({"schema": CACHE_SCHEMA, "version": tool_version(), "key": key,
                               "digest": digest, "sha256": _checksum(text)})
            data = f"{head[:-1]}, \"raw\": {text}}}".encode()
        except (TypeError, ValueError, RecursionError) as exc:
            _warn(f"result cache not written: the raw facts are not JSON ({exc})")
            return
        if len(data) > ENTRY_MAX_BYTES:
            return  # the reader would refuse it: a bigger model is probed live each time
        try:
            make_private_dirs(self.root)
            write_private(self._path(key), data)
        except OSError as exc:  # a cache that cannot be written is only a slower next run
            _warn(f"result cache not written to {self.root}: {exc.strerror or exc}", _write_hint(self.root, exc))
            return
        self.evict(keep=self._path(key))

    def _entries(self) -> list[tuple[float, int, Path]]:
        """(last used, size, path) of every entry, least recently used first (links and FIFOs too)."""
        out = []
        try:
            scan = list(os.scandir(self.root))
        except OSError:
            return []
        for item in scan:
            if not item.name.endswith(".json"):
                continue
            try:
                st = item.stat(follow_symlinks=False)
            except OSError:
                continue  # removed meanwhile by another run
            if not stat.S_ISDIR(st.st_mode):
                out.append((st.st_mtime, st.st_size, Path(item.path)))
        return sorted(out)

    def evict(self, keep: Path | None = None) -> int:
        """Remove partial files left by writers that are gone, then least recently used
        entries until the directory is within the cap."""
        remove_stale_partials(self.root)
        entries = self._entries()
        total, removed = sum(size for _, size, _ in entries), 0
        for _, size, path in entries:
            if total <= self.limit:
                break
            if path == keep:
                continue
            with contextlib.suppress(OSError):
                path.unlink()
                total -= size
                removed += 1
        return removed

    def info(self) -> CacheInfo:
        entries = self._entries()
        try:
            partial = sum(1 for name in os.listdir(self.root) if is_partial(name))
        except OSError:
            partial = 0
        return CacheInfo(self.root, len(entries), sum(size for _, size, _ in entries), self.limit, partial)

    def clear(self) -> int:
        """Remove every entry (and partial files of interrupted writes); returns how many entries.
        Raises OSError when the directory cannot be listed."""
        if not self.root.is_dir():
            return 0
        count = 0
        for name in os.listdir(self.root):
            if name.endswith(".json") or is_partial(name):
                with contextlib.suppress(OSError):  # a directory of that name stays; gone meanwhile
                    os.unlink(self.root / name)
                    count += name.endswith(".json")
        return count
