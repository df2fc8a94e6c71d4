"""Calls into a loaded tokenizer (or its model's code) that keep a failure as data.

Runs on the host: standard library only, Python 3.8+. A tokenizer property or
method may raise anything; each fact is fetched through one of these so that one
failure costs that fact only.
"""

from __future__ import annotations

from typing import Any, Callable, Dict


def exception_record(exc: BaseException) -> Dict[str, Any]:
    """``{"type", "message"}`` of an exception, the message cut at 500 characters."""
    message = str(exc)
    return {"type": type(exc).__name__, "message": message if len(message) <= 500 else message[:497] + "..."}


def safe_get(get: Callable[[], Any]) -> Any:
    """``get()``, or ``{"error": {"type", "message"}}`` when it raises."""
    try:
        return get()
    except Exception as exc:  # noqa: BLE001 - one fact lost, the others stand
        return {"error": exception_record(exc)}


def value_or_error(get: Callable[[], Any]) -> Any:
    """``get()`` as JSON (str, int, list or null; anything else as its str), or ``{"error": "Type: message"}``."""
    try:
        value = get()
    except Exception as exc:  # noqa: BLE001
        return {"error": "%s: %s" % (type(exc).__name__, str(exc)[:200])}
    if isinstance(value, (str, int, list)) or value is None:
        return value
    return str(value)
