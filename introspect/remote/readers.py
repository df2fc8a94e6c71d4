"""Capped file readers that never raise, and the pass that keeps a reply valid JSON.

Runs on the host under its own interpreter: standard library only, Python 3.8+.
Every reader returns ``(value, error)`` instead of raising, so one bad file
becomes one reported error and never costs the other facts.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import math
import os
import re
import stat
from typing import Any, Dict, Optional, Tuple

from . import confine
from .contract import DEFAULT_JSON_CAP, ErrorRecord, error_record

# Nesting levels a probed JSON file may have. Real configs and tokenizer files stay under
# ten; the cap keeps json's recursive decoder (RecursionError near 1000) far away on both
# sides of the wire, since the controller decodes the same data again.
MAX_JSON_DEPTH = 64

# transformers reads config.json with open(encoding="utf-8") and json.loads: a UTF-8 BOM
# fails there ("Unexpected UTF-8 BOM"), UTF-16 fails to decode. We decode both to keep
# the facts, and say that transformers will refuse the file.
_BOMS = (("utf-8-sig", b"\xef\xbb\xbf", "UTF-8 with a byte-order mark"),
         ("utf-16", b"\xff\xfe", "UTF-16 (little-endian, with a BOM)"),
         ("utf-16", b"\xfe\xff", "UTF-16 (big-endian, with a BOM)"))
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_BRACKETS = re.compile(r"[\[\]{}]")


class NotRegularFile(OSError):
    """A FIFO, socket or device where a file was expected: never opened for reading."""


# transformers reads config.json with a plain json.loads (configuration_utils.py
# PreTrainedConfig._dict_from_json_file, line 1137), whose default parse_constant makes a bare
# NaN, Infinity or -Infinity a float. Real configs carry them: Mamba2Config, NemotronHConfig,
# BambaConfig, FalconH1Config and GraniteMoeHybridConfig default time_step_limit to (0.0, inf),
# which transformers 4's json.dumps wrote as [0.0, Infinity] (nvidia/Nemotron-H-8B-Base-8K). Such a
# file is read as transformers reads it; the value travels as {JSON_CONSTANT_KEY: "Infinity"}, so
# the reply stays strict JSON and the controller can name the key (analysis/architecture/config_checks.py).
# transformers 5 itself writes {"__float__": "Infinity"} (configuration_utils.py to_json_string, line 1329).
JSON_CONSTANT_KEY = "__json_constant__"
# The files read that way, by name; any other file (tokenizer.json is read by the tokenizers
# library's serde_json, which refuses the constants) keeps refusing them as malformed.
CONSTANT_FILES = ("config.json",)


def reject_constant(name: str) -> float:
    # json accepts NaN/Infinity by default; outside CONSTANT_FILES that is malformed data.
    raise ValueError("non-standard JSON constant %s" % name)


def keep_constant(name: str) -> Dict[str, str]:
    """The marker a bare NaN / Infinity / -Infinity of a CONSTANT_FILES file travels as."""
    return {JSON_CONSTANT_KEY: name}


def open_regular(path: str) -> "io.BufferedReader":
    """Open a regular file for binary reading, never blocking: a FIFO named config.json would
    hang a plain open() forever, a device could have side effects, so only S_ISREG is read. A path
    under a confined model dir that resolves outside it is refused (confine.LinkOutside)."""
    confine.check(path)
    mode = os.stat(path).st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory")
    if not stat.S_ISREG(mode):
        raise NotRegularFile(errno.EINVAL, "not a regular file (a FIFO, socket or device)")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped for a FIFO between stat and open
            raise NotRegularFile(errno.EINVAL, "not a regular file (a FIFO, socket or device)")
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def decode_text(raw: bytes) -> Tuple[Optional[str], Optional[str], Optional[int]]:
    """``(text, warning, bad_byte)``: UTF-8 as transformers reads it; a BOM-marked file is
    decoded anyway with a warning; ``bad_byte`` is the offset of an undecodable byte."""
    for codec, bom, label in _BOMS:
        if raw.startswith(bom):
            try:
                text = raw.decode(codec)
            except UnicodeDecodeError as exc:
                return None, None, exc.start
            return text.lstrip("\ufeff"), "is %s; transformers reads it as plain UTF-8 and refuses it" % label, None
    try:
        return raw.decode("utf-8"), None, None
    except UnicodeDecodeError as exc:
        return None, None, exc.start


def read_bytes_capped(path: str, cap: int = DEFAULT_JSON_CAP) -> Tuple[Optional[bytes], Optional[ErrorRecord]]:
    """The bytes of a regular file of at most ``cap`` bytes."""
    try:
        confine.check(path)  # before the size: a link out is named as such, its target not even sized
        size = os.path.getsize(path)
        if size > cap:
            return None, error_record(
                "too-large",
                "%s is %d bytes, above the %d-byte cap (raise it with --max-json-bytes)" % (path, size, cap),
                path,
            )
        with open_regular(path) as fh:
            return fh.read(cap + 1), None
    except OSError as exc:
        return None, os_error(exc, path)


def read_text_capped(path: str, cap: int = DEFAULT_JSON_CAP) -> Tuple[Optional[str], Optional[ErrorRecord]]:
    """Read a UTF-8 text file of at most ``cap`` bytes (a BOM-marked file is decoded too)."""
    raw, err = read_bytes_capped(path, cap)
    if raw is None:
        return None, err
    text, _warning, bad = decode_text(raw)
    if text is None:
        return None, error_record("not-utf8", "%s is not UTF-8 (byte %d)" % (path, bad or 0), path)
    return text, None


def nesting_too_deep(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when JSON ``text`` nests arrays/objects deeper than ``limit``, found without recursion."""
    if text.count("[") + text.count("{") <= limit:
        return False  # the common case, decided at C speed
    depth = 0
    for match in _BRACKETS.finditer(_STRING.sub('""', text)):
        depth += 1 if match.group() in "[{" else -1
        if depth > limit:
            return True
    return False


def _position(text: str, exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        reason = exc.msg[:-3] if exc.msg.endswith(" at") else exc.msg  # "Invalid control character at"
        return "%s at line %d column %d" % (reason, exc.lineno, exc.colno)
    found = re.search(r"-?\b(?:NaN|Infinity)\b", text)
    if found is not None:
        line = text.count("\n", 0, found.start()) + 1
        column = found.start() - (text.rfind("\n", 0, found.start()) + 1) + 1
        return "%s at line %d column %d" % (exc, line, column)
    return str(exc)


def parse_json_text(text: str, path: str, want_object: bool = True, depth: int = MAX_JSON_DEPTH,
                    constants: bool = False) -> Tuple[Any, Optional[ErrorRecord]]:
    """Parse JSON text read from ``path``: not JSON (reason, line, column), too deep, wrong type.
    ``constants``: a bare NaN / Infinity / -Infinity is kept as a :func:`keep_constant` marker."""
    if not text.strip():
        return None, error_record("malformed-json", "%s is not valid JSON: the file is empty" % path, path)
    if nesting_too_deep(text, depth):
        return None, error_record("too-deep", "%s is nested deeper than %d levels; not parsed" % (path, depth), path)
    try:
        value = json.loads(text, parse_constant=keep_constant if constants else reject_constant)
    except RecursionError:
        return None, error_record("too-deep", "%s is nested too deeply to parse" % path, path)
    except ValueError as exc:
        return None, error_record("malformed-json", "%s is not valid JSON: %s" % (path, _position(text, exc)), path)
    if want_object and not isinstance(value, dict):
        return None, error_record(
            "wrong-type", "%s holds a JSON %s, expected an object" % (path, _json_type(value)), path
        )
    return value, None


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def read_json_file(
    path: str, cap: int = DEFAULT_JSON_CAP, want_object: bool = True, constants: Optional[bool] = None
) -> Tuple[Any, Optional[ErrorRecord], Optional[ErrorRecord]]:
    """``(value, error, warning)`` of a JSON file: missing, unreadable, not a regular file, too
    large, not UTF-8, too deep, not JSON (with position) and wrong top-level type are errors;
    a BOM-marked or UTF-16 file is read and comes with a warning record. ``constants`` (by
    default: the file is one of CONSTANT_FILES) keeps NaN / Infinity as markers."""
    raw, err = read_bytes_capped(path, cap)
    if raw is None:
        return None, err, None
    text, note, bad = decode_text(raw)
    if text is None:
        return None, error_record("not-utf8", "%s is not UTF-8 (byte %d)" % (path, bad or 0), path), None
    if constants is None:
        constants = os.path.basename(path) in CONSTANT_FILES
    value, err = parse_json_text(text, path, want_object, constants=constants)
    warning = error_record("encoding", "%s %s" % (path, note), path) if note and err is None else None
    return value, err, warning


def read_json_capped(
    path: str, cap: int = DEFAULT_JSON_CAP, want_object: bool = True, constants: Optional[bool] = None
) -> Tuple[Any, Optional[ErrorRecord]]:
    """Parse a JSON file; refuse files above ``cap``, deep nesting, (by default) non-objects and
    NaN / Infinity outside CONSTANT_FILES."""
    value, err, _warning = read_json_file(path, cap, want_object, constants)
    return value, err


def sha256_file(path: str, limit: Optional[int] = None) -> Tuple[Optional[str], Optional[ErrorRecord]]:
    """sha256 of a file (streamed). ``limit`` refuses files larger than that many bytes."""
    try:
        confine.check(path)
        if limit is not None and os.path.getsize(path) > limit:
            return None, error_record("too-large", "%s is larger than %d bytes; not hashed" % (path, limit), path)
        digest = hashlib.sha256()
        with open_regular(path) as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest(), None
    except OSError as exc:
        return None, os_error(exc, path)


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
    if isinstance(exc, NotRegularFile):
        return "not-a-regular-file"
    if isinstance(exc, confine.LinkOutside):
        return "link-outside"
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
    """The error record of a failed OS call on ``path``; a link out is about the link."""
    if isinstance(exc, confine.LinkOutside):
        return error_record("link-outside", str(exc.strerror), exc.link)
    return error_record(os_error_kind(exc), "%s: %s" % (path, exc.strerror or exc), path)
