"""Safetensors headers, summarised on the host; tensor data is never read.

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

Shard error types: ``truncated-header`` (file shorter than 8 bytes or than the
header it declares), ``header-too-large`` (declared length above ``max_header``:
refused without reading), ``malformed-header`` (not UTF-8, not JSON, not an
object, or entries that are not tensor descriptions), ``data-truncated`` (a
warning: data_offsets reach beyond the end of the file; the header still
counts), plus OS error types from common (``not-found``, ``permission-denied``,
``symlink-loop``, ``is-a-directory``, ``os-error``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import struct
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional, Tuple

from introspect.remote import common

PROBE = "safetensors"
DEFAULT_MAX_HEADER = 100 * 1024 * 1024  # issue 6: a larger declared header is refused
# The index of a 1T-parameter checkpoint is ~25 MB of weight_map; it is summarised
# here, never shipped, so it gets a larger cap than the shipped-JSON cap.
INDEX_CAP = 256 * 1024 * 1024
INDEX_NAME = "model.safetensors.index.json"
MAX_SHARDS = 10000

_index_cache = {}  # type: Dict[Tuple[str, int, int, int], Tuple[Any, Any]]
_index_lock = threading.Lock()


def _err(kind: str, message: str, path: Optional[str] = None) -> Dict[str, Any]:
    return common.error(kind, message, path, probe=PROBE)

# --------------------------------------------------------------------------- header summary


# An all-ASCII-digit dotted component ("model.layers.12.mlp"); \d would also take e.g. '²'.
_NUMBER = re.compile(r"(?:(?<=\.)|^)[0-9]+(?=\.|$)")


def template_of(name: str) -> Tuple[str, Optional[int]]:
    """Name template (all-digit dotted components -> '#') and the first such number.

    Runs once per tensor (200k+ for a 1T checkpoint): one compiled regex, no Python loop.
    """
    first = _NUMBER.search(name)
    if first is None:
        return name, None
    return _NUMBER.sub("#", name), int(first.group())


def _valid_shape(shape: Any) -> bool:
    if type(shape) is not list:
        return False
    for d in shape:  # a loop, not all(genexpr): this runs for every tensor
        if type(d) is not int or d < 0:
            return False
    return True


def _data_end(entry: Dict[str, Any]) -> Optional[int]:
    offsets = entry.get("data_offsets")
    if (type(offsets) is list and len(offsets) == 2 and type(offsets[0]) is int
            and type(offsets[1]) is int and 0 <= offsets[0] <= offsets[1]):
        return offsets[1]
    return None


# For names joined one per line: the first all-digit component of each line, or '' (the
# optional group keeps exactly one match per line, so results stay aligned with names).
_FIRST_NUMBER = re.compile(r"^(?:(?:[^.\n]*\.)*?([0-9]+)(?=\.|$))?[^\n]*$", re.M)
# A run of digits with '.', a newline or an end on both sides (a single-class lookaround
# is about twice as fast over 200k names as an alternation of lookbehinds).
_NUMBER_ML = re.compile(r"(?<![^.\n])[0-9]+(?![^.\n])")


def _templates(names: List[str]) -> Tuple[List[str], List[str]]:
    """Templates and first numbers of many names at once: two C-level regex passes over
    the joined names instead of a Python loop per tensor (200k+ in a 1T checkpoint)."""
    joined = "\n".join(names)
    if any("\n" in name for name in names):  # a name with a newline would break the alignment
        pairs = [template_of(name) for name in names]
        return [t for t, _ in pairs], ["" if n is None else str(n) for _, n in pairs]
    templates = _NUMBER_ML.sub("#", joined).split("\n")
    firsts = _FIRST_NUMBER.findall(joined)
    if len(templates) != len(names) or len(firsts) != len(names):  # defensive: never misalign
        pairs = [template_of(name) for name in names]
        return [t for t, _ in pairs], ["" if n is None else str(n) for _, n in pairs]
    return templates, firsts


def summarize_header(header: Dict[str, Any]) -> Dict[str, Any]:
    """Groups of (template, dtype, shape) with counts and layer ids; never raises on odd entries."""
    groups = {}  # type: Dict[Tuple[str, str, Tuple[int, ...]], Dict[str, Any]]
    invalid = 0
    data_end = 0
    metadata = None
    valid = []  # type: List[Tuple[str, Dict[str, Any]]]
    for name, entry in header.items():
        if name == "__metadata__":
            metadata = entry if isinstance(entry, dict) else None
            continue
        if type(entry) is not dict or type(entry.get("dtype")) is not str \
                or not _valid_shape(entry.get("shape")):
            invalid += 1
            continue
        end = _data_end(entry)
        if end is None:
            invalid += 1
            continue
        if end > data_end:
            data_end = end
        valid.append((name, entry))
    templates, firsts = _templates([name for name, _ in valid])
    for (_name, entry), template, first in zip(valid, templates, firsts):
        key = (template, entry["dtype"], tuple(entry["shape"]))
        group = groups.get(key)
        if group is None:
            group = groups[key] = {"template": template, "dtype": entry["dtype"],
                                   "shape": list(entry["shape"]), "count": 0, "layer_ids": set()}
        group["count"] += 1
        if first:
            group["layer_ids"].add(first)
    out = []
    for key in sorted(groups):
        group = groups[key]
        group["layer_ids"] = sorted(int(n) for n in group["layer_ids"])
        out.append(group)
    return {"groups": out, "tensors": len(valid), "invalid": invalid, "data_end": data_end,
            "metadata": common.json_safe(metadata) if metadata is not None else None}


def parse_header(raw: bytes) -> Tuple[Optional[Dict[str, Any]], Optional[Dict[str, str]]]:
    """The JSON header bytes -> object, or a {type, message} error. Never raises."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, {"type": "malformed-header", "message": "header is not UTF-8 (byte %d)" % exc.start}
    try:
        value = json.loads(text, parse_constant=common.reject_constant)
    except (ValueError, RecursionError) as exc:
        return None, {"type": "malformed-header", "message": "header is not JSON: %s" % _clip(str(exc))}
    if not isinstance(value, dict):
        return None, {"type": "malformed-header",
                      "message": "header is a JSON %s, expected an object" % type(value).__name__}
    return value, None




def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


# --------------------------------------------------------------------------- one shard


def _new_shard(name: str) -> Dict[str, Any]:
    return {"file": name, "size": None, "header_len": None, "bytes_read": 0, "tensors": 0,
            "metadata": None, "error": None, "groups": []}


def read_shard(path: str, max_header: int = DEFAULT_MAX_HEADER) -> Dict[str, Any]:
    """Read and summarise one shard's header. Never raises; never reads tensor data."""
    shard = _new_shard(os.path.basename(path))
    try:
        _read_shard(path, max_header, shard)
    except OSError as exc:
        rec = common.os_error(exc, path)
        shard["error"] = {"type": rec["type"], "message": rec["message"]}
    except Exception as exc:  # MemoryError, bugs: this shard only
        shard["error"] = {"type": "internal-error", "message": "%s: %s" % (type(exc).__name__, exc)}
    return shard


def _read_shard(path: str, max_header: int, shard: Dict[str, Any]) -> None:
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        shard["size"] = size
        head = fh.read(8)
        shard["bytes_read"] = len(head)
        if len(head) < 8:
            shard["error"] = {"type": "truncated-header",
                              "message": "file is %d bytes, shorter than the 8-byte header length" % size}
            return
        (length,) = struct.unpack("<Q", head)
        shard["header_len"] = length
        if length > max_header:
            shard["error"] = {"type": "header-too-large", "message": "declared header length %d is above the "
                              "%d-byte limit; not read" % (length, max_header)}
            return
        if length > size - 8:
            shard["error"] = {"type": "truncated-header", "message": "declared header length %d but only %d "
                              "bytes follow" % (length, size - 8)}
            return
        raw = fh.read(length)
    shard["bytes_read"] += len(raw)
    if len(raw) < length:  # the file shrank between fstat and read
        shard["error"] = {"type": "truncated-header", "message": "read %d of %d header bytes" % (len(raw), length)}
        return
    _summarise_into(shard, raw, size - 8 - length)


def _summarise_into(shard: Dict[str, Any], raw: bytes, data_size: int) -> None:
    header, err = parse_header(raw)
    if err is not None:
        shard["error"] = err
        return
    summary = summarize_header(header)
    shard["groups"] = summary["groups"]
    shard["tensors"] = summary["tensors"]
    shard["metadata"] = summary["metadata"]
    if summary["invalid"]:
        shard["error"] = {"type": "malformed-header", "message": "%d header entries are not tensor "
                          "descriptions (dtype, shape, data_offsets); skipped" % summary["invalid"]}
    elif summary["data_end"] > data_size:
        shard["error"] = {"type": "data-truncated", "message": "tensor data ends at byte %d of the data "
                          "section but the file holds %d: the shard is incomplete (interrupted download?)"
                          % (summary["data_end"], data_size)}


# --------------------------------------------------------------------------- index


def summarize_index(model_path: str, cap: int = INDEX_CAP) -> Tuple[Optional[Dict[str, Any]], Optional[Dict[str, Any]]]:
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
        return None, _tag(common.os_error(exc, path))
    key = (os.path.abspath(path), st.st_size, st.st_mtime_ns, cap)
    with _index_lock:
        cached = _index_cache.get(key)
        if cached is None:
            cached = _summarize_index(model_path, path, cap)
            _index_cache.clear()  # one model per process: keep memory flat
            _index_cache[key] = cached
    summary, err = cached
    return (dict(summary) if summary is not None else None), err


def _tag(rec: Dict[str, Any]) -> Dict[str, Any]:
    return common.tag(rec, PROBE)

def _summarize_index(model_path: str, path: str, cap: int) -> Tuple[Optional[Dict[str, Any]], Optional[Dict[str, Any]]]:
    value, err = common.read_json_capped(path, cap)
    if err is not None:
        return None, _tag(err)
    weight_map = value.get("weight_map")
    metadata = value.get("metadata")
    total = metadata.get("total_size") if isinstance(metadata, dict) else None
    if isinstance(total, bool) or not isinstance(total, int):
        total = None
    if not isinstance(weight_map, dict):
        return ({"file": INDEX_NAME, "total_size": total, "weight_map_entries": 0, "shards": [],
                 "missing_shards": []},
                _err("malformed-index", "%s has no weight_map object" % path, path))
    shards = sorted(set(v for v in weight_map.values() if isinstance(v, str)))
    missing = [s for s in shards if not os.path.isfile(os.path.join(model_path, s))]
    summary = {"file": INDEX_NAME, "total_size": total, "weight_map_entries": len(weight_map),
               "shards": shards, "missing_shards": missing}
    if missing:
        return summary, _err("missing-shard", "%s names %d shard(s) that are not in the directory, e.g. %s"
                             % (INDEX_NAME, len(missing), missing[0]), path)
    return summary, None


# --------------------------------------------------------------------------- collect


def shard_files(model_path: str) -> Tuple[List[str], Optional[Dict[str, Any]]]:
    """Sorted ``*.safetensors`` names directly in the model dir."""
    names = []
    try:
        with os.scandir(model_path) as it:
            for entry in it:
                if entry.name.endswith(".safetensors"):
                    names.append(entry.name)
    except OSError as exc:
        return [], _tag(common.os_error(exc, model_path))
    except (ValueError, TypeError) as exc:  # embedded NUL byte: no such path can exist
        return [], _err("not-found", "%r: %s" % (model_path, exc), str(model_path))
    return sorted(names), None


FORK_MIN_SHARDS = 8  # below this, one interpreter is fast enough
CHILD_DEADLINE_S = 120


def _fork_workers() -> int:
    if not hasattr(os, "fork"):
        return 0
    try:
        cpus = len(os.sched_getaffinity(0))  # what this process may really use (cgroups, taskset)
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return min(cpus, 8) if cpus > 1 else 0


def _read_in_processes(paths: List[str], max_header: int) -> Optional[List[Dict[str, Any]]]:
    """Summarise the shards in forked workers (see :func:`_start_workers`); None to fall back."""
    return _finish_workers(_start_workers(paths, max_header))


Workers = Tuple[List[str], List[List[str]], List[Tuple[int, int]]]  # paths, slices, (pid, pipe)


def _start_workers(paths: List[str], max_header: int) -> Optional[Workers]:
    """Fork workers that summarise one slice of shards each; they run while the caller goes on.

    Summarising a 1T checkpoint's ~200k header entries is pure-Python work that
    threads cannot spread over cores (the GIL). Forked children inherit the shipped
    modules (the remote code is served from memory: a spawned interpreter could not
    import it), summarise their slice and send it back as JSON over a pipe. None when
    forking is unavailable or fails: the caller then uses threads.
    """
    workers = min(_fork_workers(), len(paths))
    if workers < 2:
        return None
    slices = [paths[i::workers] for i in range(workers)]
    children = []  # type: List[Tuple[int, int]]
    try:
        for chunk in slices:
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:  # child: summarise, reply, leave without running any parent cleanup
                status = 1
                try:
                    # Bounded even if it wedged: SIGALRM's default action ends the process.
                    signal.alarm(CHILD_DEADLINE_S)
                    os.close(read_end)
                    body = json.dumps([read_shard(p, max_header) for p in chunk]).encode("utf-8")
                    with os.fdopen(write_end, "wb") as out:
                        out.write(body)
                    status = 0
                finally:
                    os._exit(status)
            os.close(write_end)
            children.append((pid, read_end))
    except OSError:
        _reap(children, kill=True)
        return None
    return paths, slices, children


def _finish_workers(handle: Optional[Workers]) -> Optional[List[Dict[str, Any]]]:
    if handle is None:
        return None
    paths, slices, children = handle
    results = []  # type: List[Any]
    try:
        for pid, read_end in children:
            with os.fdopen(read_end, "rb") as reply:
                data = reply.read()
            _, status = os.waitpid(pid, 0)
            if status != 0:
                raise ValueError("worker %d exited with status %d" % (pid, status))
            results.append(json.loads(data.decode("utf-8")))
    except (OSError, ValueError):
        _reap(children[len(results):], kill=True)
        return None
    by_path = {}  # type: Dict[str, Dict[str, Any]]
    for chunk, shards in zip(slices, results):
        by_path.update(zip(chunk, shards))
    return [by_path[p] for p in paths]


def _reap(children: List[Tuple[int, int]], kill: bool) -> None:
    for pid, read_end in children:
        try:
            os.close(read_end)
        except OSError:
            pass
        try:
            if kill:
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass


def collect_safetensors(model_path: str, *, max_header: int = DEFAULT_MAX_HEADER, workers: int = 8,
                        index_cap: int = INDEX_CAP) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    """Summarised headers of every shard in the model dir. Never raises."""
    facts = {"index": None, "shards": [], "bytes_read": 0, "tensors": 0}  # type: Dict[str, Any]
    try:
        return _collect(model_path, max_header, workers, index_cap, facts)
    except Exception as exc:
        return facts, [_err("internal-error", "safetensors probe: %s: %s" % (type(exc).__name__, exc),
                            str(model_path))]


def _collect(model_path: str, max_header: int, workers: int, index_cap: int,
             facts: Dict[str, Any]) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    errors = []  # type: List[Dict[str, Any]]
    names, err = shard_files(model_path)
    if err is not None:
        return facts, [err]
    if len(names) > MAX_SHARDS:
        errors.append(_err("too-many-shards", "%d safetensors files; read the first %d" % (len(names), MAX_SHARDS),
                           model_path))
        names = names[:MAX_SHARDS]
    paths = [os.path.join(model_path, n) for n in names]
    # Workers start first, so the index (25 MB of JSON for a 1T checkpoint) is read meanwhile.
    forked = _start_workers(paths, max_header) if len(paths) >= FORK_MIN_SHARDS else None
    facts["index"], err = summarize_index(model_path, index_cap)
    if err is not None:
        errors.append(err)
    shards = _finish_workers(forked)
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
