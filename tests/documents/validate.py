"""Validate every introspect JSON document a test's CLI run prints against its committed schema.

tests/conftest.py ``run_cli`` calls :func:`check_stdout` on every run's stdout: a stdout that
parses as one JSON object whose ``schema`` starts with ``introspect.`` must validate against
introspect/schemas/<name>.<version>.json (Draft 2020-12), else the test fails with the path of
the first bad value. The validators are compiled once per session; parsing is skipped for
output that cannot be a JSON object (human text, tables).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

SCHEMAS = Path(__file__).resolve().parents[2] / "introspect" / "schemas"
PREFIX = "introspect."


@functools.cache
def validator(schema: str) -> Draft202012Validator:
    """The compiled validator of ``introspect.<name>/<version>`` (AssertionError: no schema file)."""
    name, _, version = schema.removeprefix(PREFIX).partition("/")
    path = SCHEMAS / f"{name}.{version}.json"
    assert path.is_file(), f"{schema}: no schema {path}; add its model to introspect/documents/registry.py " \
                           "and run: python -m introspect.documents.export"
    schema = json.loads(path.read_text(encoding="utf-8"))
    return Draft202012Validator(inline_refs(schema, schema.get("$defs", {})))


def inline_refs(node: Any, defs: dict[str, Any]) -> Any:
    """``node`` with every ``{"$ref": "#/$defs/X"}`` replaced by X itself: the same schema, checked
    about 1.5x faster (jsonschema resolves no reference per value). The models are not recursive."""
    if isinstance(node, list):
        return [inline_refs(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    rest = {key: inline_refs(value, defs) for key, value in node.items() if key not in ("$ref", "$defs")}
    ref = node.get("$ref")
    if not isinstance(ref, str):
        return rest
    target = inline_refs(defs[ref.removeprefix("#/$defs/")], defs)
    return {"allOf": [target], **rest} if rest else target


def check_document(document: Any) -> None:
    """Fail (AssertionError) when ``document`` is an introspect document its schema rejects."""
    if not isinstance(document, dict):
        return
    schema = document.get("schema")
    if not isinstance(schema, str) or not schema.startswith(PREFIX):
        return
    check = validator(schema)
    if next(iter(check.iter_errors(document)), None) is not None:
        error = best_match(check.iter_errors(document))  # the deepest cause, not the anyOf around it
        where = "/".join(str(p) for p in error.absolute_path) or "(top)"
        raise AssertionError(f"{schema} document does not match introspect/schemas: at {where}: "
                             f"{error.message[:500]}")


def check_stdout(stdout: str) -> None:
    """``check_document`` of a run's stdout when it is one JSON object."""
    text = stdout.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return
    try:
        document = json.loads(text)
    except ValueError:
        return  # not one JSON document (e.g. several, or JSON lines): the test itself reads it
    check_document(document)
