"""Hostile files in the model dir, through the CLI on the local executor: a FIFO where a
tokenizer file belongs costs that file only; a config.json that is there but unusable is
named with its cause (never "no config.json"); a BOM-marked one is read, with the warning
that transformers will refuse it."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from tests.conftest import run_cli


def _copy(kimi_model: Path, tmp_path: Path) -> Path:
    model = tmp_path / "model"
    shutil.copytree(kimi_model, model)
    return model


def _probe(model: Path, venv: Path) -> dict:
    # The files task is the subject (the model-code witness reads config.json only, as transformers).
    result = run_cli("probe", "--model", str(model), "--venv", str(venv), "--json", "--no-tokenizer", timeout=120)
    assert result.code == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    return result.json()


def test_fifo_tokenizer_config_costs_that_file_only(kimi_model, venv_full, tmp_path):
    model = _copy(kimi_model, tmp_path)
    (model / "tokenizer_config.json").unlink()
    os.mkfifo(model / "tokenizer_config.json")
    profile = _probe(model, venv_full)
    assert not any(f["code"] == "probe-timeout" for f in profile["findings"]), profile["findings"]
    assert any("tokenizer_config.json" in f["message"] and "not a regular file" in f["message"]
               for f in profile["findings"]), [f["message"] for f in profile["findings"]]
    assert profile["architecture"]["num_layers"] == 61  # config.json's architecture survives
    assert profile["environment"]["python_version"]
    assert any(entry.get("name") == "config.json" for entry in profile["files"]["listing"])
    assert profile["tokenizer"]["vocab_size"] == 163584  # tiktoken.model still read (its specials were in the FIFO)


def test_malformed_config_is_named_with_its_position(kimi_model, venv_full, tmp_path):
    model = _copy(kimi_model, tmp_path)
    (model / "config.json").write_bytes((model / "config.json").read_bytes().rstrip() + b"\n}garbage")
    profile = _probe(model, venv_full)
    codes = [f["code"] for f in profile["findings"]]
    assert "config-missing" not in codes, codes
    named = [f["message"] for f in profile["findings"] if f["code"] == "files-malformed-json"]
    assert named and "config.json is not valid JSON: Extra data at line" in named[0] and "column 1" in named[0]


def test_bom_config_is_read_with_the_transformers_warning(kimi_model, venv_full, tmp_path):
    model = _copy(kimi_model, tmp_path)
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(config).encode())
    profile = _probe(model, venv_full)
    assert profile["architecture"]["num_layers"] == 61
    warning = [f for f in profile["findings"] if f["code"] == "files-encoding"]
    assert warning and "byte-order mark" in warning[0]["message"] and "transformers" in warning[0]["message"]
