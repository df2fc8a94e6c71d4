"""The tokenizer section is built as the typed model (introspect/documents/profile_tokenizer.py ``Tokenizer``):
every key the section can write is a field of the profile's schema, and a raw fact the model cannot hold
is a finding, never a crash.

The raw facts are real: the saved probe of the Kimi fixture (tests/data/golden/raw), and the remote
reader (``collect_tokenizer_files``, in-process) over Mistral's own tekken.json and sentencepiece model
from the pinned mistral_common (tests/fixtures/tokenizer_layouts.py). Each profile is validated
against the committed JSON Schema (tests/documents/validate.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from introspect.analysis.profile import build_profile
from introspect.analysis.tokenizer.section import analyze_tokenizer, tokenizer_section
from introspect.documents.profile_tokenizer import Tokenizer
from introspect.remote.facts.tokenizer.tokenizer_files import collect_tokenizer_files
from tests.documents.validate import check_document
from tests.fixtures.tokenizer_layouts import build_layout, tok_venv
from tests.golden.cases import GOLDEN

LOADED = GOLDEN / "raw" / "kimi-k2.6-loaded.json"


def _raw() -> dict[str, Any]:
    return json.loads(LOADED.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def mistral_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    venv_dir = tok_venv()
    root = tmp_path_factory.mktemp("mistral")
    return {name: build_layout(name, root / name, venv_dir)
            for name in ("mistral-native-tekken", "sentencepiece-tokenizer.model")}


def test_the_section_is_the_typed_model_and_its_json_is_the_profiles() -> None:
    raw = _raw()
    section, findings = tokenizer_section(raw["tokenizer_files"], raw["tokenizer_probe"], config=None,
                                          target=raw["target"], remote_code_allowed=True)
    assert isinstance(section, Tokenizer) and section.loaded and section.from_files is not None
    assert section.class_ == raw["tokenizer_probe"]["class"] and section.autotokenizer.ok is True
    # The JSON form is the profile's section, key for key: the load time is a timing, not a fact.
    assert section.to_dict() == build_profile(raw)["tokenizer"]
    assert "load_seconds" not in section.to_dict()
    assert [f.code for f in findings] == [f["code"] for f in analyze_tokenizer(
        raw["tokenizer_files"], raw["tokenizer_probe"], config=None, target=raw["target"],
        remote_code_allowed=True)[1]]


def test_a_cut_template_keeps_its_true_sizes_in_a_valid_profile() -> None:
    raw = _raw()
    probe = raw["tokenizer_probe"]
    probe["chat_template"] = dict(probe["chat_template"], truncated=True, size=3 << 20)
    probe["sample"] = dict(probe["sample"], truncated=True, size=1 << 21)
    profile = build_profile(raw)
    check_document(profile)
    shown = profile["tokenizer"]["chat_template"]
    assert (shown["text_size"], shown["text_truncated"], shown["sample_size"], shown["sample_truncated"]) == (
        3 << 20, True, 1 << 21, True)
    # Uncut texts carry no such keys: older profiles rebuild unchanged.
    assert not {"text_size", "sample_size"} & set(build_profile(_raw())["tokenizer"]["chat_template"])


@pytest.mark.parametrize(("layout", "key", "value"), [
    ("mistral-native-tekken", "version", "v3"),
    ("sentencepiece-tokenizer.model", "model_type", "bpe"),
])
def test_a_mistral_vocabulary_names_its_format_in_a_valid_profile(
    mistral_dirs: dict[str, Path], layout: str, key: str, value: str
) -> None:
    files, errors = collect_tokenizer_files(str(mistral_dirs[layout]), json_cap=1 << 26)
    assert errors == []
    raw = dict(_raw(), tokenizer_files=files, tokenizer_probe=None)
    profile = build_profile(raw)
    check_document(profile)
    assert profile["tokenizer"]["files"][key] == value


def test_an_added_tokens_check_without_its_counts_is_a_finding_not_a_verdict() -> None:
    raw = _raw()
    raw["tokenizer_probe"]["added_tokens_check"] = {"items": [{"id": 1, "ok": False}]}
    profile = build_profile(raw)
    check_document(profile)
    assert profile["tokenizer"]["added_tokens_check"] is None
    [damaged] = [f for f in profile["findings"] if f["code"] == "raw-damaged"]
    assert "added_tokens_check has no count" in damaged["message"] and "--save-raw" in damaged["fix"]


def test_a_value_the_model_cannot_hold_costs_the_tokenizer_section_only() -> None:
    raw = _raw()
    raw["tokenizer_probe"]["class"] = 7  # a class name is a string: pydantic's strict mode refuses an int
    profile = build_profile(raw)
    check_document(profile)
    assert profile["tokenizer"]["loaded"] is False and profile["tokenizer"]["source"] == "files"
    assert any(f["code"] == "raw-damaged" and "tokenizer" in f["message"] for f in profile["findings"])
    # The rest stands (the drafter plan's mask and stop ids come from the tokenizer: they change).
    def model(document: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in document["architecture"].items() if k != "speculative"}

    assert model(profile) == model(build_profile(_raw()))
