"""The report's reader validates every saved document once into its typed model
(introspect/report/inputs.py); one of another version is an error naming the first field that does
not fit, with the command that writes this version's document as the fix."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from introspect.documents.profile import ProfileDocument
from introspect.report.inputs import live, load
from tests.conftest import REPO, assert_clean_error
from tests.report import fleet_data
from tests.report.cli import introspect

JAMBA = REPO / "tests/data/golden/profiles/real-jamba-1.5-mini.json"


@pytest.fixture(scope="module")
def jamba() -> dict[str, Any]:
    return json.loads(JAMBA.read_text())


def _write(folder: Path, name: str, document: dict[str, Any]) -> str:
    (folder / name).write_text(json.dumps(document))
    return str(folder / name)


def test_a_profile_of_another_version(tmp_path: Path, jamba: dict[str, Any]) -> None:
    """A profile written before a section existed, and one with a key this version does not know."""
    older = copy.deepcopy(jamba)
    del older["architecture"]["kv_cache"]
    newer = copy.deepcopy(jamba)
    newer["tokenizer"]["chat_template"]["roles"] = ["user", "assistant"]
    for name, document, field in (("older.json", older, "architecture.kv_cache"),
                                  ("newer.json", newer, "tokenizer.chat_template.roles")):
        path = _write(tmp_path, name, document)
        result = introspect("report", path, "-o", str(tmp_path / "r.html"))
        assert_clean_error(result, 2, f"{path}: the profile is not one this introspect reads ({field}:")
        assert "fix: introspect probe --model PATH --json -o profile.json  # a profile from this version" in result.stderr
        assert not (tmp_path / "r.html").exists()


def test_each_kind_names_itself(tmp_path: Path, jamba: dict[str, Any]) -> None:
    """A compare, a fleet and a health document that do not validate: each error says which it is."""
    health = fleet_data.health_document(1)
    health["hosts"][0]["checks"][0]["status"] = "great"  # not a status a check has
    fleet = {"schema": "introspect.fleet-profiles/v1", "model": None, "fleet": {}, "hosts": []}  # model: a path
    compare = {"schema": "introspect.compare/v1", "differs": False, "differing": [], "rows": []}  # no counts
    cases = [(health, "health run", "hosts.0.checks.0.status", "introspect health --json > health.json"),
             (fleet, "fleet document", "model", "introspect probe --all-hosts --model PATH --json > fleet.json"),
             (compare, "compare document", "counts", "introspect compare A.json B.json --json > compare.json")]
    for n, (document, words, field, command) in enumerate(cases):
        result = introspect("report", _write(tmp_path, f"{n}.json", document), "-o", str(tmp_path / "r.html"))
        assert_clean_error(result, 2, f"the {words} is not one this introspect reads ({field}:")
        assert f"fix: {command}  # a {words} from this version" in result.stderr


def test_the_pages_get_typed_masked_documents(tmp_path: Path, jamba: dict[str, Any]) -> None:
    """A saved file and a live profile alike: typed, with a token in them masked before any page reads it."""
    secret = "hf_" + "b" * 34  # an HF access token's form (tests/faults/test_secrets.py)
    leaky = copy.deepcopy(jamba)
    leaky["findings"] = [{"severity": "info", "code": "leak", "message": f"token {secret}", "fix": None}]
    saved = load(_write(tmp_path, "leaky.json", leaky))
    probed = live("gpu1:/models/jamba", leaky)
    for loaded in (saved, probed):
        assert isinstance(loaded.document, ProfileDocument) and loaded.kind == "profile"
        assert [f.message for f in loaded.document.findings] == ["token <redacted>"]
    assert saved.label == "leaky" and saved.path == str(tmp_path / "leaky.json")
    assert probed.label == "gpu1:/models/jamba" and probed.path is None
