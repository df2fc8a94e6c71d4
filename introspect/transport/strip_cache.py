"""The stripped remote sources (:mod:`introspect.transport.strip`), kept between runs.

Stripping a health task's modules parses and tokenizes them: about 0.08 CPU-s, more than
half of what the target allows the whole controller start-up (docs/performance.md, 2b). So
the cuts are computed once per version of the sources and kept, like ``__pycache__``, in
the user cache directory's ``shipped``: one JSON file
per set of modules, named by the sha256 of their names and sources and of strip.py itself,
holding each module's cuts, never its text. The text shipped is always the installed source with those cuts
applied, and a cut can only remove text or put ``pass`` in its place.

What is read back is checked: a file not owned by this user or writable by others is not
used (it becomes code run on every host); a cut out of range, overlapping, or with another
replacement discards the file, and the cuts are computed again. Writing is best effort: a
read-only or full disk costs only the CPU of stripping again next time.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import stat
import tempfile
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

from introspect.transport import strip
from introspect.transport.strip import REPLACEMENTS, Cut, apply, cuts

FORMAT = "introspect-shipped/1"
MAX_FILES = 32  # sets of modules kept (tasks x versions); the oldest go first


# digest -> the stripped sources, for this process: a fleet run ships the same modules over
# every connection, from many threads; the first computes (or reads the kept cuts), the rest wait
# for it instead of stripping again (a cold cache cost 124 CPU-s at 300 hosts without this).
_MEMO: dict[str, dict[str, str]] = {}
_LOCK = threading.Lock()


def stripped_sources(names: Iterable[str], sources: Mapping[str, str]) -> dict[str, str]:
    """``{name: stripped source}`` for ``names``, from the kept cuts when they are there and sound."""
    names = sorted(names)
    digest = hashlib.sha256(FORMAT.encode())
    digest.update(_stripper_source())  # a change to what strip.py cuts is a new file
    for name in names:
        digest.update(f"{name}\0{sources[name]}\0".encode())
    key = digest.hexdigest()
    with _LOCK:
        done = _MEMO.get(key)
        if done is None:
            path = cache_dir() / f"{key}.json"
            found = _read(path, names, sources)
            if found is None:
                found = {name: cuts(sources[name]) for name in names}
                _write(path, found)
            done = _MEMO[key] = {name: apply(sources[name], found[name]) for name in names}
    return dict(done)


@functools.cache
def _stripper_source() -> bytes:
    return Path(strip.__file__).read_bytes()


def cache_dir() -> Path:
    """The user cache directory's ``shipped``, beside the result cache's default ``probes``; never
    inside ``$INTROSPECT_CACHE_DIR``, which holds probe results only (``introspect cache`` lists,
    evicts and clears everything in it)."""
    from introspect.userconfig import user_dir

    return user_dir("cache") / "shipped"


def _read(path: Path, names: list[str], sources: Mapping[str, str]) -> dict[str, list[Cut]] | None:
    try:
        with open(path, "rb") as fh:
            info = os.fstat(fh.fileno())
            if info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                return None
            doc = json.load(fh)
    except (OSError, ValueError):
        return None
    kept = doc.get("cuts") if isinstance(doc, dict) and doc.get("format") == FORMAT else None
    if not isinstance(kept, dict) or sorted(kept) != names:
        return None
    found: dict[str, list[Cut]] = {}
    for name in names:
        checked = _checked(kept[name], len(sources[name]))
        if checked is None:
            return None
        found[name] = checked
    return found


def _checked(items: object, size: int) -> list[Cut] | None:
    """The cuts as kept, when each lies in the source, after the one before, with a known replacement."""
    if not isinstance(items, list):
        return None
    out: list[Cut] = []
    end = 0
    for item in items:
        if not (isinstance(item, list) and len(item) == 3 and all(type(v) is int for v in item[:2])
                and item[2] in REPLACEMENTS and end <= item[0] <= item[1] <= size):
            return None
        out.append((item[0], item[1], item[2]))
        end = item[1]
    return out


def _write(path: Path, found: dict[str, list[Cut]]) -> None:
    with contextlib.suppress(OSError):
        from introspect.userconfig import make_private_dirs

        make_private_dirs(path.parent)  # each missing level 0700, as the result cache's own
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".partial-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"format": FORMAT, "cuts": found}, fh, separators=(",", ":"))
            os.replace(tmp, path)
        except OSError:
            os.unlink(tmp)
            raise
        _evict(path.parent)


def _evict(folder: Path) -> None:
    entries = []
    for entry in os.scandir(folder):
        if entry.name.endswith(".json") and not entry.name.startswith(".partial-"):
            with contextlib.suppress(OSError):
                entries.append((entry.stat(follow_symlinks=False).st_mtime, entry.path))
    for _, old in sorted(entries)[:-MAX_FILES]:
        with contextlib.suppress(OSError):
            os.unlink(old)
