"""The last guard before anything leaves the process: secrets masked in every text and document.

The patterns (URL passwords with any characters, secret query parameters, bearer tokens,
well-known token shapes) are the host's own, :mod:`introspect.remote.redaction`, so a value
the host already masked and one the controller masks read the same. On top of them, the
secrets this run itself holds: a key's passphrase read from the variable that
``passphrase_env`` names, a password found in a host spec. :func:`remember` records one
when it is read; :func:`scrub` then replaces it wherever it appears (as typed, as
``repr``/JSON escape it, percent-encoded), in every ``error:``/``fix:`` line, every JSON
document printed or written (``--output``, ``--save-raw``), the result cache and the
history database.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from typing import Any, TypeVar, cast
from urllib.parse import quote

from introspect.remote.redaction import REDACTED, is_secret_name, redact_text

__all__ = ["REDACTED", "is_secret_name", "known_password", "remember", "scrub", "scrub_document", "scrub_fields"]

T = TypeVar("T")

# Shorter known secrets are not replaced: a 3-character passphrase would turn ordinary words and
# numbers into <redacted> all over a report (a URL password that short is still masked by pattern).
MIN_KNOWN = 4

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_known: tuple[str, ...] = ()  # every form of every remembered secret, the longest first
_lock = threading.Lock()


def remember(secret: str | None) -> str | None:
    """Record a secret this run holds, so that no output shows it; returns it unchanged."""
    if isinstance(secret, str) and len(secret) >= MIN_KNOWN:
        global _known
        forms = {secret, repr(secret)[1:-1], json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1],
                 quote(secret, safe="")}
        with _lock:
            _known = tuple(sorted({*_known, *(f for f in forms if len(f) >= MIN_KNOWN)}, key=len, reverse=True))
    return secret


def known_password(spec: str) -> str | None:
    """The password of a host spec ``scheme://user:password@host`` or ``user:password@host``:
    everything from the first ``:`` to the LAST ``@``, whatever it holds (whitespace included,
    the spec being one argument), remembered; None when there is none. A URL nested in the query
    (``pct://200?via=ssh://root:pw@pve1``) is looked into by the same rule."""
    scheme = _SCHEME.match(spec)  # only at the start: a '://' further on is inside the password
    rest = spec[scheme.end():] if scheme is not None else spec
    at = rest.rfind("@")
    userinfo = rest[:at] if at > 0 else ""
    nested = _SCHEME.search(userinfo)
    if nested is not None and ":" not in userinfo[:nested.start()]:
        return known_password(rest[nested.start():])
    if ":" not in userinfo:
        return None
    return remember(userinfo.split(":", 1)[1]) or None


def scrub(text: Any) -> Any:
    """``text`` with known secrets and pattern-matched ones replaced by ``<redacted>`` (non-text as is)."""
    if not isinstance(text, str):
        return text
    for secret in _known:  # the longest first: one form may contain another
        if secret in text:
            text = text.replace(secret, REDACTED)
    return redact_text(text)


def scrub_document(value: Any) -> Any:
    """A JSON-like document with every string (keys included) scrubbed: ``value`` itself when
    nothing in it needs masking, else a copy.

    All its text is first checked in one pass, joined by newlines (no rule matches across
    whitespace, so a change there is a change in some string, and a match across the joint at
    worst costs the full walk): megabytes of raw facts are masked on every write."""
    texts = _texts(value, [])
    joined = "\n".join(texts)
    if scrub(joined) == joined:
        return value
    return _scrubbed(value)


def _texts(value: Any, out: list[str]) -> list[str]:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            _texts(key, out)
            _texts(item, out)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _texts(item, out)
    return out


def _scrubbed(value: Any) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub(key): _scrubbed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_scrubbed(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_scrubbed(item) for item in value)
    return value


def scrub_fields(item: T) -> T:
    """A copy of a dataclass instance (a check result, a notice) with its text fields scrubbed."""
    value: Any = item  # is_dataclass narrows to "T | type", which no caller passes
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: scrub_document(getattr(value, f.name)) for f in dataclasses.fields(value)
                   if f.init and isinstance(getattr(value, f.name), (str, dict, list, tuple))}
        return cast(T, dataclasses.replace(value, **changes))
    return item
