"""The profile says first whether ``AutoTokenizer.from_pretrained`` loads in that venv.

``tokenizer.autotokenizer`` carries the verdict (type, cause, missing packages, the message
with its true length, the fix), ``tokenizer.native`` what the layout's own library loaded
instead; the report's first tokenizer line says the verdict, and a failure is an error
(exit 1) whatever the native load managed. Real inputs: Meta's original Llama-3
``tokenizer.model`` (tiktoken text, as llama-models ships it on PyPI) probed in the pinned
venv that has tiktoken and no transformers, and the saved raw facts of real Kimi-like probes
(tests/data/golden/raw/).
"""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from introspect.analysis.profile import build_profile
from introspect.analysis.tokenizer.section import analyze_tokenizer
from introspect.analysis.tokenizer.tokenizer_autotokenizer import MESSAGE_CAP, UNRECORDED
from introspect.cli.render import tokenizer_section
from introspect.remote.facts.tokenizer.tokenizer_load import classify_error
from introspect.remote.limits import LimitExceeded
from tests.conftest import run_cli
from tests.fixtures.tokenizer_layouts import build_layout, tok_venv

RAW = Path(__file__).resolve().parents[1] / "data" / "golden" / "raw"


def _raw(name: str) -> dict[str, Any]:
    return json.loads((RAW / f"{name}.json").read_text(encoding="utf-8"))


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:  # noqa: BLE001 - a real traceback for classify_error
        return caught


def _rows(profile: dict[str, Any]) -> list[str]:
    """The Tokenizer table's rows as rendered, one string each (wide console: no wrapping)."""
    console = Console(file=io.StringIO(), width=300, color_system=None)
    console.print(tokenizer_section(profile))
    lines = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    return [" ".join(line.split()) for line in lines[1:] if line.strip()]


def _errors(profile: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in profile["findings"] if f["severity"] == "error"]


@pytest.fixture(scope="module")
def native_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One real probe: Llama-3's tiktoken tokenizer.model in a venv with tiktoken, no transformers."""
    root = tmp_path_factory.mktemp("autotokenizer-block")
    venv = tok_venv()
    model = build_layout("meta-original-tiktoken", root / "Llama-3.1-8B-original", venv)
    raw_file = root / "raw.json"
    result = run_cli("probe", "--model", str(model), "--venv", str(venv), "--json", "--no-model-code",
                     "--save-raw", str(raw_file))
    report = run_cli("profile", str(raw_file), env={"COLUMNS": "250"})
    return {"venv": venv, "result": result, "raw": json.loads(raw_file.read_text()), "report": report}


@pytest.mark.slow
def test_autotokenizer_fails_without_transformers_though_tiktoken_loads_it(native_run: dict[str, Any]) -> None:
    result, venv = native_run["result"], native_run["venv"]
    assert result.code == 1, (result.stdout[-2000:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    profile = result.json()
    tok = profile["tokenizer"]
    assert list(tok)[:2] == ["autotokenizer", "native"]  # the verdict first
    auto = tok["autotokenizer"]
    pip = f"{venv}/bin/pip install transformers"
    assert {k: auto[k] for k in ("ok", "type", "cause", "missing_packages", "message", "fix")} == {
        "ok": False, "type": "ModuleNotFoundError", "cause": "missing-package", "missing_packages": ["transformers"],
        "message": "No module named 'transformers'", "fix": pip}
    assert (auto["message_chars"], auto["message_truncated"]) == (len(auto["message"]), False)
    native = tok["native"]
    assert (native["loaded_by"], native["class"]) == ("tiktoken", "Encoding")
    # tiktoken.Encoding knows no named tokens: those come from the files (none here), never from tiktoken.
    assert {"bos", "eos", "pad", "unk", "mask", "chat_template"} <= set(native["unknown"])
    assert all(tok["sources"][fact] in ("files", None) for fact in native["unknown"])
    assert native["read"] in (None, ["tokenizer.model"])
    assert (native["note"] is None) == (native["read"] is not None and native["partial"] is not None)
    # The native load's facts still flow (the remote contract: loaded with a source).
    assert (tok["loaded"], tok["source"], tok["vocab_size"]) == (True, "tiktoken", 128000)
    # Exit 1 comes from AutoTokenizer alone, and the finding's fix is the block's.
    [error] = _errors(profile)
    assert (error["code"], error["fix"]) == ("tokenizer-loaded-without-transformers", pip)
    assert "AutoTokenizer cannot load" in error["message"] and "tiktoken (Encoding)" in error["message"]


@pytest.mark.slow
def test_the_reports_first_tokenizer_line_is_the_verdict(native_run: dict[str, Any]) -> None:
    report = native_run["report"]
    assert report.code == 1 and "Traceback" not in report.stderr
    lines = report.stdout.splitlines()
    start = lines.index("Tokenizer")
    assert " ".join(lines[start + 1].split()) == "AutoTokenizer FAILS — ModuleNotFoundError: transformers (missing-package)"
    assert " ".join(lines[start + 2].split()).startswith("native load loaded instead by tiktoken (Encoding)")
    assert f"{native_run['venv']}/bin/pip install transformers" in report.stdout  # the To fix: line


@pytest.mark.slow
def test_recorded_reads_and_partials_are_shown_and_old_raws_still_rebuild(native_run: dict[str, Any]) -> None:
    raw = copy.deepcopy(native_run["raw"])
    probe = raw["tokenizer_probe"]
    probe["read"], probe["partial"] = ["tokenizer.model"], ["special_tokens", "len"]
    profile = build_profile(raw)
    native = profile["tokenizer"]["native"]
    assert (native["read"], native["partial"], native["note"]) == (["tokenizer.model"], ["special_tokens", "len"], None)
    assert _rows(profile)[1] == "native load loaded instead by tiktoken (Encoding) from tokenizer.model — specials, len partial"

    # A raw file saved before these fields: no read, no partial, no message length.
    for key in ("read", "partial"):
        probe.pop(key)
    probe["transformers_error"].pop("message_chars", None)
    old = build_profile(raw)
    assert (old["tokenizer"]["native"]["read"], old["tokenizer"]["native"]["note"]) == (None, UNRECORDED)
    auto = old["tokenizer"]["autotokenizer"]
    assert (auto["ok"], auto["message_chars"], auto["message_truncated"]) == (False, len(auto["message"]), False)
    assert [e["code"] for e in _errors(old)] == ["tokenizer-loaded-without-transformers"]


def test_loaded_by_transformers_is_ok_with_its_class_and_version() -> None:
    profile = build_profile(_raw("kimi-k2.6-loaded"))
    auto = profile["tokenizer"]["autotokenizer"]
    assert (auto["ok"], auto["class"], auto["transformers_version"], auto["fix"]) == (
        True, "TikTokenTokenizer", "5.24.0", None)
    assert profile["tokenizer"]["native"] is None and _errors(profile) == []
    assert _rows(profile)[0] == "AutoTokenizer loads (TikTokenTokenizer, transformers 5.24.0)"


def test_missing_package_keeps_its_finding_and_the_block_names_the_same_fix() -> None:
    raw = _raw("kimi-k2.6-no-tiktoken")
    profile = build_profile(raw)
    auto = profile["tokenizer"]["autotokenizer"]
    assert (auto["ok"], auto["type"], auto["cause"], auto["missing_packages"]) == (
        False, "ImportError", "missing-package", ["tiktoken"])
    assert auto["message"] == raw["tokenizer_probe"]["error"]["message"]
    [error] = _errors(profile)
    assert (error["code"], error["fix"]) == ("missing-package", auto["fix"])  # the code stays stable
    assert auto["fix"] == "/venvs/venv_no_tiktoken/bin/pip install tiktoken"
    assert _rows(profile)[0] == "AutoTokenizer FAILS — ImportError: tiktoken (missing-package)"


def test_no_tokenizer_load_is_not_judged() -> None:
    profile = build_profile(_raw("kimi-k25-int4-8shards"))  # probed with --no-tokenizer
    auto = profile["tokenizer"]["autotokenizer"]
    assert auto["ok"] is None and "--no-tokenizer" in auto["reason"] and auto["fix"] is None
    assert _rows(profile)[0].startswith("AutoTokenizer not judged: no tokenizer load ran")


def _files_of(name: str) -> dict[str, Any]:
    return _raw(name)["tokenizer_files"]


def test_a_long_message_is_capped_with_its_true_length() -> None:
    error = classify_error(_raised(RuntimeError("x" * 10000)))
    probe = {"loaded": False, "error": error, "transformers_version": "5.24.0"}
    section, findings = analyze_tokenizer(_files_of("kimi-k2.6-loaded"), probe, config=None,
                                          target={"venv": "/v"}, remote_code_allowed=True)
    auto = section["autotokenizer"]
    assert len(auto["message"]) == MESSAGE_CAP and auto["message"].endswith("...")
    assert (auto["message_chars"], auto["message_truncated"]) == (10000, True)
    assert auto["fix"].startswith("# AutoTokenizer raised RuntimeError")
    assert [(f["severity"], f["code"], f["fix"]) for f in findings] == [("error", "tokenizer-load-failed", auto["fix"])]
    # Raw facts of an older probe: cut at the cap, no length kept: unknown, and said to be cut.
    del error["message_chars"]
    section, _ = analyze_tokenizer(_files_of("kimi-k2.6-loaded"), probe, config=None, target={"venv": "/v"},
                                   remote_code_allowed=True)
    assert (section["autotokenizer"]["message_chars"], section["autotokenizer"]["message_truncated"]) == (None, True)


def test_a_limit_gets_a_command_to_run_again() -> None:
    error = classify_error(LimitExceeded("time-limit", "the tokenizer load ran past its 120 s time budget"))
    section, findings = analyze_tokenizer({}, {"loaded": False, "error": error}, config=None,
                                          target={"venv": "/v", "model_path": "/m"}, remote_code_allowed=True)
    assert section["autotokenizer"]["fix"].startswith("introspect probe --model /m --timeout 600")
    assert [(f["severity"], f["code"]) for f in findings] == [("error", "tokenizer-time-limit")]


def test_refused_remote_code_the_user_turned_off_is_said_but_not_an_error() -> None:
    # transformers' own words when trust_remote_code is False and the dir needs its code.
    error = classify_error(_raised(ValueError(
        "The repository /m contains custom code which must be executed to correctly load the model. "
        "Please pass the argument `trust_remote_code=True` to allow custom code to be run.")))
    section, findings = analyze_tokenizer(_files_of("kimi-k2.6-no-remote-code"), {"loaded": False, "error": error},
                                          config=None, target={"venv": "/v"}, remote_code_allowed=False)
    auto = section["autotokenizer"]
    assert (auto["ok"], auto["cause"], auto["trust_remote_code"]) == (False, "remote-code-refused", False)
    assert [(f["severity"], f["code"]) for f in findings] == [("info", "remote-code-disabled")]
    # Allowed, and refused all the same: an error.
    _, findings = analyze_tokenizer(_files_of("kimi-k2.6-no-remote-code"), {"loaded": False, "error": error},
                                    config=None, target={"venv": "/v"}, remote_code_allowed=True)
    assert [(f["severity"], f["code"]) for f in findings] == [("error", "tokenizer-load-failed")]


def test_a_failure_without_a_recorded_error_is_still_an_error() -> None:
    section, findings = analyze_tokenizer({}, {"loaded": False}, config=None, target={"venv": "/v"},
                                          remote_code_allowed=True)
    assert section["autotokenizer"]["ok"] is False
    assert [(f["severity"], f["code"]) for f in findings] == [("error", "tokenizer-load-failed")]
    assert findings[0]["fix"].startswith("# ")
