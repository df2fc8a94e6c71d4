"""The family table against the cases: every row has a real config, and no known family is "unknown".

A row of introspect.analysis.architecture.families is a claim that introspect understands that
model_type; the claim is held to at least one real public config, either a case in
tests/data/families (with its source) or a folder in tests/data/realconfigs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from introspect.analysis.architecture.config_view import unwrap
from introspect.analysis.architecture.families import FAMILIES, UNKNOWN, family_of
from introspect.analysis.architecture.mixers import MIXERS
from introspect.analysis.architecture.section import analyze_architecture

DATA = Path(__file__).resolve().parents[1] / "data"


def _configs() -> dict[str, dict[str, Any]]:
    out = {f"families/{p.name}": json.loads(p.read_text())["config"] for p in sorted((DATA / "families").glob("*.json"))}
    for folder in sorted((DATA / "realconfigs").iterdir()):
        if (folder / "config.json").is_file():
            out[f"realconfigs/{folder.name}"] = json.loads((folder / "config.json").read_text())
    return out


def _types(config: dict[str, Any]) -> set[str]:
    """The wrapper's and the text model's model_type."""
    text, _ = unwrap(config)
    return {t for t in (config.get("model_type"), text.get("model_type")) if isinstance(t, str)}


CONFIGS = _configs()
COVERED = {t for config in CONFIGS.values() for t in _types(config)}


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_every_row_has_a_real_config(model_type: str) -> None:
    assert model_type in COVERED, (
        f"family row {model_type!r} has no case: add tests/data/families/<model>.json (a real public config "
        "with its source and facts) or a tests/data/realconfigs folder")


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_every_row_names_its_upstream_code(model_type: str) -> None:
    assert FAMILIES[model_type].upstream.strip()


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_no_known_family_is_called_unknown(name: str) -> None:
    config = CONFIGS[name]
    _, findings = analyze_architecture(config, config_path=f"{name}/config.json")
    codes = [f["code"] for f in findings]
    if _types(config) & set(FAMILIES):
        assert "unknown-family" not in codes, findings
    else:
        assert "unknown-family" in codes or "ssm_cfg" in config, findings


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_a_bare_config_of_every_row_is_known(model_type: str) -> None:
    """The table alone decides: even a config with only the family's name is not unknown."""
    arch, findings = analyze_architecture({"model_type": model_type, "num_hidden_layers": 2, "hidden_size": 64})
    codes = [f["code"] for f in findings]
    assert "unknown-family" not in codes and "analysis-failed" not in codes, findings
    assert arch["num_layers"] == 2


def test_unknown_model_type_gets_the_finding() -> None:
    assert family_of("no_such_family").known is False and family_of(None) is UNKNOWN
    _, findings = analyze_architecture({"model_type": "no_such_family", "num_hidden_layers": 2, "hidden_size": 64})
    assert "unknown-family" in [f["code"] for f in findings]


def test_rows_name_only_known_mixers() -> None:
    for row in FAMILIES.values():
        assert row.recurrent is None or row.recurrent in MIXERS, row
        assert not row.ssm_only or row.recurrent is not None, row
