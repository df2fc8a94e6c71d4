"""Absurd or relative --model values on the local executor: a path no host can have is a
usage error (exit 2) before anything runs; a relative path names the caller's directory."""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import assert_clean_error, run_cli


def test_a_5000_character_model_path_is_a_usage_error(venv_full, tmp_path):
    result = run_cli("probe", "--model", "/" + "m" * 5000, "--venv", str(venv_full), "--json")
    assert_clean_error(result, 2, "--model is 5001 characters long")


@pytest.mark.parametrize(("spelling", "load"), [("tok", True), ("./tok", False)])
def test_relative_model_path_resolves_against_the_callers_cwd(kimi_model, venv_full, tmp_path, spelling, load):
    shutil.copytree(kimi_model, tmp_path / "tok")
    flags = [] if load else ["--no-tokenizer"]
    result = run_cli("probe", "--model", spelling, "--venv", str(venv_full), "--json", *flags, cwd=tmp_path,
                     timeout=120)
    assert "Traceback" not in result.stderr
    assert result.code in (0, 1), result.stderr[-2000:]
    profile = result.json()
    assert profile["target"]["model_path"] == str(tmp_path / "tok")
    assert profile["architecture"]["num_layers"] == 61
    if load:
        assert profile["tokenizer"]["loaded"] is True, profile["tokenizer"]["error"]  # not read as a hub id
