"""Remote task "discover": every model directory on the host, and file hashes of one.

Runs on the host under its own interpreter: standard library only, Python 3.8+.
The walk is :mod:`introspect.remote.facts.model.discovery`, one directory's summary
:mod:`introspect.remote.facts.model.model_summary`, the hashes :mod:`introspect.remote.facts.model.hashes`.
Nothing here raises to the caller: unreadable dirs, symlink loops, broken configs
become error records ``{"probe": "discover", "type", "message", "path"?}``.

Request (mode "discover", the default)::

    {"roots": [dirs, reported when missing], "optional_roots": [dirs, skipped quietly when missing],
     "max_depth": int, "use_hf_scanner": bool, "hf_cache": dir | null, "json_cap": int,
     "deadline": seconds, "max_models": int}

Result::

    {"models": [<entry>], "roots": [{"path", "status"}], "hf_cache": {"path", "exists", "scanner",
     "scanner_version", "repos"}, "truncated": bool, "errors": [...]}

    <entry> = {"path", "real_path", "source": "dir" | "hf-cache", "root",
               "repo_id", "commit", "refs", "revision",     # hf-cache entries (null otherwise)
               "aliases": [other paths reaching the same dir],
               "size": bytes (files summed, each inode once), "file_count", "size_truncated",
               "config": {...} | null (raw, when config.json is at most json_cap bytes),
               "config_size", "config_error": null | {type, message},
               "digest": {model_type, text_model_type, architectures, num_layers, hidden_size,
                          vocab_size, dtype, quant_method, mtp_layers},
               "tokenizer": {"layout", "formats", "remote_code", "class", "files"},
               "weights": {"format", "files", "index"},
               "drafter": null | {"signals", "target", "target_key"}}

Request (mode "hashes")``{"mode": "hashes", "model_path", "json_cap"}`` -> ``{"hashes": ..., "errors"}``,
see :func:`introspect.remote.facts.model.hashes.collect_hashes`.
"""

from __future__ import annotations

import os
import stat
import time
from typing import Any, Dict, List, Optional, Tuple

from ..contract import (
    DEFAULT_DISCOVER_DEADLINE,
    DEFAULT_DISCOVER_DEPTH,
    DEFAULT_DISCOVER_MAX_MODELS,
    DEFAULT_DISCOVER_SHIP_CAP,
    DEFAULT_JSON_CAP,
    DiscoverReply,
    ErrorRecord,
    HashesReply,
    error_record,
)
from ..facts.model import hf_cache
from ..facts.model.discovery import Discovery, scan_hf_cache
from ..facts.model.hashes import collect_hashes
from ..readers import os_error

PROBE = "discover"


def _err(kind: str, message: str, path: Optional[str] = None) -> ErrorRecord:
    return error_record(kind, message, path, probe=PROBE)


def _root_status(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError as exc:
        return os_error(exc, path)["type"]
    return "ok" if stat.S_ISDIR(st.st_mode) else "not-a-directory"


def discover(request: Dict[str, Any]) -> DiscoverReply:
    deadline = time.time() + float(request.get("deadline") or DEFAULT_DISCOVER_DEADLINE)
    depth = request.get("max_depth")
    found = Discovery(int(depth) if depth is not None else DEFAULT_DISCOVER_DEPTH, deadline,
                      int(request.get("json_cap") or DEFAULT_DISCOVER_SHIP_CAP),
                      int(request.get("max_models") or DEFAULT_DISCOVER_MAX_MODELS))
    cache = hf_cache.cache_dir(request.get("hf_cache"))
    cache_info = scan_hf_cache(found, cache, bool(request.get("use_hf_scanner", True)))
    roots = []
    wanted: List[Tuple[Any, bool]] = [(p, True) for p in request.get("roots") or []] + \
        [(p, False) for p in request.get("optional_roots") or []]
    for given, required in wanted:
        path = os.path.expanduser(str(given))
        status = _root_status(path)
        roots.append({"path": path, "status": status, "required": required})
        if status == "ok":
            found.walk(path)
        elif required:
            found.errors.append(_err(status, "root %s: %s" % (path, status), path))
    return DiscoverReply(models=found.models, roots=roots, hf_cache=cache_info, truncated=found.truncated,
                         dirs_visited=found.visited, errors=found.errors)


def run(request: Dict[str, Any]) -> Any:
    """Task entry: mode "discover" (default) or "hashes"."""
    if request.get("mode") == "hashes":
        path = str(request.get("model_path") or "")
        hashes, errors = collect_hashes(path, json_cap=int(request.get("json_cap") or DEFAULT_JSON_CAP))
        return HashesReply(hashes=hashes, errors=errors)
    return discover(request)
