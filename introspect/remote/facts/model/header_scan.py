"""The fast path of a safetensors header summary: canonical headers scanned by one regex.

Runs on the host: standard library only, Python 3.8+. ``json.loads`` of a 1T
checkpoint's headers builds ~200k small dicts and the summary then visits each in a
Python loop; together that is most of a file probe's time. The reference writer
(``safetensors``' Rust ``serialize``, https://github.com/huggingface/safetensors,
``safetensors/src/tensor.rs``) emits every tensor entry as
``"name":{"dtype":"BF16","shape":[..],"data_offsets":[a,b]}``, so one compiled regex
splits the header into its entries in C, and the grouping runs on the split columns
(``collections.Counter`` and ``set`` over ``zip``, also in C).

:func:`scan_header` accepts only what it can read exactly: the text must tile into
canonical entries separated by commas, plus at most one ``__metadata__`` entry; names
without escapes, unique, and each ``begin <= end``. Anything else returns None and the
caller takes the JSON path (:func:`introspect.remote.facts.model.shard_header.summarize_header`),
whose result this one equals on every header it accepts (property-tested).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from operator import gt
from typing import Any, Dict, List, Optional, Set, Tuple

from ...contract import TensorGroup
from ...readers import json_safe, reject_constant

_WS = r"[ \t\n\r]*"  # JSON's whitespace (``\s`` would also take e.g. U+00A0)
_STR = r'"([^"\\\x00-\x1f]*)"'  # a JSON string without escapes (strict: no control characters)


def _entry(ws: str) -> "re.Pattern[str]":
    """One tensor entry; numbers as digit runs (leading zeros are refused by :data:`_LEADING_ZERO`)."""
    return re.compile(
        _STR + ws + ":" + ws + r"\{" + ws + '"dtype"' + ws + ":" + ws + _STR + ws + "," + ws + '"shape"' + ws + ":"
        + ws + r"\[" + ws + "([0-9][0-9 \t\n\r,]*[0-9]|[0-9])?" + ws + r"\]" + ws + "," + ws + '"data_offsets"'
        + ws + ":" + ws + r"\[" + ws + "([0-9]+)" + ws + "," + ws + "([0-9]+)" + ws + r"\]" + ws + r"\}")


# The writer's compact form first (the regex is faster without whitespace), then any spacing.
_ENTRIES = (_entry(""), _entry(_WS))
_COLUMNS = 5  # name, dtype, shape, begin, end
_GAP = re.compile(_WS + "," + _WS)
_OPEN = re.compile(_WS + r"\{" + _WS)
_CLOSE = re.compile(_WS + r"\}" + _WS)
_SHAPE = re.compile(r"(?:[0-9]+[ \t\n\r]*,[ \t\n\r]*)*[0-9]+")  # a shape's digits and commas, well formed
_SEP = re.compile(r"[ \t\n\r,]+")
# JSON has no leading zeros ("07"): searched in the number columns joined with a ',' before each.
_LEADING_ZERO = re.compile(r",[ \t\n\r]*0[0-9]")
METADATA = "__metadata__"


def _metadata_gap(gap: str, first: bool, last: bool) -> Tuple[bool, Any]:
    """(ok, value): a gap between entries that holds the ``__metadata__`` entry and nothing else."""
    body = gap.strip(" \t\n\r")
    if not body.startswith("{" if first else ","):
        return False, None
    body = body[1:]
    if last:
        if not body.endswith("}"):
            return False, None
        body = body[:-1]
    elif not body.rstrip(" \t\n\r").endswith(","):
        return False, None
    else:
        body = body.rstrip(" \t\n\r")[:-1]
    try:
        value = json.loads("{" + body + "}", parse_constant=reject_constant)
    except (ValueError, RecursionError):
        return False, None
    if not isinstance(value, dict) or list(value) != [METADATA]:
        return False, None
    return True, value[METADATA]


def _columns(text: str, entry: "re.Pattern[str]") -> Optional[Tuple[List[List[str]], Any]]:
    """The five columns of the entries and the metadata value, or None when not canonical."""
    parts = entry.split(text)
    if len(parts) < 1 + _COLUMNS + 1:
        return None  # no tensor entry at all: the JSON path reads it
    gaps = parts[0::_COLUMNS + 1]
    metadata: Any = None
    seen_metadata = False
    last = len(gaps) - 1
    odd = [i for i in (0, last) if not (_OPEN if i == 0 else _CLOSE).fullmatch(gaps[i])]
    if any(not _GAP.fullmatch(gap) for gap in set(gaps[1:last])):  # a set: few distinct separators
        odd += [i for i in range(1, last) if not _GAP.fullmatch(gaps[i])]
    for i in odd:
        ok, value = _metadata_gap(gaps[i], i == 0, i == last)
        if not ok or seen_metadata:
            return None
        seen_metadata, metadata = True, value
    columns = [parts[c::_COLUMNS + 1] for c in range(1, _COLUMNS + 1)]
    if any(s is not None and not _SHAPE.fullmatch(s) for s in set(columns[2])):
        return None  # e.g. "[1,,2]": not JSON
    return columns, metadata


def _shape(text: Optional[str]) -> Tuple[int, ...]:
    return tuple(int(d) for d in _SEP.split(text.strip(" \t\n\r"))) if text else ()


def scan_header(text: str) -> Optional[Dict[str, Any]]:
    """The summary of :func:`shard_header.summarize_header` for a canonical header, else None."""
    # One definition of a template; imported here because shard_header imports this module.
    from .shard_header import _templates

    found = None
    for entry in _ENTRIES:
        found = _columns(text, entry)
        if found is not None:
            break
    if found is None:
        return None
    (names, dtypes, shapes, begins, ends), metadata = found
    if _LEADING_ZERO.search("," + ",".join([s for s in shapes if s] + begins + ends)):
        return None  # not JSON: the JSON path reports it
    if METADATA in names or len(set(names)) != len(names):
        return None  # JSON keeps the last of duplicate keys: let it decide
    begin_ints = list(map(int, begins))
    end_ints = list(map(int, ends))
    if any(map(gt, begin_ints, end_ints)):
        return None  # entries the JSON path counts as invalid
    templates, firsts = _templates(names)
    shape_keys = [s or "" for s in shapes]
    groups: Dict[Tuple[str, str, Tuple[int, ...]], TensorGroup] = {}
    ids: Dict[Tuple[str, str, Tuple[int, ...]], Set[str]] = {}
    parsed: Dict[str, Tuple[int, ...]] = {}
    for (template, dtype, shape_text), count in Counter(zip(templates, dtypes, shape_keys)).items():
        shape = parsed.get(shape_text)
        if shape is None:
            shape = parsed[shape_text] = _shape(shape_text)
        key = (template, dtype, shape)
        group = groups.get(key)
        if group is None:
            group = groups[key] = TensorGroup(template=template, dtype=dtype, shape=list(shape), count=0,
                                              layer_ids=[])
            ids[key] = set()
        group["count"] += count
    for template, dtype, shape_text, first in set(zip(templates, dtypes, shape_keys, firsts)):
        if first:
            ids[(template, dtype, parsed[shape_text])].add(first)
    out = []
    for key in sorted(groups):
        group = groups[key]
        group["layer_ids"] = sorted(int(n) for n in ids[key])
        out.append(group)
    return {"groups": out, "tensors": len(names), "invalid": 0, "data_end": max(end_ints),
            "metadata": json_safe(metadata) if isinstance(metadata, dict) else None}
