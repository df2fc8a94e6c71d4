"""Section ``safetensors``: every shard's header, summarised on the host; tensor data is never read.

Runs on the host under its own interpreter: standard library only, Python 3.8+.
Each shard costs exactly two reads: the 8-byte little-endian header length and
the JSON header. Shards are read in parallel threads (the work is I/O latency
on network filesystems, so threads help despite the GIL).

``collect_safetensors(model_path)`` returns (see docs/raw-facts.md)::

    {
      "index": {"file": "model.safetensors.index.json", "total_size": int | null,
                "weight_map_entries": int, "shards": [names],
                "missing_shards": [names listed by the index but absent]} | null,
      "shards": [
        {"file": "model-00001-of-000064.safetensors", "size": int, "header_len": int | null,
         "bytes_read": int,             # 8 + header_len when the header was read
         "tensors": int, "metadata": {...} | null,
         "error": null | {"type", "message"},
         "groups": [{"template": "language_model.model.layers.#.mlp.experts.#.down_proj.weight_packed",
                     "dtype": "I32", "shape": [7168, 256], "count": 384, "layer_ids": [1]}]}
      ],
      "bytes_read": int,               # sum over shards
      "tensors": int,                  # sum over shards
    }

Each shard is read by :mod:`introspect.remote.facts.model.shard_header` (its error types are
listed there), in forked workers for big checkpoints (:mod:`introspect.remote.facts.model.shard_workers`),
else in threads; the index by :mod:`introspect.remote.facts.model.index`.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import List, Optional, Tuple

from ...contract import DEFAULT_MAX_HEADER, INDEX_CAP, ErrorRecord, SafetensorsFacts, error_record, tag
from ...readers import os_error
from . import shard_workers
from .index import summarize_index
from .shard_header import read_shard

PROBE = "safetensors"
MAX_SHARDS = 10000
FORK_MIN_SHARDS = 8  # below this, one interpreter is fast enough


def _err(kind: str, message: str, path: Optional[str] = None) -> ErrorRecord:
    return error_record(kind, message, path, probe=PROBE)


def shard_files(model_path: str) -> Tuple[List[str], Optional[ErrorRecord]]:
    """Sorted ``*.safetensors`` names directly in the model dir."""
    names = []
    try:
        with os.scandir(model_path) as it:
            for entry in it:
                if entry.name.endswith(".safetensors"):
                    names.append(entry.name)
    except OSError as exc:
        return [], tag(os_error(exc, model_path), PROBE)
    except (ValueError, TypeError) as exc:  # embedded NUL byte: no such path can exist
        return [], _err("not-found", "%r: %s" % (model_path, exc), str(model_path))
    return sorted(names), None



class Pending:
    """Shards listed and workers started (see :func:`start_safetensors`)."""

    def __init__(self, paths: List[str], errors: List[ErrorRecord], forked: Optional[shard_workers.Workers],
                 listed: bool = True) -> None:
        self.paths, self.errors, self.forked, self.listed = paths, errors, forked, listed


def start_safetensors(model_path: str, *, max_header: int = DEFAULT_MAX_HEADER) -> Optional[Pending]:
    """Start the forked shard workers now (paths, listing errors, workers); None when that fails.

    Called by the model task before it starts its section threads: the workers then read
    headers from the first moment (a fork in a process without other threads is also the
    safe kind), while the index, the configs and the rest are read here.
    """
    try:
        names, err = shard_files(model_path)
        if err is not None:
            return Pending([], [err], None, listed=False)
        errors: List[ErrorRecord] = []
        if len(names) > MAX_SHARDS:
            errors.append(_err("too-many-shards", "%d safetensors files; read the first %d"
                               % (len(names), MAX_SHARDS), model_path))
            names = names[:MAX_SHARDS]
        paths = [os.path.join(model_path, n) for n in names]
        forked = shard_workers.start_workers(paths, max_header) if len(paths) >= FORK_MIN_SHARDS else None
        return Pending(paths, errors, forked)
    except Exception:  # noqa: BLE001 - collect_safetensors starts over and reports it
        return None


def collect_safetensors(model_path: str, *, max_header: int = DEFAULT_MAX_HEADER, workers: int = 8,
                        index_cap: int = INDEX_CAP, pending: Optional[Pending] = None,
                        ) -> Tuple[SafetensorsFacts, List[ErrorRecord]]:
    """Summarised headers of every shard in the model dir (workers begun by
    :func:`start_safetensors` when given). Never raises."""
    facts = SafetensorsFacts(index=None, shards=[], bytes_read=0, tensors=0)
    try:
        if pending is None:
            pending = start_safetensors(model_path, max_header=max_header)
        if pending is None:
            raise RuntimeError("the shard workers could not be started")
        return _collect(model_path, max_header, workers, index_cap, facts, pending)
    except Exception as exc:
        return facts, [_err("internal-error", "safetensors probe: %s: %s" % (type(exc).__name__, exc),
                            str(model_path))]


def _collect(model_path: str, max_header: int, workers: int, index_cap: int,
             facts: SafetensorsFacts, pending: Pending) -> Tuple[SafetensorsFacts, List[ErrorRecord]]:
    paths, errors, forked = pending.paths, list(pending.errors), pending.forked
    if not pending.listed:
        return facts, errors
    # The workers run meanwhile: the index (25 MB of JSON for a 1T checkpoint) is read here.
    facts["index"], err = summarize_index(model_path, index_cap)
    if err is not None:
        errors.append(err)
    shards = shard_workers.finish_workers(forked)
    if shards is None and paths:
        with ThreadPoolExecutor(max_workers=max(1, min(int(workers), len(paths)))) as pool:
            shards = list(pool.map(lambda p: read_shard(p, max_header), paths))
    shards = shards or []
    for i, shard in enumerate(shards):  # zip(strict=) is 3.10+; pool.map keeps order
        if shard["error"] is not None:
            errors.append(_err(shard["error"]["type"], "%s: %s" % (shard["file"], shard["error"]["message"]),
                               paths[i]))
    facts["shards"] = shards
    facts["bytes_read"] = sum(s["bytes_read"] for s in shards)
    facts["tensors"] = sum(s["tensors"] for s in shards)
    return facts, errors
