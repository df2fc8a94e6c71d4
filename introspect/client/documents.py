"""Reading the JSON documents introspect writes (profiles, raw facts) back from a file or stdin,
and writing JSON that every strict parser accepts."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from introspect.errors import InputError
from introspect.redact import scrub_document
from introspect.remote.contract import JSONObject
from introspect.remote.readers import nesting_too_deep

# Raw facts nest a config (at most 64 levels deep on the host) a few levels down; a saved
# document deeper than this is damaged, and would hit json's recursion limit.
MAX_DOCUMENT_DEPTH = 200


def read_document(path: str, schema: str | tuple[str, ...], *, what: str, hint: str) -> JSONObject:
    """The ``schema`` document (or one of several) at ``path`` (``-`` reads stdin), as read (a user's file:
    the caller parses it into its model); an :class:`InputError` naming
    the cause, with ``hint`` as its fix, for an unreadable file or another kind of document.
    NaN / Infinity (not JSON, but Python writes them) are read as null and counted in an
    error record of the document, so the profile says so."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise InputError(f"cannot read {what} from {path}: {reason}", hint=hint) from None
    if nesting_too_deep(text, MAX_DOCUMENT_DEPTH):
        raise InputError(f"{path} is nested deeper than {MAX_DOCUMENT_DEPTH} levels: not {what}", hint=hint)
    replaced: list[str] = []
    try:
        data = json.loads(text, parse_constant=lambda name: replaced.append(name),
                          parse_float=lambda value: _finite(value, replaced))
    except (ValueError, RecursionError) as exc:
        raise InputError(f"cannot read {what} from {path}: {exc}", hint=hint) from None
    schemas = (schema,) if isinstance(schema, str) else schema
    if not isinstance(data, dict) or data.get("schema") not in schemas:
        raise InputError(f"{path} is not {what} ({', '.join(schemas)})", hint=hint)
    if replaced:
        errors = data["errors"] if isinstance(data.get("errors"), list) else []
        data["errors"] = [*errors, {"type": "non-finite-number", "probe": "document",
                                    "message": f"{path} holds {len(replaced)} NaN/Infinity value(s), "
                                               "not JSON: read as null"}]
    return data


def _finite(text: str, replaced: list[str]) -> float | None:
    value = float(text)
    if math.isfinite(value):
        return value
    replaced.append(text)  # 1e400 overflows to inf
    return None


def strict(value: Any) -> Any:
    """``value`` with NaN / Infinity replaced by null: what ``json.dumps(allow_nan=False)`` accepts."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: strict(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(item) for item in value]
    return value


def dumps(value: Any, indent: int | None = 2) -> str:
    """Strict JSON text (never NaN or Infinity) of a document introspect prints or saves,
    secrets masked (:func:`introspect.redact.scrub_document`: the guard of --json, --output, --save-raw)."""
    return json.dumps(strict(scrub_document(value)), indent=indent, allow_nan=False, default=str)
