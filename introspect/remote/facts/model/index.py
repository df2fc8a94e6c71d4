"""model.safetensors.index.json, summarised (never shipped: a 1T checkpoint's is ~25 MB).

Runs on the host: standard library only, Python 3.8+. Read by the files section
(the summary) and the safetensors section (which reports its errors); memoised so
one run parses it once.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Dict, Optional, Tuple

from ...contract import INDEX_CAP, ErrorRecord, IndexSummary, error_record, tag
from ...readers import os_error, read_json_capped

PROBE = "safetensors"
INDEX_NAME = "model.safetensors.index.json"

_index_cache: Dict[Tuple[str, int, int, int], Tuple[Any, Any]] = {}
_index_lock = threading.Lock()


def _err(kind: str, message: str, path: Optional[str] = None) -> ErrorRecord:
    return error_record(kind, message, path, probe=PROBE)


def summarize_index(model_path: str, cap: int = INDEX_CAP) -> Tuple[Optional[IndexSummary], Optional[ErrorRecord]]:
    """Summary of model.safetensors.index.json (None when absent), and an error record.

    Memoised by (path, size, mtime) so the files and safetensors probes of one run
    parse a 25 MB index once.
    """
    path = os.path.join(model_path, INDEX_NAME)
    try:
        st = os.stat(path)
    except OSError as exc:
        if not os.path.lexists(path):
            return None, None
        return None, tag(os_error(exc, path), PROBE)
    key = (os.path.abspath(path), st.st_size, st.st_mtime_ns, cap)
    with _index_lock:
        cached = _index_cache.get(key)
        if cached is None:
            cached = _summarize_index(model_path, path, cap)
            _index_cache.clear()  # one model per process: keep memory flat
            _index_cache[key] = cached
    summary, err = cached
    # A copy: the caller may change it, the memo must not change.
    return (IndexSummary(**summary) if summary is not None else None), err


def _summarize_index(model_path: str, path: str,
                     cap: int) -> Tuple[Optional[IndexSummary], Optional[ErrorRecord]]:
    value, err = read_json_capped(path, cap)
    if err is not None:
        return None, tag(err, PROBE)
    weight_map = value.get("weight_map")
    metadata = value.get("metadata")
    total = metadata.get("total_size") if isinstance(metadata, dict) else None
    if isinstance(total, bool) or not isinstance(total, int):
        total = None
    if not isinstance(weight_map, dict):
        return (IndexSummary(file=INDEX_NAME, total_size=total, weight_map_entries=0, shards=[], missing_shards=[]),
                _err("malformed-index", "%s has no weight_map object" % path, path))
    shards = sorted(set(v for v in weight_map.values() if isinstance(v, str)))
    missing = [s for s in shards if not os.path.isfile(os.path.join(model_path, s))]
    summary = IndexSummary(file=INDEX_NAME, total_size=total, weight_map_entries=len(weight_map), shards=shards,
                           missing_shards=missing)
    if missing:
        return summary, _err("missing-shard", "%s names %d shard(s) that are not in the directory, e.g. %s"
                             % (INDEX_NAME, len(missing), missing[0]), path)
    return summary, None

