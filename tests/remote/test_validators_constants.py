"""A bare NaN / Infinity in config.json, probe to profile: read as transformers reads it.

transformers reads config.json with a plain ``json.loads`` (configuration_utils.py
PreTrainedConfig._dict_from_json_file, line 1137), so ``[0.0, Infinity]`` is a float there; real
configs carry it (Mamba2Config / NemotronHConfig default ``time_step_limit`` to ``(0.0, inf)``,
configuration_nemotron_h.py line 126, which transformers 4 wrote as ``[0.0, Infinity]``:
nvidia/Nemotron-H-8B-Base-8K). The probe keeps the value as a marker, the framed reply and the
printed profile stay strict JSON, the profile warns that the file is not strict JSON, and only a
key a verdict needs as a number is rejected.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from introspect.analysis.architecture.section import analyze_architecture

FAMILIES = Path(__file__).resolve().parents[1] / "data" / "families"


def _strict(text: str) -> Any:
    def refuse(name: str) -> None:
        raise AssertionError(f"non-strict JSON constant {name} in the output")

    return json.loads(text, parse_constant=refuse)


def _nemotron_h() -> dict[str, Any]:
    config = json.loads((FAMILIES / "nemotron-h-8b.json").read_text())["config"]
    config.pop("auto_map", None)  # no custom code files in the test dir
    return config


def _model(tmp_path: Path, config: dict[str, Any], tail: str) -> Path:
    """A model dir whose config.json is ``config`` plus ``tail``, raw text (``"k": Infinity``)."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(config)[:-1] + ", " + tail + "}")
    return model


def _cli(*args: str) -> tuple[int, str, str]:
    proc = subprocess.run([sys.executable, "-m", "introspect.cli.main", *args], capture_output=True, text=True,
                          timeout=120, env=os.environ | {"HF_HUB_OFFLINE": "1"})
    return proc.returncode, proc.stdout, proc.stderr


def _probe(model: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    code, out, err = _cli("probe", "--model", str(model), "--python", sys.executable, "--no-tokenizer",
                          "--no-cache", "--json", *extra)
    assert "Traceback" not in err, err[-2000:]
    return code, _strict(out)


def test_time_step_limit_infinity_is_a_warning_and_every_figure_stands(tmp_path: Path) -> None:
    config = _nemotron_h()
    code, profile = _probe(_model(tmp_path, config, '"time_step_limit": [0.0, Infinity]'),
                           "--save-raw", str(tmp_path / "raw.json"))
    assert code == 0, profile["findings"]
    clean, _ = analyze_architecture(config)
    arch = profile["architecture"]
    assert "invalid_config" not in arch
    assert arch["params"]["config_estimate"] == clean["params"]["config_estimate"]
    assert arch["layers"]["kinds"] == clean["layers"]["kinds"] and arch["kv_cache"] == clean["kv_cache"]
    [warning] = [f for f in profile["findings"] if f["code"] == "config-not-strict-json"]
    assert warning["severity"] == "warning" and warning["keys"] == ["time_step_limit[1]"]
    assert "not strict JSON" in warning["message"] and "time_step_limit[1] = Infinity" in warning["message"]
    assert not [f for f in profile["findings"] if f["severity"] == "error"]
    # The saved raw facts are strict JSON too, and rebuild the same profile offline.
    raw = _strict((tmp_path / "raw.json").read_text())
    assert raw["files"]["config"]["time_step_limit"] == [0.0, {"__json_constant__": "Infinity"}]
    code, out, err = _cli("profile", str(tmp_path / "raw.json"), "--json")
    assert code == 0, err[-2000:]
    assert [f for f in _strict(out)["findings"] if f["code"] == "config-not-strict-json"] == [warning]


def test_infinity_where_a_verdict_needs_a_number_rejects_that_key_only(tmp_path: Path) -> None:
    config = _nemotron_h()
    config.pop("num_key_value_heads")
    code, profile = _probe(_model(tmp_path, config, '"num_key_value_heads": -Infinity, "x": NaN'))
    assert code == 1
    invalid = [f for f in profile["findings"] if f["code"] == "config-invalid-value"]
    assert [(f["key"], f["value"], f["reason"]) for f in invalid] == [
        ("num_key_value_heads", "-Infinity", "not a finite number")]
    [warning] = [f for f in profile["findings"] if f["code"] == "config-not-strict-json"]
    assert warning["keys"] == ["num_key_value_heads", "x"]
    arch = profile["architecture"]
    assert arch["kv_cache"] is None and arch["attention"]["type"] is None  # what the key feeds
    assert arch["layers"]["kinds"] == {"mamba2": 24, "mlp": 24, "full_attention": 4}  # the rest stands
    assert not [f for f in profile["findings"] if f.get("code", "").startswith("files-")]
