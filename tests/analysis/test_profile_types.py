"""The typed profile: analyze() gives dataclasses, build_profile() exactly their JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from introspect.analysis.findings import Finding, Severity, finding, make
from introspect.analysis.profile import PROFILE_SCHEMA, Profile, analyze, build_profile

RAW = sorted((Path(__file__).resolve().parents[1] / "data" / "golden" / "raw").glob("*.json"))


@pytest.mark.parametrize("path", RAW, ids=lambda p: p.stem)
def test_build_profile_is_the_json_of_analyze(path: Path) -> None:
    raw = json.loads(path.read_text())
    profile = analyze(raw)
    assert isinstance(profile, Profile) and profile.schema == PROFILE_SCHEMA
    assert all(isinstance(f, Finding) and isinstance(f.severity, Severity) for f in profile.findings)
    assert profile.to_json() == build_profile(raw)
    assert profile.has_errors == any(f["severity"] == "error" for f in build_profile(raw)["findings"])


def test_finding_json_keeps_extra_keys_after_the_four() -> None:
    item = make("error", "missing-package", "needs tiktoken", "pip install tiktoken", package="tiktoken")
    assert list(item.to_json()) == ["severity", "code", "message", "fix", "package"]
    assert finding("info", "x", "y") == {"severity": "info", "code": "x", "message": "y", "fix": None}
    with pytest.raises(ValueError):
        make("fatal", "x", "y")


def test_garbage_raw_still_gives_a_profile() -> None:
    for raw in (None, [], "text", {"files": "nope", "errors": [1, {"type": None}], "target": 3}):
        profile = build_profile(raw)  # type: ignore[arg-type]
        assert profile["schema"] == PROFILE_SCHEMA and isinstance(profile["findings"], list)
