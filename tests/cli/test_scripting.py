"""Scripting contract: one JSON document on stdout (an error document on failure), schema and
version on every document, one exit-code rule, global flags anywhere, ``env``, ``--quiet``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from introspect import __version__
from introspect.analysis.profile import build_profile
from introspect.cli.main import main
from tests.conftest import run_cli
from tests.sshd_server import free_port

RAW = Path(__file__).resolve().parent.parent / "data" / "golden" / "raw"


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def error_lines(err: str) -> tuple[list[str], list[str]]:
    lines = err.splitlines()
    return [x for x in lines if x.startswith("error: ")], [x for x in lines if x.startswith("fix: ")]


def refused(tmp_path: Path) -> list[str]:
    return ["--host", "127.0.0.2", "--port", str(free_port("127.0.0.2")), "--ssh-config", "/dev/null",
            "--known-hosts", str(tmp_path / "known_hosts")]


def test_json_on_a_refused_port_is_one_error_document(capsys, tmp_path: Path) -> None:
    code, out, err = cli(capsys, "probe", "--model", "/m", "--json", *refused(tmp_path))
    assert code == 3
    doc = json.loads(out)  # exactly one document: json.loads refuses trailing data
    assert doc["schema"] == "introspect.error/v1" and doc["introspect_version"] == __version__
    assert doc["error"]["code"] == "host-unreachable" and doc["error"]["exit_code"] == 3
    assert "connection refused" in doc["error"]["message"] and doc["error"]["fix"]
    assert error_lines(err) == ([f"error: {doc['error']['message']}"], [f"fix: {doc['error']['fix']}"])


def test_debug_anywhere_keeps_the_exit_code(tmp_path: Path) -> None:
    result = run_cli("probe", "--model", "/m", *refused(tmp_path), "--debug")
    assert result.code == 3, result.stderr
    assert "Traceback" in result.stderr and "HostUnreachable" in result.stderr
    assert result.stderr.splitlines()[-2].startswith("error: ") and result.stderr.splitlines()[-1].startswith("fix: ")


def test_usage_errors_are_one_error_and_fix_and_a_document(capsys) -> None:
    code, out, err = cli(capsys, "probe", "--json")
    assert code == 2
    assert json.loads(out)["error"]["code"] == "usage-error"
    errors, fixes = error_lines(err)
    assert len(errors) == 1 and "--model" in errors[0] and fixes == ["fix: introspect probe --help"]


def test_missing_model_dir_is_one_error_no_report(capsys, tmp_path: Path) -> None:
    code, out, err = cli(capsys, "probe", "--model", str(tmp_path / "nope"), "--no-cache")
    assert code == 2 and out == ""
    assert error_lines(err) == ([f"error: model path {str(tmp_path / 'nope')!r}: not-found"],
                                ["fix: # pass --model the directory that holds config.json"])


def test_missing_venv_under_json_is_one_document_with_the_error(capsys, tmp_path: Path) -> None:
    code, out, err = cli(capsys, "probe", "--model", str(tmp_path), "--venv", str(tmp_path / "venv"), "--json",
                         "--no-cache")
    assert code == 2
    doc = json.loads(out)  # the profile with what was gathered, and the error that stopped the run
    assert doc["schema"] == "introspect.profile/v1" and doc["error"]["exit_code"] == 2
    assert doc["error"]["code"] == "interpreter-error" and str(tmp_path / "venv") in doc["error"]["message"]
    errors, fixes = error_lines(err)
    assert len(errors) == 1 and len(fixes) == 1 and "--venv" in fixes[0]


def _profile_file(tmp_path: Path, name: str, edit: dict[str, Any] | None = None) -> Path:
    profile = build_profile(json.loads((RAW / "kimi-k2.6-loaded.json").read_text(encoding="utf-8")))
    profile["architecture"].update(edit or {})
    path = tmp_path / name
    path.write_text(json.dumps(profile), encoding="utf-8")
    return path


def test_every_document_carries_schema_and_version(capsys, tmp_path: Path) -> None:
    a, b = _profile_file(tmp_path, "a.json"), _profile_file(tmp_path, "b.json", {"num_layers": 62})
    code, out, _ = cli(capsys, "diff", str(a), str(b), "--json")
    assert code == 1
    doc = json.loads(out)
    assert (doc["schema"], doc["introspect_version"]) == ("introspect.diff/v1", __version__)
    code, out, _ = cli(capsys, "profile", str(RAW / "kimi-k2.6-loaded.json"), "--json")
    assert json.loads(out)["schema"] == "introspect.profile/v1" and json.loads(out)["introspect_version"]
    code, out, _ = cli(capsys, "plan", str(a), "--gpus", "8", "--gpu-mem", "141GB", "--json")
    assert json.loads(out)["schema"] == "introspect.plan/v1"
    code, out, _ = cli(capsys, "history", "--db", str(tmp_path / "absent.sqlite3"), "--json")
    assert code == 2 and json.loads(out)["schema"] == "introspect.error/v1"


def test_quiet_prints_only_errors_and_keeps_the_code(capsys) -> None:
    code, out, err = cli(capsys, "--quiet", "profile", str(RAW / "kimi-k2.6-no-tiktoken.json"))
    assert code == 1 and out == "" and err == ""
    code, out, _ = cli(capsys, "profile", str(RAW / "kimi-k2.6-no-tiktoken.json"), "--json", "--quiet")
    assert code == 1 and json.loads(out)["schema"] == "introspect.profile/v1"


def test_env_for_bug_reports_is_redacted(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_never_shown_123")
    monkeypatch.setenv("INTROSPECT_API_KEY", "sk-never-shown-456")
    code, out, _ = cli(capsys, "env", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == "introspect.env/v1" and doc["introspect"]["version"] == __version__
    assert doc["packages"]["paramiko"] and doc["packages"]["rich"] and "transformers" in doc["packages"]
    assert doc["environment"]["HF_TOKEN"] == "<set>" and doc["environment"]["INTROSPECT_API_KEY"] == "<set>"
    assert {"history database", "result cache", "known_hosts"} <= set(doc["paths"])
    code, text, _ = cli(capsys, "env")
    for shown in (out, text):
        assert "hf_never_shown_123" not in shown and "sk-never-shown-456" not in shown
    assert f"introspect {__version__}" in text and "paramiko" in text
