"""Golden tests: the profile JSON and the remote model facts stay the same while code moves.

See tests/golden/cases.py for the cases and how to regenerate (only for intended changes).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from introspect.analysis.profile import build_profile
from introspect.transport.local import LocalExecutor
from tests.golden.cases import FIXTURES, GOLDEN, build_fixture, config_cases, dumps, remote_facts_stable

REGEN = os.environ.get("INTROSPECT_REGEN_GOLDEN") == "1"
RAW_FILES = sorted((GOLDEN / "raw").glob("*.json"))


def check(path: Path, text: str) -> None:
    if REGEN:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"no golden file {path}; regenerate with INTROSPECT_REGEN_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), f"output differs from {path}"


@pytest.mark.parametrize("name", sorted(config_cases()))
def test_profile_of_config_unchanged(name: str) -> None:
    raw = config_cases()[name]
    check(GOLDEN / "profiles" / f"{name}.json", json.dumps(build_profile(raw), indent=2) + "\n")


@pytest.mark.parametrize("raw_file", RAW_FILES, ids=[p.stem for p in RAW_FILES])
def test_profile_of_saved_raw_unchanged(raw_file: Path) -> None:
    """Raw facts saved from real probes of the fixtures (tokenizer loaded, fallback, shards)."""
    raw = json.loads(raw_file.read_text(encoding="utf-8"))
    check(GOLDEN / "profiles" / f"raw-{raw_file.stem}.json", json.dumps(build_profile(raw), indent=2) + "\n")


def test_saved_raw_cases_exist() -> None:
    names = {p.stem for p in RAW_FILES}
    assert {"kimi-k2.6-loaded", "kimi-k2.6-no-tiktoken", "kimi-k25-int4-8shards"} <= names


@pytest.mark.parametrize("fixture", FIXTURES)
def test_remote_model_facts_unchanged(fixture: str, tmp_path: Path) -> None:
    model = build_fixture(fixture, tmp_path)
    with LocalExecutor() as executor:
        reply = executor.run_python(sys.executable, "model", {"model_path": str(model)}, timeout=120)
    assert isinstance(reply.facts, dict)
    check(GOLDEN / "remote" / f"{fixture}.json", dumps(remote_facts_stable(reply.facts, model)))
