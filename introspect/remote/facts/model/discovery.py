"""The walk of ``introspect models``: model dirs under roots and in the hub cache, one entry each.

Runs on the host: standard library only, Python 3.8+. The one heavy import allowed
is ``huggingface_hub`` (for ``scan_cache_dir``), tried inside ``try`` so that a venv
without it falls back to the stdlib reader in :mod:`introspect.remote.facts.model.hf_cache`.
Unreadable dirs, symlink loops and broken configs become error records
``{"probe": "discover", ...}`` and the walk goes on; it is bounded by time, dirs and models.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from typing import Any, Dict, List, Optional, Set, Tuple

from ...contract import ErrorRecord, error_record, tag
from ...readers import os_error
from . import hf_cache
from .listing import scan_names
from .model_summary import (
    MAX_SIZE_FILES,
    READ_CAP,
    ConfigRead,
    describe_model,
    is_model_dir,
    read_json,
    walk_entries,
)

PROBE = "discover"
MAX_DIRS = 20000                  # directories visited in one walk
MAX_NAMES = 20000                 # names read from one directory

# Directories never worth descending into: VCS, caches, and the cache's blob store
# (its files are reached through snapshots, each once).
SKIP_DIRS = frozenset(["__pycache__", "node_modules", "blobs", "lost+found", "site-packages"])
# Files of a model dir that the listing reads itself (model_summary.describe_model): their atime
# says when the last listing ran, not when anyone used the model, so "accessed" leaves them out.
SELF_READ = frozenset(["config.json", "tokenizer_config.json"])


def _err(kind: str, message: str, path: Optional[str] = None) -> ErrorRecord:
    return error_record(kind, message, path, probe=PROBE)


def _os_err(exc: OSError, path: str) -> ErrorRecord:
    return tag(os_error(exc, path), PROBE)


def _names(path: str) -> Tuple[Optional[List[str]], Optional[ErrorRecord], bool]:
    names, truncated, err = scan_names(path, MAX_NAMES, probe=PROBE)
    return (None if err is not None else names), err, truncated


class Discovery:
    """Collects model entries from roots and the hub cache; one per real directory."""

    def __init__(self, max_depth: int, deadline: float, ship_cap: int, max_models: int) -> None:
        self.max_depth = max_depth
        self.deadline = deadline
        self.ship_cap = ship_cap
        self.max_models = max_models
        self.models: List[Dict[str, Any]] = []
        self.by_real: Dict[str, Dict[str, Any]] = {}
        self.errors: List[ErrorRecord] = []
        self.truncated = False
        self.visited = 0

    def out_of_budget(self) -> bool:
        if time.time() > self.deadline or self.visited >= MAX_DIRS or len(self.models) >= self.max_models:
            self.truncated = True
            return True
        return False

    def add(self, path: str, names: List[str], config_read: Optional[ConfigRead] = None,
            **extra: Any) -> Optional[Dict[str, Any]]:
        real = os.path.realpath(path)
        if real in self.by_real:  # reached twice (a link, or a root inside the cache)
            self._note_alias(path)
            return None
        entry = describe_model(path, names, self.ship_cap, config_read)
        entry.update(model_times(path))
        entry.update(extra)
        self.by_real[real] = entry
        self.models.append(entry)
        return entry

    # -- hub cache ----------------------------------------------------------------
    def add_cache_revision(self, repo_id: str, rev: Dict[str, Any], root: str,
                           size: Optional[int] = None) -> None:
        names, err, _trunc = _names(rev["path"])
        if names is None:
            self.errors.extend([err] if err is not None else [])
            return
        refs = sorted(rev.get("refs") or [])
        entry = self.add(rev["path"], names, source="hf-cache", root=root, repo_id=repo_id,
                         commit=rev["commit"], refs=refs, revision=refs[0] if refs else rev["commit"][:12])
        if entry is not None and size is not None:
            entry["size"] = size  # the scanner's figure: blobs of this revision, each once

    def add_cache_repo(self, repo_path: str, repo_id: str, root: str) -> None:
        revisions, errors = hf_cache.list_revisions(repo_path)
        self.errors.extend(tag(e, PROBE) for e in errors)
        for rev in revisions:
            if self.out_of_budget():
                return
            self.add_cache_revision(repo_id, rev, root)

    # -- plain roots ----------------------------------------------------------------
    def walk(self, root: str) -> None:
        """Depth-bounded walk; links followed, loops (a link back to an ancestor) reported."""
        stack: List[Tuple[str, int, Tuple[Tuple[int, int], ...]]] = [(root, 0, ())]
        seen: Set[Tuple[int, int]] = set()
        while stack:
            if self.out_of_budget():
                self.errors.append(_err("scan-truncated", "stopped walking %s: the scan reached its bound "
                                        "(time, %d dirs or %d models)" % (root, MAX_DIRS, self.max_models), root))
                return
            path, depth, ancestors = stack.pop()
            self.visited += 1
            key = self._dir_key(path)
            if key is None:
                continue
            if key in ancestors:
                self.errors.append(_err("symlink-loop", "%s leads back to %s (a symlink loop); skipped"
                                        % (path, os.path.realpath(path)), path))
                continue
            if key in seen:
                self._note_alias(path)
                continue
            seen.add(key)
            names, err, truncated = _names(path)
            if names is None:
                self.errors.extend([err] if err is not None else [])
                continue
            if truncated:
                self.errors.append(_err("listing-truncated", "%s holds more than %d entries; looked at the first"
                                        % (path, MAX_NAMES), path))
            parsed = hf_cache.parse_repo_folder(os.path.basename(path.rstrip("/")))
            if parsed and parsed[0] == "model" and "snapshots" in names:
                self.add_cache_repo(path, parsed[1], root)
                continue
            self._maybe_add(path, names, root)
            if depth < self.max_depth:
                for name in reversed(names):
                    if not name.startswith(".") and name not in SKIP_DIRS:
                        child = os.path.join(path, name)
                        if _is_dir_entry(child):
                            stack.append((child, depth + 1, ancestors + (key,)))

    def _note_alias(self, path: str) -> None:
        known = self.by_real.get(os.path.realpath(path))
        if known is not None and path != known["path"] and path not in known["aliases"]:
            known["aliases"].append(path)

    def _dir_key(self, path: str) -> Optional[Tuple[int, int]]:
        try:
            st = os.stat(path)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                self.errors.append(_err("symlink-loop", "%s: a symlink loop; skipped" % path, path))
            elif exc.errno in (errno.EACCES, errno.EPERM):
                self.errors.append(_os_err(exc, path))
            return None  # dangling links and races: nothing to list
        if not stat.S_ISDIR(st.st_mode):
            return None
        return (st.st_dev, st.st_ino)

    def _maybe_add(self, path: str, names: List[str], root: str) -> None:
        config_read = read_json(os.path.join(path, "config.json"), READ_CAP) if "config.json" in names \
            else (None, None, None)
        # A broken config.json still marks a model dir worth listing, with its error.
        if config_read[1] is not None or is_model_dir(names, config_read[0]):
            self.add(path, names, config_read, root=root)


def model_times(path: str) -> Dict[str, Optional[float]]:
    """{"modified", "accessed"}: epoch seconds of the newest st_mtime / st_atime of the model's files.

    huggingface_hub's scan_cache_dir defines a cached revision's and repo's times so (the
    newest mtime / atime of the blobs its files lead to,
    https://github.com/huggingface/huggingface_hub/blob/v2.4.0/src/huggingface_hub/utils/_cache_manager.py#L926-L955);
    here the same for any model dir, within the bounds of its size (links followed but never
    out of the model, model_summary.dir_size's depth and file cap). "accessed" leaves out
    SELF_READ at the top, and is null when no other file is there. An atime is only as fresh
    as the mount lets it be (relatime: at most once a day unless the file was written since;
    noatime: never).
    """
    newest = {"modified": None, "accessed": None}  # type: Dict[str, Optional[float]]
    for seen, (depth, entry, st) in enumerate(walk_entries(path), 1):
        if seen > MAX_SIZE_FILES:
            break
        if st is not None and stat.S_ISREG(st.st_mode):
            _newer(newest, "modified", st.st_mtime)
            if not (depth == 0 and entry.name in SELF_READ):
                _newer(newest, "accessed", st.st_atime)
    return newest


def _newer(times: Dict[str, Optional[float]], key: str, value: float) -> None:
    current = times[key]
    if current is None or value > current:
        times[key] = round(value, 3)


def _is_dir_entry(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError as exc:
        # A loop must still reach the walker so that it is reported; other failures are not dirs.
        return exc.errno == errno.ELOOP


# --------------------------------------------------------------------------- hub cache scan


def scan_with_hub(cache: str) -> Tuple[Optional[List[Dict[str, Any]]], Optional[str], List[ErrorRecord]]:
    """Revisions via huggingface_hub.scan_cache_dir: (revisions or None, version, errors).
    None means "not available here": the caller reads the layout itself."""
    try:
        import huggingface_hub  # the one heavy import this probe allows
        from huggingface_hub import scan_cache_dir
    except Exception:  # not installed, or broken: the stdlib reader does the same job
        return None, None, []
    version = getattr(huggingface_hub, "__version__", None)
    try:
        info = scan_cache_dir(cache)
    except Exception as exc:
        return None, version, [_err("hf-scanner-failed", "huggingface_hub.scan_cache_dir(%s): %s: %s; read the "
                                    "cache layout directly" % (cache, type(exc).__name__, exc), cache)]
    out = []
    for repo in sorted(info.repos, key=lambda r: r.repo_id):
        if repo.repo_type != "model":
            continue
        for rev in sorted(repo.revisions, key=lambda r: r.last_modified, reverse=True):
            out.append({"repo_id": repo.repo_id, "commit": rev.commit_hash, "path": str(rev.snapshot_path),
                        "refs": sorted(rev.refs), "size": rev.size_on_disk, "mtime": rev.last_modified})
    errors = [_err("hf-cache-warning", str(w), cache) for w in list(info.warnings)[:20]]
    return out, version, errors


def scan_hf_cache(found: Discovery, cache: str, use_scanner: bool) -> Dict[str, Any]:
    info: Dict[str, Any] = {"path": cache, "exists": os.path.isdir(cache), "scanner": None, "scanner_version": None,
            "repos": 0}
    if not info["exists"]:
        return info
    revisions = None
    if use_scanner:
        revisions, info["scanner_version"], errors = scan_with_hub(cache)
        found.errors.extend(errors)
    if revisions is not None:
        info["scanner"] = "huggingface_hub"
        info["repos"] = len(set(r["repo_id"] for r in revisions))
        for rev in revisions:
            if found.out_of_budget():
                break
            found.add_cache_revision(rev["repo_id"], rev, cache, size=rev["size"])
        return info
    info["scanner"] = "stdlib"
    repos, errors = hf_cache.list_repos(cache)
    found.errors.extend(tag(e, PROBE) for e in errors)
    info["repos"] = len(repos)
    for repo in repos:
        if found.out_of_budget():
            break
        found.add_cache_repo(repo["path"], repo["repo_id"], cache)
    return info

