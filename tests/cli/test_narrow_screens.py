"""Nothing wider than the screen, piped or not: fix blocks fold their prose into ``# `` lines
and never a command; a table's headers fold before its rows become blocks, and a block's
labels end with a colon; a report section whose value has a word too wide to stand beside the
keys puts its values under them; ``models`` piped follows ``$COLUMNS`` like every command."""

from __future__ import annotations

import io
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console

from introspect.cli.fix_lines import paste_lines
from introspect.cli.render_fold import KVTable, Rows
from introspect.cli.render_term import WIDE_COLUMNS, Col, Fixes, print_fixes
from tests.cli.test_fix_lines import block
from tests.conftest import run_cli

REAL = Path(__file__).resolve().parent.parent / "data" / "realconfigs"
ADVICE = ("treat every id of [163585, 163586] as the end of a completion in the pipeline (the server "
          "stops on any of them) and strip it before storing the 31.5 GiB completion")
PIP = "/opt/venvs/serving-2026-q4-sglang-0.5.4/bin/pip install 'tiktoken>=0.7' sentencepiece"


def _bash_parses(lines: list[str]) -> None:
    run = subprocess.run(["bash", "-n"], input="\n".join(lines) + "\n", capture_output=True, text=True,
                         check=False, timeout=10)
    assert run.returncode == 0, (lines, run.stderr)


def _console(width: int) -> Console:
    return Console(file=io.StringIO(), width=width, highlight=False, emoji=False)


def _printed(console: Console) -> str:
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_a_comment_folds_at_words_into_comment_lines() -> None:
    lines = paste_lines([f"# {ADVICE}"], 60)
    assert len(lines) > 1 and all(line.startswith("#") for line in lines), lines
    assert all(2 + cell_len(line) <= 60 for line in lines), lines
    assert " ".join(line.lstrip("#").strip() for line in lines) == ADVICE  # every word, whole, in order
    assert any("31.5 GiB" in line for line in lines), lines  # a number keeps its unit
    assert all(line.startswith("#   ") for line in lines[1:]), lines  # the same comment, not a new one
    _bash_parses(lines)


def test_a_command_is_never_folded_and_its_why_moves_above_only_when_needed() -> None:
    assert paste_lines([PIP], 40) == [PIP]  # too wide, but a folded command cannot be pasted
    short = "introspect env  # each setting"
    assert paste_lines([short], 60) == [short]
    lines = paste_lines([f"{PIP}  # the Kimi tokenizer needs tiktoken to load its vocabulary"], 60)
    assert lines[-1] == PIP and all(line.startswith("#") for line in lines[:-1]), lines
    assert " ".join(line.lstrip("#").strip() for line in lines[:-1]) == (
        "the Kimi tokenizer needs tiktoken to load its vocabulary")
    assert shlex.split(lines[-1]) == shlex.split(PIP)
    _bash_parses(lines)


def test_a_word_longer_than_the_line_stays_whole() -> None:
    path = "/tmp/" + "a-very-long-directory-name/" * 4 + "bin/python"
    lines = paste_lines([f"# check the venv on the host: {path} -V (recreate it if missing)"], 60)
    assert f"#   {path}" in lines, lines
    assert all(2 + cell_len(line) <= 60 for line in lines if path not in line), lines


def test_to_fix_at_the_console_width_and_whole_under_wide() -> None:
    fixes = Fixes()
    for host in ("gpu-node-a1.inference.example.internal", "gpu-node-a2.inference.example.internal",
                 "gpu-node-a3.inference.example.internal"):
        fixes.add(PIP, host)
        fixes.add(ADVICE, host)
    narrow = _console(60)
    print_fixes(narrow, fixes)
    lines = block(_printed(narrow), "To fix:")
    comments = [line for line in lines if line.startswith("#")]
    assert all(2 + cell_len(line) <= 60 for line in comments), lines
    assert [line for line in lines if not line.startswith("#")] == [PIP], lines
    _bash_parses(lines)
    wide = _console(WIDE_COLUMNS)
    print_fixes(wide, fixes)
    assert block(_printed(wide), "To fix:") == [
        "# gpu-node-a1.inference.example.internal, gpu-node-a2.inference.example.internal, "
        "gpu-node-a3.inference.example.internal (3 hosts)", PIP,
        "# gpu-node-a1.inference.example.internal, gpu-node-a2.inference.example.internal, "
        f"gpu-node-a3.inference.example.internal (3 hosts): {ADVICE}"]


PLAN_COLUMNS = (Col("layout"), Col("GPUs", "num"), Col("weights/GPU", "num"), Col("KV room/GPU", "num"),
                Col("KV tokens", "num"), Col("max context", "num"), Col("requests", "num"), Col("fits"),
                Col("why not", "text"))
PLAN_ROWS = [["TP4 EP4", "4", "139.9 GiB", "-", "-", "-", "-", "no",
              "weights 139.9 GiB per GPU > usable 126.4 GiB (0.9 x 140.4 GiB)"],
             ["TP8 EP8", "8", "71.0 GiB", "55.4 GiB", "846,662", "262,144", "3", "fits", ""]]


def _lines(renderable: object, width: int) -> list[str]:
    console = _console(width)
    console.print(renderable, crop=False)
    return _printed(console).splitlines()


def test_headers_fold_before_the_rows_become_blocks() -> None:
    """The values fit at 76 columns, the headers do not: two header lines, one line per row."""
    lines = _lines(Rows(PLAN_COLUMNS, PLAN_ROWS), 76)
    assert all(cell_len(line) <= 76 for line in lines), lines
    assert lines[0].split() == ["layout", "GPUs", "weights/GPU", "KV", "KV", "max", "requests", "fits"], lines
    assert lines[1].split() == ["room/GPU", "tokens", "context"], lines
    assert lines[2].split()[:2] == ["TP4", "EP4"] and lines[3].strip() == PLAN_ROWS[0][-1], lines
    assert lines[4].split() == ["TP8", "EP8", "8", "71.0", "GiB", "55.4", "GiB", "846,662", "262,144", "3", "fits"]
    assert _lines(Rows(PLAN_COLUMNS, PLAN_ROWS), 200)[0].split()[3:5] == ["KV", "room/GPU"]  # whole when it fits


def test_a_block_names_each_value_with_a_colon() -> None:
    lines = _lines(Rows(PLAN_COLUMNS, PLAN_ROWS), 50)
    assert lines[0] == "TP4 EP4  no", lines
    assert "GPUs: 4  weights/GPU: 139.9 GiB  KV room/GPU: -" in lines[1], lines
    assert any(line.strip().startswith("why not: weights 139.9 GiB") for line in lines), lines


def test_a_section_goes_under_its_keys_when_a_word_cannot_stand_beside_them() -> None:
    table = KVTable("Architecture")
    table.add_row("MHA / GQA / MQA / MLA?", "MoE: 384 routed + 1 shared experts\nfrom text_config.n_routed_experts, "
                                   "text_config.first_k_dense_replace, text_config.moe_layer_freq")
    table.add_row("hidden size", "7168")
    assert _lines(table, 60) == [
        "Architecture", "  MHA / GQA / MQA / MLA?", "    MoE: 384 routed + 1 shared experts",
        "    from text_config.n_routed_experts,", "      text_config.first_k_dense_replace,",
        "      text_config.moe_layer_freq", "  hidden size", "    7168"]
    wide = _lines(table, 120)  # room beside the keys: one layout, values beside them
    assert wide[1].split()[:8] == ["MHA", "/", "GQA", "/", "MQA", "/", "MLA?", "MoE:"] and wide[-1].split() == ["hidden", "size", "7168"]


def test_a_value_too_wide_even_under_its_key_moves_alone() -> None:
    table = KVTable("Chat template")
    table.add_row("source", "chat_template.jinja")
    table.add_row("sha256", "7ec3d004b3ea0b5dcaec71a6e1a7e5c70eabf3ccd494596a5a050287c332c421")
    assert _lines(table, 60) == ["Chat template", "  source    chat_template.jinja", "  sha256",
                                 "    7ec3d004b3ea0b5dcaec71a6e1a7e5c70eabf3ccd494596a5a050287c332c421"]


@pytest.fixture(scope="module")
def model_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("narrow") / "shared-checkpoints-for-the-inference-team"
    for real, name in (("kimi-k2.5", "Kimi-K2.5-Instruct-int4-pack-quantized"), ("qwen3-30b-a3b", "Qwen3-30B")):
        (root / name).mkdir(parents=True)
        shutil.copy(REAL / real / "config.json", root / name / "config.json")
    return root


def test_models_piped_folds_to_columns(model_root: Path) -> None:
    """A CI log or ``> file``: $COLUMNS is the width, as for every other command; --wide is a line
    per model for whoever wants one."""
    result = run_cli("models", "--roots", str(model_root), "--hf-cache", str(model_root / "no-cache"),
                     env={"COLUMNS": "80"})
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert all(cell_len(line) <= 80 or len(line.split()) == 1 for line in lines), result.stdout
    assert any("params (total / active): 1.03T / 31.69B" in line for line in lines), result.stdout
    wide = run_cli("models", "--roots", str(model_root), "--hf-cache", str(model_root / "no-cache"), "--wide",
                   env={"COLUMNS": "80"})
    kimi = [line for line in wide.stdout.splitlines() if "Kimi-K2.5-Instruct-int4-pack-quantized" in line]
    assert len(kimi) == 1 and "1.03T / 31.69B" in kimi[0] and "kimi_k25 (kimi_k2)" in kimi[0], wide.stdout
