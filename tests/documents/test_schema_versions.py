"""A schema change without a version bump fails here.

Every schema is regenerated from the models and compared with the committed file; the
committed ``VERSIONS`` records the sha256 of each (name, version). A changed schema needs a
new version in the model's ``SCHEMA`` (``introspect.x/v2``) and a regenerated file:
``python -m introspect.documents.export``.
"""

from __future__ import annotations

import pytest

from introspect.documents import DOCUMENTS
from introspect.documents.export import (
    SCHEMAS_DIR,
    VERSIONS_FILE,
    digest,
    file_name,
    read_versions,
    schema_text,
)

REGEN = "python -m introspect.documents.export"


def stale(name: str, version: str, text: str, recorded: dict[tuple[str, str], str]) -> str | None:
    """Why the generated schema ``text`` of ``name``/``version`` is not the one recorded, or None."""
    sha = recorded.get((name, version))
    if sha is None:
        return f"{name} {version}: not recorded in {VERSIONS_FILE.name}; run: {REGEN}"
    if sha != digest(text):
        return (f"the schema of introspect.{name}/{version} changed but its version did not: bump the version "
                f"in the model's SCHEMA (e.g. /v{int(version.lstrip('v')) + 1}), then run: {REGEN}")
    return None


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_schema_matches_its_recorded_version(name: str) -> None:
    version = DOCUMENTS[name].schema_version()
    text = schema_text(name)
    problem = stale(name, version, text, read_versions())
    assert problem is None, problem
    committed = SCHEMAS_DIR / file_name(name)
    assert committed.is_file() and committed.read_text(encoding="utf-8") == text, \
        f"{committed} is not the generated schema; run: {REGEN}"


def test_a_changed_schema_without_a_bump_is_caught() -> None:
    recorded = read_versions()
    text = schema_text("cache")
    assert stale("cache", "v1", text, recorded) is None
    problem = stale("cache", "v1", text.replace('"entries"', '"entry_count"'), recorded)
    assert problem is not None and "bump the version" in problem and REGEN in problem
    assert "not recorded" in (stale("cache", "v2", text, recorded) or "")


def test_no_stray_schema_files() -> None:
    expected = {file_name(name) for name in DOCUMENTS}
    assert {p.name for p in SCHEMAS_DIR.glob("*.json")} == expected
