"""facts.environment: interpreter facts, package versions without imports, module checks, redaction."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from introspect.remote.facts.host import environment as env_probe
from introspect.remote.facts.host.environment import collect_environment

REPO = Path(__file__).resolve().parents[2]


def _installed(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def test_interpreter_facts() -> None:
    facts, errors = collect_environment([])
    assert errors == []
    assert facts["python_version"] == ".".join(str(n) for n in sys.version_info[:3])
    assert facts["python_version_info"][:3] == list(sys.version_info[:3])
    assert facts["python_executable"] == sys.executable
    assert facts["prefix"] == sys.prefix and facts["base_prefix"] == sys.base_prefix
    assert facts["in_venv"] is (sys.prefix != sys.base_prefix)
    assert facts["implementation"] == "CPython"
    assert facts["platform"] and facts["machine"]
    assert facts["modules"] == {} and facts["missing_modules"] == []
    json.dumps(facts, allow_nan=False)  # ships as one framed JSON document


def test_package_versions_match_metadata() -> None:
    facts, _ = collect_environment([])
    assert list(facts["packages"]) == list(env_probe.PACKAGES)
    for name, version in facts["packages"].items():
        assert version == _installed(name), name


def test_modules_available_missing_and_their_distributions() -> None:
    names = ["json", "yaml", "tiktoken", "no_such_module_xyz", "PIL"]
    facts, errors = collect_environment(names)
    assert errors == []
    mods = facts["modules"]
    assert mods["json"] == {"available": True, "distribution": None, "distribution_source": None}
    assert mods["no_such_module_xyz"] == {"available": False, "distribution": "no_such_module_xyz",
                                          "distribution_source": "module-name"}
    if _installed("PyYAML"):
        assert mods["yaml"] == {"available": True, "distribution": "PyYAML", "distribution_source": "installed"}
    else:
        assert mods["yaml"]["distribution"] == "PyYAML"
    if _installed("Pillow") is None:
        assert mods["PIL"] == {"available": False, "distribution": "Pillow", "distribution_source": "static-map"}
    expected_missing = sorted(n for n in names if not mods[n]["available"])
    assert facts["missing_modules"] == expected_missing
    assert "no_such_module_xyz" in facts["missing_modules"]


def test_bad_module_names_never_raise() -> None:
    facts, errors = collect_environment(["a.b", "", "../x", "os; rm -rf /", 7, None])  # type: ignore[list-item]
    assert facts["modules"]["a.b"]["available"] is False
    assert facts["modules"][""]["available"] is False
    assert set(facts["missing_modules"]) == {"a.b", "", "../x", "os; rm -rf /"}
    assert {e["type"] for e in errors} == {"module-check-failed"}
    assert all(e["probe"] == "environment" for e in errors)


def test_distribution_map_matches_stdlib_mapping() -> None:
    """The string-split reading of top_level.txt / RECORD gives what the stdlib's
    packages_distributions gives (3.10+), for every installed distribution; asked for a few
    names, it gives exactly those entries."""
    ours = env_probe.installed_distributions()
    native = importlib.metadata.packages_distributions()
    assert {k: sorted(v) for k, v in ours.items()} == {k: sorted(set(v)) for k, v in native.items()}
    wanted = {"yaml", "jinja2", "pytest", "no_such_module_xyz"}
    assert env_probe.installed_distributions(wanted) == {k: v for k, v in ours.items() if k in wanted}


def test_checks_import_nothing() -> None:
    """Versions and availability come from metadata and find_spec: no package is imported."""
    script = (
        "import sys, json\n"
        "from introspect.remote.facts.host import environment as env_probe\n"
        "before = set(sys.modules)\n"
        "env_probe.collect_environment(['tiktoken', 'transformers', 'yaml', 'jinja2'])\n"
        "new = set(sys.modules) - before\n"
        "print(json.dumps(sorted(m for m in new if m.split('.')[0] in "
        "('tiktoken', 'transformers', 'yaml', 'jinja2', 'torch', 'tokenizers'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=60)
    assert json.loads(out.stdout) == []


def test_env_vars_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = {
        "HF_TOKEN": "hf_secret_value_1",
        "HUGGING_FACE_HUB_TOKEN": "hf_secret_value_2",
        "VLLM_API_KEY": "secret_value_3",
        "HF_HUB_ACCESS_THING": "secret_value_4",
        "SGLANG_DB_PASSWORD": "secret_value_5",
        "CUDA_Secret_x": "secret_value_6",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HF_HOME", "/data/hf")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "/tmp/tk")
    monkeypatch.setenv("HF_ENDPOINT", "https://user:secret_value_7@mirror.example/hf")
    monkeypatch.setenv("UNRELATED_VARIABLE", "not shown")
    facts, _ = collect_environment([])
    env = facts["env_vars"]
    for name in secrets:
        assert env[name] == "<redacted>", name
    assert env["HF_HOME"] == "/data/hf"
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1"
    # The rule is by name, without exceptions: TIKTOKEN contains "token".
    assert env["TIKTOKEN_CACHE_DIR"] == "<redacted>"
    assert env["HF_ENDPOINT"] == "https://<redacted>@mirror.example/hf"
    assert env["PATH"] == os.environ["PATH"]
    assert "UNRELATED_VARIABLE" not in env
    assert "secret_value" not in json.dumps(facts)


def test_is_secret_name() -> None:
    for name in ("HF_TOKEN", "aws_secret", "Password", "SSH_KEY", "AccessId", "MY_CREDENTIALS"):
        assert env_probe.is_secret_name(name)
    for name in ("HF_HOME", "PATH", "CUDA_VISIBLE_DEVICES"):
        assert not env_probe.is_secret_name(name)


def test_long_values_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "x" * 10000)
    facts, _ = collect_environment([])
    assert len(facts["env_vars"]["PYTHONPATH"]) < 4200
