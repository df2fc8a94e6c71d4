"""`health` judges what ``AutoTokenizer.from_pretrained`` does in the venv, as `preflight` does.

The tokenizer task falls back to the layout's own library (tiktoken here) when transformers
cannot load a directory; a data-generation pipeline calls AutoTokenizer, so that fallback is
context, never a pass. Real files only: Meta's original Llama-3 ``tokenizer.model`` (tiktoken
text) as ``llama-models`` ships it on PyPI (tests/fixtures/tokenizer_layouts.py), which
transformers converts and loads, and the same ranks as a bare ``tokenizer.tiktoken``, which
only tiktoken reads. Both commands run against one real sshd on 127.0.0.2 and the same venvs:
one without transformers, one with it.
"""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest

from introspect.checks.health import check_tokenizer
from introspect.checks.history import HistoryStore, Snapshot, drift, snapshot_from
from introspect.cli.fix_lines import is_command
from introspect.inventory import VenvEntry
from tests.conftest import CLIResult, run_cli
from tests.fixtures.tokenizer_layouts import build_layout, tok_venv
from tests.fixtures.venvs import make_venv
from tests.health.test_health_e2e import by_check, health, host_entry, write_inventory
from tests.preflight.fixtures import build_generation_marker_model

HOST = "gpu"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("autotokenizer-models")
    llama3 = build_layout("meta-original-tiktoken", root / "Llama-3.1-8B-original", tok_venv())
    bare = root / "bare-tiktoken"
    bare.mkdir()
    shutil.copyfile(llama3 / "tokenizer.model", bare / "tokenizer.tiktoken")
    empty = root / "no-tokenizer-files"
    empty.mkdir()
    (empty / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 128256}))
    return {"llama3-original": llama3, "tiktoken-only": bare, "missing-files": empty,
            "tokenizer.json": build_generation_marker_model(root / "tiny-tokenizer-json")}


# What each venv is asked to load: each kind of directory where its verdict tells something
# (a load in the venv with transformers costs a second of CPU: the suite's budget is tight).
WITHOUT = ("llama3-original",)
WITH = ("tokenizer.json", "tiktoken-only", "missing-files")


def _checks(doc: dict[str, Any], venv: Path) -> dict[str, dict[str, Any]]:
    (host,) = doc["hosts"]
    return by_check(next(v for v in host["venvs"] if v["path"] == str(venv))["checks"])


def _drift(doc: dict[str, Any], venv: Path) -> dict[str, dict[str, Any]]:
    (host,) = doc["hosts"]
    return by_check(next(v for v in host["venvs"] if v["path"] == str(venv))["drift"])


@pytest.fixture(scope="module")
def first(sshd, client_keys, models: dict[str, Path], venv_full: Path,
          tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One health run over both venvs, and preflight of every (venv, model) in that same state."""
    tmp = tmp_path_factory.mktemp("autotokenizer-health")
    toggled = make_venv(tmp / "venv", exclude={"transformers"})
    asked = {toggled: WITHOUT, venv_full: WITH}
    inventory = write_inventory(tmp / "hosts.yaml", client_keys, {HOST: host_entry(sshd, *(
        {"path": str(venv), "models": [str(models[n]) for n in names]} for venv, names in asked.items()))})
    # The drift runs check the toggled venv alone (each (host, venv) has its own snapshots), and
    # only the directory whose verdict the toggle changes.
    toggled_only = write_inventory(tmp / "toggled.yaml", client_keys, {HOST: host_entry(
        sshd, {"path": str(toggled), "models": [str(models["llama3-original"])]})})
    db = tmp / "history.sqlite3"
    run = health(inventory, db, "--json")
    preflights = {(venv, name): run_cli("preflight", "--model", str(models[name]), "--venv", str(venv),
                                        "--min-free-gb", "0", "--json", cwd=tmp)
                  for venv, names in asked.items() for name in names}
    return {"run": run, "preflight": preflights, "toggled_only": toggled_only, "db": db, "venv": toggled}


def _tokenizer_check(result: CLIResult) -> dict[str, Any]:
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    return next(c for c in result.json()["checks"] if c["name"] == "tokenizer")


@pytest.mark.ssh
def test_health_fails_and_records_a_tokenizer_only_tiktoken_loads(first, models: dict[str, Path]) -> None:
    run, venv = first["run"], first["venv"]
    assert run.code == 1 and "Traceback" not in run.stderr, (run.stdout[-3000:], run.stderr[-3000:])
    llama3 = str(models["llama3-original"])
    tok = _checks(run.json(), venv)[f"tokenizer:{llama3}"]
    assert tok["status"] == "fail", tok
    assert tok["message"].startswith(f"tiktoken loads the files of {llama3}, but AutoTokenizer fails in {venv}: "
                                     "ModuleNotFoundError: No module named 'transformers'"), tok["message"]
    assert "(missing packages: transformers)" in tok["message"]
    assert tok["fix"] == f"{venv}/bin/pip install transformers"
    assert tok["evidence"]["native"]["loaded_by"] == "tiktoken"
    assert tok["evidence"]["error"]["cause"] == "missing-package"

    run_id = run.json()["run_id"]
    with HistoryStore(first["db"], read_only=True) as store:  # that run's, whatever ran after it
        snap = store.previous_snapshot(HOST, str(venv), before_run=run_id + 1)
        assert snap is not None and snap.run_id == run_id
        assert snap.tokenizer_ok == {str(models[n]): False for n in WITHOUT}
        stored = {r.result.check: r.result for r in store.run_results(run_id) if r.venv == str(venv)}
    assert stored[f"tokenizer:{llama3}"].status == "fail"
    assert stored[f"tokenizer:{llama3}"].fix == f"{venv}/bin/pip install transformers"


@pytest.mark.ssh
def test_health_and_preflight_agree_on_every_directory(first, models: dict[str, Path], venv_full: Path) -> None:
    doc = first["run"].json()
    verdicts = {}
    for (venv, name), result in first["preflight"].items():
        flight = _tokenizer_check(result)
        checked = _checks(doc, venv)[f"tokenizer:{models[name]}"]
        verdicts[(venv == venv_full, name)] = (checked["status"], flight["status"])
        assert (checked["status"] == "fail") == (flight["status"] == "fail"), (venv, name, checked, flight)
        if checked["evidence"].get("missing_packages"):  # the same install, word for word
            assert checked["fix"] == flight["fix"], (checked, flight)
    # The matrix itself: only the tokenizer.json directory, in the venv with transformers, loads.
    assert {k: v[0] for k, v in verdicts.items()} == {
        (False, "llama3-original"): "fail",
        (True, "tokenizer.json"): "pass", (True, "tiktoken-only"): "fail", (True, "missing-files"): "fail"}
    # Where transformers is there but raises on the files, tiktoken's load is still not a pass.
    bare = _checks(doc, venv_full)[f"tokenizer:{models['tiktoken-only']}"]
    assert bare["message"].startswith(f"tiktoken loads the files of {models['tiktoken-only']}, but AutoTokenizer "
                                      f"fails in {venv_full}: ValueError"), bare["message"]
    assert bare["fix"].startswith(f"ls -la {models['tiktoken-only']}  # "), bare["fix"]


@pytest.mark.ssh
def test_installing_then_removing_transformers_is_drift_both_ways(first, models: dict[str, Path]) -> None:
    venv, inventory, db = first["venv"], first["toggled_only"], first["db"]
    llama3 = str(models["llama3-original"])
    make_venv(venv)  # transformers installed between two runs
    again = health(inventory, db, "--json")
    assert "Traceback" not in again.stderr, again.stderr[-3000:]
    assert _checks(again.json(), venv)[f"tokenizer:{llama3}"]["status"] == "pass"
    found = _drift(again.json(), venv)
    assert found["drift:tokenizer-recovered"]["status"] == "info"
    # Only the directory AutoTokenizer now loads: the tiktoken-only one still fails, unchanged.
    assert found["drift:tokenizer-recovered"]["message"] == (
        f"AutoTokenizer of {llama3} loads again on {HOST}:{venv} since the previous run")
    assert "drift:tokenizer-failing" not in found

    make_venv(venv, exclude={"transformers"})  # and removed again: tiktoken still reads the files
    gone = health(inventory, db, "--json")
    found = _drift(gone.json(), venv)
    assert found["drift:tokenizer-failing"]["status"] == "warn"
    assert found["drift:tokenizer-failing"]["message"] == (
        f"AutoTokenizer of {llama3} stopped loading on {HOST}:{venv} since the previous run")
    assert found["drift:tokenizer-failing"]["evidence"]["models"] == [llama3]
    assert "drift:tokenizer-recovered" not in found


# ----------------------------------------------------------- without a host (fast)


NATIVE = {"loaded": True, "source": "sentencepiece", "class": "SentencePieceProcessor", "len": 32000,
          "error": None, "transformers_error": {"type": "ValueError", "message": "Couldn't instantiate\nthe backend",
                                                "cause": "exception", "missing_packages": []}}


def test_a_native_load_is_a_failure_with_a_pasteable_fix() -> None:
    venv = VenvEntry(path="/opt/v", models=("/m",), remote_code=False)
    result = check_tokenizer(venv, "/m", NATIVE)
    assert result.status == "fail"
    assert result.message == ("sentencepiece loads the files of /m, but AutoTokenizer fails in /opt/v: "
                              "ValueError: Couldn't instantiate the backend (cause: exception)")
    assert result.fix == ("HF_HUB_OFFLINE=1 /opt/v/bin/python -c 'from transformers import AutoTokenizer; "
                          "print(AutoTokenizer.from_pretrained('\"'\"'/m'\"'\"', trust_remote_code=False))'"
                          "  # the full traceback, on the host")
    assert result.evidence["native"] == {"loaded_by": "sentencepiece", "class": "SentencePieceProcessor",
                                         "len": 32000, "vocab_size": None}


def test_snapshots_record_autotokenizer_and_old_rows_still_read(tmp_path: Path) -> None:
    loaded = {"loaded": True, "class": "TokenizersBackend", "error": None}
    snap = snapshot_from(HOST, "/v", {"distributions": {}}, None, {"/a": loaded, "/n": NATIVE, "/x": {}})
    assert snap.tokenizer_ok == {"/a": True, "/n": False}  # "/x" never reported: unknown, not failed
    with HistoryStore(tmp_path / "h.sqlite3") as store:
        # A run stored before this judgement wrote the same column with the same JSON shape.
        run = store.record_run(argv=["health"], started_at=1.0, finished_at=2.0, results=[],
                               snapshots=[Snapshot(HOST, "/v", True, {}, {"/a": False, "/n": True})])
        previous = store.previous_snapshot(HOST, "/v")
    assert previous == Snapshot(HOST, "/v", True, {}, {"/a": False, "/n": True}, run)
    found = {r.check: r for r in drift(previous, snap)}
    assert found["drift:tokenizer-failing"].evidence["models"] == ["/n"]
    assert found["drift:tokenizer-recovered"].evidence["models"] == ["/a"]
    assert found["drift:tokenizer-recovered"].message == f"AutoTokenizer of /a loads again on {HOST}:/v since the previous run"


@pytest.mark.parametrize("error", [
    {"type": "timeout", "message": "killed after 120s", "cause": "timeout"},
    {"type": "ValueError", "message": "needs its own code", "cause": "remote-code-refused"},
    {"type": "ValueError", "message": "no tokenizer files", "cause": "missing-files"},
    {"type": "ImportError", "message": "cannot import name 'x'", "cause": "incompatible-code"},
    {"type": "OSError", "message": "tokenizer.json links out of the model directory", "cause": "link-outside"},
    {"type": "RuntimeError", "message": "boom", "cause": "exception"},
])
def test_every_tokenizer_fix_is_a_command_to_paste(error: dict[str, Any]) -> None:
    venv = VenvEntry(path="/opt/my venv", models=("/models/a b",))
    result = check_tokenizer(venv, "/models/a b", {"loaded": False, "transformers_version": "5.24.0",
                                                   "error": {**error, "missing_packages": []}})
    assert result.status == "fail" and result.fix is not None
    assert is_command(result.fix) and shlex.split(result.fix, comments=True), result.fix
    assert "'/models/a b'" in result.fix or "'/opt/my venv/bin/" in result.fix, result.fix
    assert f"{error['type']}: {error['message']} (cause: {error['cause']})" in result.message


def test_a_long_error_is_one_line_with_its_length() -> None:
    venv = VenvEntry(path="/v", models=("/m",))
    message = "line one\n" + "x" * 1000
    result = check_tokenizer(venv, "/m", {"loaded": False, "error": {"type": "ValueError", "message": message}})
    assert "\n" not in result.message and "(+609 more characters in the evidence)" in result.message
    assert result.evidence["error"]["message"] == message
