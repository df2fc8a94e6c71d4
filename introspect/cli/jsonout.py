"""Every JSON document the CLI prints: its ``schema``, the tool's version, and errors as documents.

A script reading ``--json`` output always gets exactly one document on stdout: the
command's own (with an ``error`` member when the command failed, e.g. a probe that
kept partial facts, or one whose ``--output`` file could not be written: the computed result
is printed all the same), or ``{"schema": "introspect.error/v1", ..., "error": {code, message, fix}}``
when the command failed before it could print one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TypedDict

import click

from introspect import __version__
from introspect.cli.outcome import Notice
from introspect.cli.session import session
from introspect.errors import IntrospectError
from introspect.remote.contract import JSONObject

ERROR_SCHEMA = "introspect.error/v1"
VERSION_KEY = "introspect_version"


class ErrorObject(TypedDict):
    """The ``error`` member as printed (documents/base.py ``ErrorMember`` is its schema)."""

    code: str
    message: str
    fix: str | None
    exit_code: int
    host: str | None


def stamped(document: Mapping[str, object], schema: str | None = None) -> JSONObject:
    """``document`` (any document the CLI prints, as its JSON object) with ``schema`` and
    ``introspect_version`` as its first keys (a copy: the JSON text to print)."""
    name = schema or document.get("schema")
    if not name:
        raise ValueError("a JSON document needs a schema")  # a bug in the caller
    rest = {k: v for k, v in document.items() if k not in ("schema", VERSION_KEY)}
    return {"schema": name, VERSION_KEY: __version__, **rest}


def dumps(document: Mapping[str, object]) -> str:
    from introspect.client.documents import dumps as strict_dumps  # never NaN or Infinity

    return strict_dumps(document)


def echo_json(document: Mapping[str, object], schema: str | None = None) -> None:
    """Print one stamped document on stdout (and remember that one was printed)."""
    click.echo(dumps(stamped(document, schema)))
    session().json_printed = True


def error_code(kind: str) -> str:
    """``HostUnreachable`` -> ``host-unreachable``: a stable, greppable name of the cause."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", kind).lower()


def error_object(code: str, message: str, fix: str | None, exit_code: int, host: str | None = None) -> ErrorObject:
    """The ``error`` member: of an error document, or of a command's own document when it failed."""
    return {"code": code, "message": message, "fix": fix, "exit_code": exit_code, "host": host}


def error_of(exc: IntrospectError, exit_code: int | None = None) -> ErrorObject:
    return error_object(error_code(type(exc).__name__), exc.one_line(), exc.hint,
                        exc.exit_code if exit_code is None else exit_code, exc.host)


def with_error(document: Mapping[str, object], notices: tuple[Notice, ...], exit_code: int = 1) -> JSONObject:
    """``document`` with an ``error`` member for the first error of ``notices`` (a copy), unless it
    has one: a command that computed its result but could not save it still prints that result."""
    first = next((item for item in notices if item.level == "error"), None)
    if first is None or document.get("error"):
        return dict(document)
    code = error_code(first.kind or "error")
    return {**document, "error": error_object(code, first.text, first.hint, exit_code, first.host)}


def error_document(code: str, message: str, fix: str | None, exit_code: int,
                   host: str | None = None) -> JSONObject:
    return stamped({"error": error_object(code, message, fix, exit_code, host)}, ERROR_SCHEMA)
