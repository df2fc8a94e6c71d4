"""Write the JSON Schemas of every document into introspect/schemas/ and record their digests.

Run after changing a model: ``python -m introspect.documents.export``. A schema whose content
changed needs a new version (``/v2``): tests/documents/test_schema_versions.py compares every
generated schema with the committed file and with the digest recorded in ``VERSIONS``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from introspect.documents.registry import DOCUMENTS

SCHEMAS_DIR = Path(__file__).resolve().parent.parent / "schemas"
VERSIONS_FILE = SCHEMAS_DIR / "VERSIONS"
DIALECT = "https://json-schema.org/draft/2020-12/schema"


def schema_of(name: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of document ``name`` (``profile``, ``raw``, ...)."""
    cls = DOCUMENTS[name]
    body = cls.model_json_schema(by_alias=True, mode="serialization")
    return {"$schema": DIALECT, "$id": f"https://introspect.invalid/schemas/{file_name(name)}",
            "title": cls.SCHEMA, **{k: v for k, v in body.items() if k != "title"}}


def file_name(name: str) -> str:
    return f"{name}.{DOCUMENTS[name].schema_version()}.json"


def schema_text(name: str) -> str:
    return json.dumps(schema_of(name), indent=2, sort_keys=False) + "\n"


def digest(text: str) -> str:
    """The sha256 of a schema's contract: its text without the prose of its ``description`` members.

    A reworded docstring is no new version for the consumers that validate against it; a changed
    key, type, enum or ``required`` list is.
    """
    contract = json.dumps(_without_prose(json.loads(text)), sort_keys=True)
    return hashlib.sha256(contract.encode("utf-8")).hexdigest()


def _without_prose(node: Any) -> Any:
    if isinstance(node, dict):  # a property named "description" holds an object, never a string
        return {k: _without_prose(v) for k, v in node.items() if not (k == "description" and isinstance(v, str))}
    if isinstance(node, list):
        return [_without_prose(v) for v in node]
    return node


def versions_text() -> str:
    """``<name> <version> <sha256>`` per document, one a line, sorted by name."""
    lines = [f"{name} {DOCUMENTS[name].schema_version()} {digest(schema_text(name))}" for name in sorted(DOCUMENTS)]
    return "# schema version sha256 (python -m introspect.documents.export)\n" + "\n".join(lines) + "\n"


def read_versions(path: Path = VERSIONS_FILE) -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, version, sha = line.split()
            out[(name, version)] = sha
    return out


def main() -> int:
    SCHEMAS_DIR.mkdir(exist_ok=True)
    for name in sorted(DOCUMENTS):
        (SCHEMAS_DIR / file_name(name)).write_text(schema_text(name), encoding="utf-8")
    VERSIONS_FILE.write_text(versions_text(), encoding="utf-8")
    print(f"wrote {len(DOCUMENTS)} schemas and {VERSIONS_FILE.name} to {SCHEMAS_DIR}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
