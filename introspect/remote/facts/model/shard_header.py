"""One safetensors shard's header, read and summarised; tensor data is never read.

Runs on the host: standard library only, Python 3.8+. A shard costs exactly two
reads: the 8-byte little-endian header length and the JSON header. Tensors are
grouped by name template (all-digit components as ``#``), dtype and shape.

Shard error types: ``truncated-header`` (file shorter than 8 bytes or than the
header it declares), ``header-too-large`` (declared length above ``max_header``:
refused without reading), ``malformed-header`` (not UTF-8, not JSON, not an
object, or entries that are not tensor descriptions), ``data-truncated`` (a
warning: data_offsets reach beyond the end of the file; the header still
counts), plus the OS error types of the readers (``not-found``, ``permission-denied``,
``symlink-loop``, ``is-a-directory``, ``os-error``).
"""

from __future__ import annotations

import json
import os
import re
import struct
from typing import Any, Dict, List, Optional, Tuple

from ...contract import DEFAULT_MAX_HEADER, ShardSummary, TensorGroup
from ...readers import json_safe, open_regular, os_error, reject_constant
from .header_scan import scan_header

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
# A run of digits after a '.' with '.', a newline or the end after it. Every line is given a
# leading '.' so that a name's first component needs no look-behind: a literal first character
# lets the regex engine skip ahead, about 6x faster over 200k names than a look-behind class.
_DOT_NUMBER = re.compile(r"\.[0-9]+(?![^.\n])")


def _templates(names: List[str]) -> Tuple[List[str], List[str]]:
    """Templates and first numbers of many names at once: two C-level regex passes over
    the joined names instead of a Python loop per tensor (200k+ in a 1T checkpoint)."""
    joined = "\n".join(names)
    if joined.count("\n") != max(0, len(names) - 1):  # a name with a newline would break the alignment
        pairs = [template_of(name) for name in names]
        return [t for t, _ in pairs], ["" if n is None else str(n) for _, n in pairs]
    templates = _DOT_NUMBER.sub(".#", "." + joined.replace("\n", "\n."))[1:].split("\n.")
    firsts = _FIRST_NUMBER.findall(joined)
    if len(templates) != len(names) or len(firsts) != len(names):  # defensive: never misalign
        pairs = [template_of(name) for name in names]
        return [t for t, _ in pairs], ["" if n is None else str(n) for _, n in pairs]
    return templates, firsts


def summarize_header(header: Dict[str, Any]) -> Dict[str, Any]:
    """Groups of (template, dtype, shape) with counts and layer ids; never raises on odd entries."""
    groups: Dict[Tuple[str, str, Tuple[int, ...]], TensorGroup] = {}
    invalid = 0
    data_end = 0
    metadata = None
    valid: List[Tuple[str, Dict[str, Any]]] = []
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
            group = groups[key] = TensorGroup(template=template, dtype=entry["dtype"], shape=list(entry["shape"]),
                                              count=0, layer_ids=set())
        group["count"] += 1
        if first:
            group["layer_ids"].add(first)
    out = []
    for key in sorted(groups):
        group = groups[key]
        group["layer_ids"] = sorted(int(n) for n in group["layer_ids"])
        out.append(group)
    return {"groups": out, "tensors": len(valid), "invalid": invalid, "data_end": data_end,
            "metadata": json_safe(metadata) if metadata is not None else None}


def parse_header(raw: bytes) -> Tuple[Optional[Dict[str, Any]], Optional[Dict[str, str]]]:
    """The JSON header bytes -> object, or a {type, message} error. Never raises."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, {"type": "malformed-header", "message": "header is not UTF-8 (byte %d)" % exc.start}
    try:
        value = json.loads(text, parse_constant=reject_constant)
    except (ValueError, RecursionError) as exc:
        return None, {"type": "malformed-header", "message": "header is not JSON: %s" % _clip(str(exc))}
    if not isinstance(value, dict):
        return None, {"type": "malformed-header",
                      "message": "header is a JSON %s, expected an object" % type(value).__name__}
    return value, None




def _scanned(raw: bytes) -> Optional[Dict[str, Any]]:
    """The regex fast path's summary (same result, a fraction of the time), or None."""
    try:
        return scan_header(raw.decode("utf-8"))
    except (UnicodeDecodeError, RecursionError):
        return None


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


# --------------------------------------------------------------------------- one shard


def _new_shard(name: str) -> ShardSummary:
    return {"file": name, "size": None, "header_len": None, "bytes_read": 0, "tensors": 0,
            "metadata": None, "error": None, "groups": []}


def read_shard(path: str, max_header: int = DEFAULT_MAX_HEADER) -> ShardSummary:
    """Read and summarise one shard's header. Never raises; never reads tensor data."""
    shard = _new_shard(os.path.basename(path))
    try:
        _read_shard(path, max_header, shard)
    except OSError as exc:
        rec = os_error(exc, path)
        shard["error"] = {"type": rec["type"], "message": rec["message"]}
    except Exception as exc:  # MemoryError, bugs: this shard only
        shard["error"] = {"type": "internal-error", "message": "%s: %s" % (type(exc).__name__, exc)}
    return shard


def _read_shard(path: str, max_header: int, shard: ShardSummary) -> None:
    with open_regular(path) as fh:
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


def _summarise_into(shard: ShardSummary, raw: bytes, data_size: int) -> None:
    summary = _scanned(raw)
    if summary is None:  # not canonical (or not even JSON): the JSON path decides
        header, err = parse_header(raw)
        if header is None:
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

