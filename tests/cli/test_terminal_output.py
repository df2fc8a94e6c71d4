"""What a user sees in a terminal: nothing that identifies a row is cropped, fixes paste whole,
data is never read as rich markup or emoji codes. Run through a real pseudo-terminal at the
widths of a split tmux pane (80) and a laptop (120)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from introspect.checks.history import HistoryStore
from introspect.checks.result import CheckResult
from tests.cli.terminal import run_in_terminal

REAL = Path(__file__).resolve().parent.parent / "data" / "realconfigs"
RAW = Path(__file__).resolve().parent.parent / "data" / "golden" / "raw"


@pytest.fixture(scope="module")
def model_root(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """Two model dirs under a path as long as real checkpoint trees get."""
    root = tmp_path_factory.mktemp("models") / "shared-checkpoints-for-the-inference-team" / "2026-q4"
    models = []
    for real, name in (("kimi-k2.5", "Kimi-K2.5-Instruct-int4-pack-quantized"),
                       ("qwen3-30b-a3b", "Qwen3-30B-A3B-Instruct-2507")):
        model = root / name
        model.mkdir(parents=True)
        shutil.copy(REAL / real / "config.json", model / "config.json")
        models.append(model)
    return root, models


@pytest.mark.parametrize("columns", [80, 120])
def test_models_paths_and_counts_appear_whole(model_root: tuple[Path, list[Path]], columns: int) -> None:
    root, (kimi, qwen) = model_root
    code, out = run_in_terminal("models", "--roots", str(root), columns=columns)
    assert code == 0, out
    assert str(kimi) in out and str(qwen) in out, out
    # Layers and parameter counts (config.json: 61 / 48 layers; total / active from the configs).
    for needle in ("61", "48", "1.03T / 31.69B", "30.53B / 3.04B", "kimi_k25", "qwen3_moe"):
        assert needle in out.split() or needle in out, (needle, out)
    assert "…" not in out, out  # rich marks a cut cell with an ellipsis: none is cut


def _history(db: Path) -> list[int]:
    store = HistoryStore(db)
    try:
        ids = []
        for i in range(2):
            results = ([("gpu-node-a1.example.internal", "/opt/venvs/serving", CheckResult(f"ok{n}", "pass", "ok"))
                        for n in range(12)]
                       + [("gpu-node-a1.example.internal", "/opt/venvs/serving",
                           CheckResult("package:six", "fail", "six is not installed",
                                       fix="/opt/venvs/serving/bin/pip install 'six>=1.16' 'transformers>=4.45,<6'"
                                           " tiktoken sentencepiece"))] * 3
                       + [("gpu-node-b2.example.internal", None, CheckResult("gpus", "warn", "[red]no[/red] GPU"))] * 4
                       + [("gpu-node-b2.example.internal", None, CheckResult("disk", "info", "1 TB free"))] * 5)
            argv = ["health", "--hosts", "/etc/introspect/hosts.yaml", "--parallel", "8", "--prom",
                    "/var/lib/node_exporter/textfile_collector/introspect.prom", "--tags", f"serving-{i}"]
            ids.append(store.record_run(argv=argv, started_at=time.time() - 60 * (2 - i), finished_at=time.time(),
                                        results=results))
        return ids
    finally:
        store.close()


@pytest.mark.parametrize("columns", [80, 120])
def test_history_keeps_run_ids_and_counts(tmp_path: Path, columns: int) -> None:
    db = tmp_path / "history.sqlite3"
    ids = _history(db)
    code, out = run_in_terminal("history", "--db", str(db), columns=columns)
    assert code == 0, out
    lines = out.splitlines()
    for run_id in ids:
        # The run's row (and, when the terminal is too narrow for one line, the line under it).
        index = next(i for i, line in enumerate(lines)
                     if f" {run_id} " in f" {line} " or f"run {run_id} " in f"{line} ")
        words = " ".join(lines[index:index + 2]).split()
        assert str(run_id) in words, (run_id, out)
        for count in ("12", "3", "4", "5"):  # pass, fail, warn, info: whole numbers, not cut
            assert count in words, (count, out)


def test_check_names_and_messages_are_data_not_markup(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    run_id = _history(db)[0]
    code, out = run_in_terminal("history", "--db", str(db), "--run", str(run_id), columns=80)
    assert code == 0, out
    assert "package:six:" in out, out  # not the keycap emoji
    assert "[red]no[/red] GPU" in out, out
    fix = "/opt/venvs/serving/bin/pip install 'six>=1.16' 'transformers>=4.45,<6' tiktoken sentencepiece"
    assert fix in out, out  # one line, never wrapped inside the command


def test_report_fixes_come_last_once_and_whole() -> None:
    raw = RAW / "kimi-k2.6-no-tiktoken.json"
    code, out = run_in_terminal("profile", str(raw), columns=80)
    assert code == 1, out
    profile_fixes = [f["fix"] for f in _profile(raw)["findings"] if f.get("fix")]
    assert profile_fixes, "the case needs findings with fixes"
    block = out.split("To fix:", 1)[1]
    assert out.count("To fix:") == 1
    for fix in dict.fromkeys(profile_fixes):
        assert fix in block and block.count(fix) == 1, (fix, block)


def _profile(raw: Path) -> dict:
    from introspect.analysis.profile import build_profile

    return build_profile(json.loads(raw.read_text(encoding="utf-8")))


def test_wide_prints_one_line_per_model(model_root: tuple[Path, list[Path]]) -> None:
    root, (kimi, _qwen) = model_root
    code, out = run_in_terminal("models", "--roots", str(root), "--wide", columns=80)
    assert code == 0, out
    row = next(line for line in out.splitlines() if str(kimi) in line)
    assert "61" in row.split() and "1.03T / 31.69B" in row, out
