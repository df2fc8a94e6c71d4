"""Capped file readers that never raise, and the pass that keeps a reply valid JSON.

Runs on the host under its own interpreter: standard library only, Python 3.8+.
Every reader returns ``(value, error)`` instead of raising, so one bad file
becomes one reported error and never costs the other facts.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from typing import Any, Optional, Tuple

from .contract import DEFAULT_JSON_CAP, ErrorRecord, error_record


def reject_constant(name: str) -> float:
    # json accepts NaN/Infinity by default; config.json with NaN is malformed data.
    raise ValueError("non-standard JSON constant %s" % name)


def read_text_capped(path: str, cap: int = DEFAULT_JSON_CAP) -> Tuple[Optional[str], Optional[ErrorRecord]]:
    """Read a UTF-8 text file of at most ``cap`` bytes."""
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        return None, error_record(os_error_kind(exc), "%s: %s" % (path, exc.strerror or exc), path)
    if size > cap:
        return None, error_record(
            "too-large",
            "%s is %d bytes, above the %d-byte cap (raise it with --max-json-bytes)" % (path, size, cap),
            path,
        )
    try:
        with open(path, "rb") as fh:
            raw = fh.read(cap + 1)
    except OSError as exc:
        return None, error_record(os_error_kind(exc), "%s: %s" % (path, exc.strerror or exc), path)
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return None, error_record("not-utf8", "%s is not UTF-8 (byte %d)" % (path, exc.start), path)


def read_json_capped(
    path: str, cap: int = DEFAULT_JSON_CAP, want_object: bool = True
) -> Tuple[Any, Optional[ErrorRecord]]:
    """Parse a JSON file; refuse files above ``cap``, NaN, and (by default) non-objects."""
    text, err = read_text_capped(path, cap)
    if text is None:
        return None, err
    if not text.strip():
        return None, error_record("malformed-json", "%s is empty" % path, path)
    try:
        value = json.loads(text, parse_constant=reject_constant)
    except (ValueError, RecursionError) as exc:
        return None, error_record("malformed-json", "%s: %s" % (path, exc), path)
    if want_object and not isinstance(value, dict):
        return None, error_record(
            "malformed-json", "%s holds a JSON %s, expected an object" % (path, type(value).__name__), path
        )
    return value, None


def sha256_file(path: str, limit: Optional[int] = None) -> Tuple[Optional[str], Optional[ErrorRecord]]:
    """sha256 of a file (streamed). ``limit`` refuses files larger than that many bytes."""
    try:
        if limit is not None and os.path.getsize(path) > limit:
            return None, error_record("too-large", "%s is larger than %d bytes; not hashed" % (path, limit), path)
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest(), None
    except OSError as exc:
        return None, error_record(os_error_kind(exc), "%s: %s" % (path, exc.strerror or exc), path)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def json_safe(value: Any) -> Any:
    """Replace floats JSON cannot carry (NaN, inf) so the framed reply always parses."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return repr(value)
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def os_error_kind(exc: OSError) -> str:
    """The error type of an OSError: not-found, permission-denied, symlink-loop ..."""
    import errno

    if exc.errno == errno.ENOENT:
        return "not-found"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission-denied"
    if exc.errno == errno.ELOOP:
        return "symlink-loop"
    if exc.errno == errno.EISDIR:
        return "is-a-directory"
    if exc.errno == errno.ENOTDIR:
        return "not-a-directory"
    return "os-error"


def os_error(exc: OSError, path: str) -> ErrorRecord:
    """The error record of a failed OS call on ``path``."""
    return error_record(os_error_kind(exc), "%s: %s" % (path, exc.strerror or exc), path)
