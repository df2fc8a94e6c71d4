"""The typed documents read every golden profile and raw file and write it back byte for byte,
and the committed schemas accept them (and reject a document that breaks them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from introspect.documents import DOCUMENTS, document_class
from introspect.documents.profile import ProfileDocument
from introspect.documents.raw import RawDocument
from tests.conftest import REPO, run_cli
from tests.documents.validate import check_document, check_stdout

GOLDEN = REPO / "tests" / "data" / "golden"
PROFILES = sorted((GOLDEN / "profiles").glob("*.json"))
RAWS = sorted((GOLDEN / "raw").glob("*.json"))


@pytest.mark.parametrize("path", PROFILES, ids=[p.stem for p in PROFILES])
def test_golden_profile_round_trips(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    document = ProfileDocument.model_validate(json.loads(text))
    assert document.to_json() + "\n" == text  # tests/golden writes json.dumps(indent=2) + "\n"
    check_document(json.loads(text))


@pytest.mark.parametrize("path", RAWS, ids=[p.stem for p in RAWS])
def test_golden_raw_round_trips(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    document = RawDocument.model_validate(json.loads(text))
    assert document.to_json(indent=1) + "\n" == text  # tests/golden/make_raw.py writes indent=1
    check_document(json.loads(text))


def test_typed_access_and_a_stamped_document() -> None:
    """Attribute access; the CLI's ``introspect_version`` comes right after ``schema``."""
    raw = json.loads((GOLDEN / "profiles" / "real-deepseek-v3.json").read_text(encoding="utf-8"))
    stamped = {"schema": raw["schema"], "introspect_version": "0.1.0", **{k: v for k, v in raw.items() if k != "schema"}}
    document = ProfileDocument.model_validate(stamped)
    assert document.architecture.moe.routed_experts == 256
    assert document.tokenizer.autotokenizer.class_ is None
    assert list(json.loads(document.to_json()))[:3] == ["schema", "introspect_version", "target"]


def test_an_unknown_key_or_a_wrong_type_is_rejected() -> None:
    raw = json.loads(PROFILES[0].read_text(encoding="utf-8"))
    with pytest.raises(ValidationError, match="architecture.moe.surprise"):
        ProfileDocument.model_validate(raw | {"architecture": raw["architecture"] | {
            "moe": raw["architecture"]["moe"] | {"surprise": 1}}})
    with pytest.raises(AssertionError, match="at architecture/num_layers"):
        check_document(raw | {"architecture": raw["architecture"] | {"num_layers": "32"}})
    with pytest.raises(ValidationError):  # strict: "32" is not coerced to 32
        ProfileDocument.model_validate(raw | {"architecture": raw["architecture"] | {"num_layers": "32"}})


def test_the_hook_checks_only_introspect_documents() -> None:
    check_stdout("probe: ok\n")
    check_stdout('{"schema": "someone-else/v1", "x": 1}\n')
    with pytest.raises(AssertionError, match="introspect.cache/v1 document does not match"):
        check_stdout('{"schema": "introspect.cache/v1", "path": "/x"}\n')


def test_every_document_has_a_name_and_a_class() -> None:
    assert {"profile", "raw", "health", "history", "preflight", "plan", "models", "diff", "env", "cache",
            "error", "compare", "gpus"} <= set(DOCUMENTS)
    assert document_class("introspect.plan/v1") is document_class("plan")


def test_schema_command_prints_the_committed_schema() -> None:
    listed = run_cli("schema", "--list")
    assert listed.code == 0 and "introspect.profile/v1" in listed.stdout, listed.stderr
    shown = run_cli("schema", "introspect.cache/v1")
    assert shown.code == 0
    assert shown.stdout == (REPO / "introspect" / "schemas" / "cache.v1.json").read_text(encoding="utf-8")
    unknown = run_cli("schema", "nope")
    assert unknown.code == 2 and "error: no document named 'nope'" in unknown.stderr
    assert "fix: introspect schema --list" in unknown.stderr and "Traceback" not in unknown.stderr
