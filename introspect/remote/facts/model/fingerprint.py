"""Section ``fingerprint``: a cheap digest of everything a probe's facts depend on.

Standard library only, Python 3.8+. It stats (never reads) the model dir's
entries and the interpreter's import path dirs: a changed file, shard, custom
code module or an installed/removed package changes the digest, so a cached
profile is reused only when nothing it was built from changed. A link out of the
model dir (see :mod:`..confine`) counts by the link's own metadata, never its target's.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from typing import Any, List

from ... import confine
from ...contract import Fingerprint

MAX_ENTRIES = 20000


def _stat_entries(path: str) -> List[List[Any]]:
    out: List[List[Any]] = []
    try:
        names = sorted(os.listdir(path))[:MAX_ENTRIES]
    except OSError as exc:
        return [["<error>", exc.errno or 0, 0]]
    for name in names:
        full = os.path.join(path, name)
        try:
            lst = os.lstat(full)  # an entry that is no link is inside: its own stat is the stat
            if not stat.S_ISLNK(lst.st_mode):
                out.append([name, lst.st_size, lst.st_mtime_ns])
            elif _links_out(full):
                # The link's own mtime, and a marker: re-pointing the link (or its target coming
                # inside) changes the digest, while nothing of the target enters it.
                out.append([name, "link-outside", lst.st_mtime_ns])
            else:
                st = os.stat(full)  # follows HF snapshot symlinks into blobs/
                out.append([name, st.st_size, st.st_mtime_ns])
        except OSError as exc:
            out.append([name, -1, exc.errno or 0])
    return out


def _links_out(path: str) -> bool:
    try:
        confine.check(path)
    except confine.LinkOutside:
        return True
    return False


def _import_path_state() -> List[List[Any]]:
    out: List[List[Any]] = []
    for entry in sys.path:
        if entry and os.path.isdir(entry):
            try:
                out.append([entry, os.stat(entry).st_mtime_ns])
            except OSError:
                continue
    return out


def compute(model_path: str) -> Fingerprint:
    """The digest of the model dir's entries, the interpreter and its import path."""
    confine.confine(model_path)  # the fingerprint task reads nothing else: confined here
    entries = _stat_entries(model_path)
    state = {
        "model": entries,
        "python": [sys.executable, list(sys.version_info[:3])],
        "import_path": _import_path_state(),
    }
    digest = hashlib.sha256(repr(state).encode("utf-8")).hexdigest()
    return Fingerprint(digest=digest, entries=len(entries))
