"""Local cache of raw facts, so a repeated probe of an unchanged model costs one round trip.

Where: ``$INTROSPECT_CACHE_DIR``, else ``user_cache_dir("introspect")/probes``, one JSON
file per key. Key: host, port, user, interpreter, model path and the probe options. Value: the
raw facts plus the remote fingerprint (sizes and mtimes of the model dir's
entries and of the interpreter's import path) they were gathered under. A hit
needs the fingerprint taken now to equal the stored one; ``--refresh`` skips
the lookup. Runs that ended in a fatal error or a timeout are never stored.
The directory is capped (``$INTROSPECT_CACHE_MAX_BYTES``, default 256 MiB): the least
recently used entries go first. ``introspect cache info|clear`` shows and empties it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CACHE_SCHEMA = 1
CACHE_MAX_ENV = "INTROSPECT_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES = 256 * 1024 * 1024  # a Kimi K2 profile's raw facts are ~2 MB: over 100 models


@dataclass(frozen=True)
class CacheInfo:
    path: Path
    entries: int
    bytes: int
    max_bytes: int


def max_bytes() -> int:
    try:
        return max(0, int(os.environ.get(CACHE_MAX_ENV, DEFAULT_MAX_BYTES)))
    except ValueError:
        return DEFAULT_MAX_BYTES


def default_dir() -> Path:
    override = os.environ.get("INTROSPECT_CACHE_DIR")
    if override:
        return Path(override)
    import platformdirs  # only when no $INTROSPECT_CACHE_DIR names the directory

    return Path(platformdirs.user_cache_dir("introspect")) / "probes"


def cache_key(target: dict[str, Any], options: dict[str, Any]) -> str:
    material = json.dumps({"target": target, "options": options}, sort_keys=True)
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


def cacheable(raw: dict[str, Any]) -> bool:
    if raw.get("fatal") or (raw.get("files") or {}).get("status") != "ok":
        return False
    errors = raw.get("errors") or []
    return not any(isinstance(e, dict) and e.get("type") in ("timeout", "ProbeTimeout", "killed")
                   for e in errors)


class ProbeCache:
    def __init__(self, root: Path | None = None, limit: int | None = None) -> None:
        self.root = root or default_dir()
        self.limit = max_bytes() if limit is None else limit

    def _path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def get(self, key: str, digest: str | None) -> dict[str, Any] | None:
        stored = self.entry(key) if digest else None
        return stored[1] if stored is not None and stored[0] == digest else None

    def entry(self, key: str) -> tuple[str, dict[str, Any]] | None:
        """(the digest it was stored under, the raw facts) of a readable entry, else None."""
        try:
            entry = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        with contextlib.suppress(OSError):
            os.utime(self._path(key))  # recently used: evicted last
        if not isinstance(entry, dict) or entry.get("schema") != CACHE_SCHEMA:
            return None
        digest, raw = entry.get("digest"), entry.get("raw")
        return (digest, raw) if isinstance(digest, str) and digest and isinstance(raw, dict) else None

    def put(self, key: str, raw: dict[str, Any]) -> None:
        digest = (raw.get("fingerprint") or {}).get("digest")
        if not digest or not cacheable(raw):
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = self._path(key).with_suffix(f".tmp-{os.getpid()}")
            tmp.write_text(json.dumps({"schema": CACHE_SCHEMA, "digest": digest, "raw": raw}), encoding="utf-8")
            os.replace(tmp, self._path(key))
            self.evict(keep=self._path(key))
        except OSError:
            pass  # a cache that cannot be written is only a slower next run

    def _entries(self) -> list[tuple[float, int, Path]]:
        """(last used, size, path) of every entry, least recently used first."""
        out = []
        for path in self.root.glob("*.json"):
            try:
                st = path.stat()
            except OSError:
                continue  # removed meanwhile by another run
            out.append((st.st_mtime, st.st_size, path))
        return sorted(out)

    def evict(self, keep: Path | None = None) -> int:
        """Remove least recently used entries until the directory is within the cap."""
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
        entries = self._entries() if self.root.is_dir() else []
        return CacheInfo(self.root, len(entries), sum(size for _, size, _ in entries), self.limit)

    def clear(self) -> int:
        """Remove every entry (and leftovers of interrupted writes); returns how many entries."""
        if not self.root.is_dir():
            return 0
        count = 0
        for path in self.root.iterdir():
            if path.suffix == ".json" or ".tmp-" in path.name:
                with contextlib.suppress(OSError):
                    path.unlink()
                    count += path.suffix == ".json"
        return count
