"""Reading the JSON documents introspect writes (profiles, raw facts) back from a file or stdin."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from introspect.errors import InputError


def read_document(path: str, schema: str, *, what: str, hint: str) -> dict[str, Any]:
    """The ``schema`` document at ``path`` (``-`` reads stdin); an :class:`InputError` naming
    the cause, with ``hint`` as its fix, for an unreadable file or another kind of document."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"cannot read {what} from {path}: {exc}", hint=hint) from None
    if not isinstance(data, dict) or data.get("schema") != schema:
        raise InputError(f"{path} is not {what} ({schema})", hint=hint)
    return data
