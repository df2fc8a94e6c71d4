"""``introspect compare``: a hosts x facts matrix of saved profiles and live hosts, odd values marked
in text (``*``), JSON (``odd`` lists) and CSV (``odd_columns``); ``--check`` exits 1 on a difference,
an unreachable host is a row with its error and exit 3."""

from __future__ import annotations

import copy
import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from introspect.analysis.diff.compare import FACT_KEYS, RowInput, compare_rows
from introspect.analysis.profile import build_profile
from introspect.cli.cmd_compare import _cell
from introspect.cli.main import main
from tests.cli.terminal import run_in_terminal
from tests.conftest import run_cli
from tests.sshd_server import free_port

RAW = Path(__file__).resolve().parent.parent / "data" / "golden" / "raw"


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _raw(name: str) -> dict[str, Any]:
    return json.loads((RAW / f"{name}.json").read_text())


@pytest.fixture(scope="module")
def profiles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Saved profiles of the loaded Kimi K2.6 raw facts: gpu-a and gpu-b as recorded, gpu-c with an
    older transformers (a modified copy through the same aggregator), and the no-tiktoken raw
    facts saved as raw facts (``--save-raw``), whose AutoTokenizer load failed."""
    root = tmp_path_factory.mktemp("compare")
    loaded = _raw("kimi-k2.6-loaded")
    older = copy.deepcopy(loaded)
    older["environment"]["packages"]["transformers"] = "4.57.1"
    files = {"gpu-a": build_profile(loaded), "gpu-b": build_profile(loaded), "gpu-c": build_profile(older)}
    paths = {}
    for name, profile in files.items():
        paths[name] = root / f"{name}.json"
        paths[name].write_text(json.dumps(profile))
    paths["raw-no-tiktoken"] = root / "raw-no-tiktoken.json"
    paths["raw-no-tiktoken"].write_text(json.dumps(_raw("kimi-k2.6-no-tiktoken")))
    return paths


def _args(profiles: dict[str, Path], *names: str) -> list[str]:
    return [str(profiles[name]) for name in names]


def test_text_marks_the_odd_host_and_lists_what_agrees(capsys, monkeypatch, profiles) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = cli(capsys, "compare", *_args(profiles, "gpu-a", "gpu-b", "gpu-c"))
    assert code == 0 and not err, err  # differences alone are no failure without --check
    lines = out.splitlines()
    assert lines[0] == "3 profiles compared: 1 of 13 facts differ", lines
    odd = next(line for line in lines if line.startswith("gpu-c"))
    assert "*4.57.1" in odd, out
    assert all("*" not in line for line in lines if line.startswith(("gpu-a", "gpu-b"))), out
    assert re.search(r"^\s+5\.24\.0$", next(line for line in lines if line.startswith("gpu-a")).split("gpu-a")[1]), out
    same = lines[lines.index("Same on every row:") + 1:]
    assert any(re.fullmatch(r"\s+model type\s+kimi_k25", line) for line in same), out
    assert any(re.fullmatch(r"\s+chat template\s+7ec3d004b3ea", line) for line in same), out
    assert not any(line.lstrip().startswith("transformers") for line in same), out  # it is in the table
    assert all(len(line) <= 80 for line in lines), out


def test_all_columns_at_80_columns_keeps_every_value_whole(profiles) -> None:
    code, screen = run_in_terminal("compare", "--all-columns", *_args(profiles, "gpu-a", "gpu-b", "gpu-c"),
                                   columns=80)
    assert code == 0, screen
    lines = screen.splitlines()
    assert all(len(line) <= 80 for line in lines), screen
    # Too wide for one line per host: each host's block names every fact beside its value.
    assert "quantization: compressed-tensors int4 g32 pack-quantized" in screen, screen
    block = screen[screen.index("gpu-c"):]
    assert "transformers: *4.57.1" in block and "tiktoken: 0.14.0" in block, screen


def test_odd_markup_is_bold_red_with_a_star() -> None:
    assert _cell("text", {"known": True, "value": "4.57.1"}, True) == "[bold red]*4.57.1[/]"
    assert _cell("text", {"known": True, "value": "5.24.0"}, False) == "5.24.0"
    assert _cell("bytes", {"known": False, "value": None}, False) == "[dim]?[/]"


def test_json_document_lists_odd_per_column_and_per_row(capsys, profiles) -> None:
    code, out, _err = cli(capsys, "compare", "--json", *_args(profiles, "gpu-a", "gpu-b", "gpu-c", "raw-no-tiktoken"))
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == "introspect.compare/v1" and doc["introspect_version"]
    columns = {c["key"]: c for c in doc["columns"]}
    assert [c["key"] for c in doc["columns"]] == list(FACT_KEYS)
    assert columns["transformers"]["majority"] == "5.24.0" and columns["transformers"]["odd"] == ["gpu-c"]
    assert columns["tiktoken"]["majority"] == "0.14.0" and columns["tiktoken"]["odd"] == ["raw-no-tiktoken"]
    assert columns["autotokenizer"]["odd"] == ["raw-no-tiktoken"]  # its raw tokenizer result: not loaded
    assert columns["model_type"]["differs"] is False and columns["model_type"]["majority_rows"] == 4
    rows = {row["label"]: row for row in doc["rows"]}
    assert rows["gpu-c"]["odd"] == ["transformers"] and rows["gpu-a"]["odd"] == []
    assert set(rows["raw-no-tiktoken"]["odd"]) == {"tiktoken", "autotokenizer"}
    assert rows["raw-no-tiktoken"]["facts"]["tiktoken"] == {"value": None, "known": True, "reason": None}
    free = rows["gpu-a"]["facts"]["free_disk"]
    assert free["known"] is False and "saved profile" in free["reason"]  # never invented for a file
    assert doc["differs"] is True and set(doc["differing"]) == {"transformers", "tiktoken", "autotokenizer"}


def test_csv_has_plain_values_and_the_odd_columns(capsys, profiles) -> None:
    code, out, _err = cli(capsys, "compare", "--format", "csv", *_args(profiles, "gpu-a", "gpu-b", "gpu-c"))
    assert code == 0
    rows = {row["label"]: row for row in csv.DictReader(io.StringIO(out))}
    assert rows["gpu-c"]["transformers"] == "4.57.1" and rows["gpu-c"]["odd_columns"] == "transformers"
    assert rows["gpu-a"]["odd_columns"] == "" and rows["gpu-a"]["params"] == "1026874640240"
    assert rows["gpu-a"]["chat_template"] == "7ec3d004b3ea0b5dcaec71a6e1a7e5c70eabf3ccd494596a5a050287c332c421"
    assert rows["gpu-a"]["torch"] == "none" and rows["gpu-a"]["free_disk"] == ""  # not installed vs unknown


def test_check_exits_1_on_a_difference_and_0_when_all_agree(capsys, profiles) -> None:
    assert cli(capsys, "compare", "--check", *_args(profiles, "gpu-a", "gpu-b", "gpu-c"))[0] == 1
    code, out, _err = cli(capsys, "compare", "--check", *_args(profiles, "gpu-a", "gpu-b"))
    assert code == 0 and out.splitlines()[0] == "2 profiles compared: all 13 facts agree", out


def test_a_tie_marks_every_value() -> None:
    loaded = _raw("kimi-k2.6-loaded")
    older = copy.deepcopy(loaded)
    older["environment"]["packages"]["transformers"] = "4.57.1"
    doc = compare_rows([RowInput("a", "file", build_profile(loaded)), RowInput("b", "file", build_profile(older))])
    column = next(c for c in doc["columns"] if c["key"] == "transformers")
    assert column["majority"] is None and column["odd"] == ["a", "b"]


def test_autotokenizer_from_the_profile_block_or_older_profiles() -> None:
    """The profile's own ``tokenizer.autotokenizer.ok`` when it has one; a profile written before that
    block: a load by the layout's own library (tiktoken) is AutoTokenizer failing."""
    profile = build_profile(_raw("kimi-k2.6-loaded"))
    said_no = copy.deepcopy(profile)
    said_no["tokenizer"]["autotokenizer"] = {"ok": False}
    older = copy.deepcopy(profile)
    older["tokenizer"].pop("autotokenizer", None)
    native = copy.deepcopy(older)
    native["tokenizer"]["source"] = "tiktoken"
    doc = compare_rows([RowInput(name, "file", p) for name, p in
                        (("new", profile), ("said-no", said_no), ("older", older), ("native", native))])
    facts = {row["label"]: row["facts"]["autotokenizer"]["value"] for row in doc["rows"]}
    assert facts == {"new": True, "said-no": False, "older": True, "native": False}


def test_free_disk_is_judged_only_against_a_threshold() -> None:
    profile = build_profile(_raw("kimi-k2.6-loaded"))
    rows = [RowInput(name, "live", profile, disk={"free_bytes": free}) for name, free in
            (("big", 500 * 2**30), ("bigger", 900 * 2**30), ("small", 20 * 2**30))]
    plain = compare_rows(rows)
    assert plain["differs"] is False  # free disk differs between any two hosts: shown, not judged
    strict = compare_rows(rows, min_free=100 * 2**30)
    assert strict["differing"] == ["free_disk"] and strict["rows"][2]["odd"] == ["free_disk"]


def test_bad_inputs_are_one_error_and_a_fix(capsys, profiles, tmp_path) -> None:
    code, _out, err = cli(capsys, "compare", str(profiles["gpu-a"]))
    assert code == 2 and "at least two rows" in err and "\nfix: introspect compare " in err, err
    other = tmp_path / "health.json"
    other.write_text(json.dumps({"schema": "introspect.health/v1"}))
    code, _out, err = cli(capsys, "compare", str(profiles["gpu-a"]), str(other))
    assert code == 2 and "is not a profile" in err and "fix: introspect probe" in err, err
    code, _out, err = cli(capsys, "compare", "--all-hosts")
    assert code == 2 and "--model" in err, err


@pytest.mark.ssh
def test_live_hosts_beside_an_unreachable_one(sshd, client_keys, kimi_model, venv_full, tmp_path, profiles) -> None:
    """The same sshd under two inventory names, and one host that refuses: two compared rows (with
    the free disk measured on the host), one error row, exit 3; a saved profile joins them. No
    tokenizer load (the slow part): AutoTokenizer is then unknown, never guessed."""
    hosts = {name: {"address": sshd.address, "port": sshd.port, "venvs": [{"path": str(venv_full)}]}
             for name in ("gpu-1", "gpu-2")}
    hosts["gpu-down"] = {"address": "127.0.0.19", "port": free_port("127.0.0.19")}
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text(yaml.safe_dump({"defaults": {"identity": str(client_keys.key),
                                                      "known_hosts": str(client_keys.known_hosts)},
                                         "hosts": hosts}))
    result = run_cli("compare", "--all-hosts", "--hosts", str(inventory), "--ssh-config", "/dev/null",
                     "--model", str(kimi_model), "--no-tokenizer", "--json", str(profiles["gpu-c"]), timeout=120)
    assert result.code == 3 and "Traceback" not in result.stderr, result.stderr
    assert "error: gpu-down: " in result.stderr and "refused" in result.stderr, result.stderr
    doc = result.json()
    rows = {row["label"]: row for row in doc["rows"]}
    assert list(rows) == ["gpu-c", "gpu-1", "gpu-2", "gpu-down"]
    assert rows["gpu-down"]["error"] and rows["gpu-down"]["exit_code"] == 3
    assert doc["counts"] == {"rows": 4, "compared": 3, "errors": 1}
    for name in ("gpu-1", "gpu-2"):
        facts = rows[name]["facts"]
        assert facts["model_type"]["value"] == "kimi_k25" and rows[name]["source"] == "live"
        assert isinstance(facts["free_disk"]["value"], int) and facts["free_disk"]["value"] > 0, facts["free_disk"]
        assert facts["autotokenizer"]["known"] is False and "no tokenizer load" in facts["autotokenizer"]["reason"]
    assert rows["gpu-1"]["facts"]["transformers"] == rows["gpu-2"]["facts"]["transformers"]
