"""Local cache of raw facts, so a repeated probe of an unchanged model costs one round trip.

Key: host, port, user, interpreter, model path and the probe options. Value: the
raw facts plus the remote fingerprint (sizes and mtimes of the model dir's
entries and of the interpreter's import path) they were gathered under. A hit
needs the fingerprint taken now to equal the stored one; ``--refresh`` skips
the lookup. Runs that ended in a fatal error or a timeout are never stored.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import platformdirs

CACHE_SCHEMA = 1


def default_dir() -> Path:
    override = os.environ.get("INTROSPECT_CACHE_DIR")
    return Path(override) if override else Path(platformdirs.user_cache_dir("introspect")) / "probes"


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
    def __init__(self, root: Path | None = None) -> None:
        self.root = root or default_dir()

    def _path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def get(self, key: str, digest: str | None) -> dict[str, Any] | None:
        if not digest:
            return None
        try:
            entry = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(entry, dict) or entry.get("schema") != CACHE_SCHEMA or entry.get("digest") != digest:
            return None
        raw = entry.get("raw")
        return raw if isinstance(raw, dict) else None

    def put(self, key: str, raw: dict[str, Any]) -> None:
        digest = (raw.get("fingerprint") or {}).get("digest")
        if not digest or not cacheable(raw):
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = self._path(key).with_suffix(f".tmp-{os.getpid()}")
            tmp.write_text(json.dumps({"schema": CACHE_SCHEMA, "digest": digest, "raw": raw}), encoding="utf-8")
            os.replace(tmp, self._path(key))
        except OSError:
            pass  # a cache that cannot be written is only a slower next run
