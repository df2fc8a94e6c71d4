"""The local result cache: a repeated probe of an unchanged model is served after one round trip."""

from __future__ import annotations

import os

import pytest

from tests.conftest import run_cli, ssh_flags
from tests.inprocess import run_main

pytestmark = pytest.mark.ssh


def test_cache_hit_then_invalidated_by_changes(sshd, client_keys, kimi_model, venv_full, tmp_path):
    import shutil

    model = tmp_path / "model"
    shutil.copytree(kimi_model, model)
    env = {"INTROSPECT_CACHE_DIR": str(tmp_path / "cache")}
    # The model-code witness is left out (about 2 CPU-s a run, seven runs): its facts ride in the entry
    # as the tokenizer's do; a run with it served from the cache is in tests/e2e/test_input_defaults.py
    # (test_user_config_local_interpreter_cache_hit_and_cache_commands).
    # Seven runs through main() in this process (tests/inprocess.py): the cache is the subject, not
    # the CLI's imports (~1.5 CPU-s a run in a subprocess).
    args = ["probe", *ssh_flags(sshd, client_keys), "--model", str(model), "--venv", str(venv_full), "--json",
            "--no-model-code"]

    cold = run_main(*args, env=env)
    assert cold.code == 0, cold.stderr
    assert cold.json()["cache"] == {"hit": False}

    warm = run_main(*args, env=env)
    assert warm.code == 0
    warm_profile, cold_profile = warm.json(), cold.json()
    assert warm_profile["cache"]["hit"] is True
    for section in ("architecture", "tokenizer", "environment", "findings"):
        assert warm_profile[section] == cold_profile[section], section

    # --refresh and the invalidations are the entry's and its fingerprint's, whatever the probe
    # loaded: they run without the tokenizer load (~2 CPU-s a run), under that probe's own key
    # (the options are part of it), first stored and served once so that each miss below is one.
    files_only = [*args, "--no-tokenizer"]
    stored = run_main(*files_only, env=env).json()
    assert stored["cache"] == {"hit": False}
    sha = cold_profile["tokenizer"]["chat_template"]["sha256"]
    assert stored["tokenizer"]["chat_template"]["sha256"] == sha  # the file's, with the load or without
    assert run_main(*files_only, env=env).json()["cache"]["hit"] is True
    assert run_main(*files_only, "--refresh", env=env).json()["cache"] == {"hit": False}

    # Any change to a file the profile was built from invalidates the entry.
    config = model / "chat_template.jinja"
    config.write_text(config.read_text() + "\n")
    changed = run_main(*files_only, env=env).json()
    assert changed["cache"] == {"hit": False}
    assert changed["tokenizer"]["chat_template"]["sha256"] != sha

    # A package added to the venv invalidates it too.
    site = next((venv_full / "lib").glob("python3*/site-packages"))
    marker = site / "introspect_cache_test_pkg"
    marker.mkdir()
    try:
        assert run_main(*files_only, env=env).json()["cache"] == {"hit": False}
    finally:
        os.rmdir(marker)


def test_failed_runs_are_not_cached(kimi_model, venv_no_tiktoken, tmp_path):
    env = {"INTROSPECT_CACHE_DIR": str(tmp_path / "cache")}
    missing = run_cli("probe", "--model", str(tmp_path / "nope"), "--venv", str(venv_no_tiktoken), "--json",
                      env=env)
    assert missing.code == 2
    assert not list((tmp_path / "cache").glob("*.json"))
