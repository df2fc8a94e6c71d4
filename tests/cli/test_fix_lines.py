"""Fix lines paste as shell: ``To fix:`` holds only warnings and errors, an optional extra (torch
for the model-code witness) sits under ``Optional:``, and every line of both blocks is a command
with the why after ``#`` (``bash -n`` accepts it)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from introspect.analysis.profile import build_profile
from introspect.cli.fix_lines import is_command, paste_lines, report_fixes, report_optional, shell_line
from introspect.cli.remote_fix import fix_on_target
from introspect.documents.profile import ProfileDocument
from tests.cli.terminal import run_in_terminal
from tests.conftest import run_cli

RAW = Path(__file__).resolve().parent.parent / "data" / "golden" / "raw"
HEADINGS = ("To fix:", "Optional:")


def block(out: str, heading: str) -> list[str]:
    """The lines under ``heading`` (indented by two), up to the first line that is not."""
    lines = out.splitlines()
    if heading not in lines:
        return []
    body = []
    for line in lines[lines.index(heading) + 1:]:
        if not line.startswith("  "):
            break
        body.append(line.strip())
    return body


def assert_parses(lines: list[str]) -> None:
    for line in lines:
        run = subprocess.run(["bash", "-n", "-c", line], capture_output=True, text=True, check=False)
        assert run.returncode == 0, (line, run.stderr)


def test_healthy_probe_without_torch_has_no_fix_and_an_optional_torch_line(kimi_model: Path,
                                                                             venv_full: Path) -> None:
    """venv_full has transformers but no torch: the profile is complete, nothing is to fix."""
    result = run_cli("probe", "--model", str(kimi_model), "--venv", str(venv_full), env={"COLUMNS": "80"})
    assert result.code == 0, result.stderr[-2000:]
    out = result.stdout
    assert "To fix:" not in out, out  # only info findings: nothing is broken
    optional = block(out, "Optional:")
    pip = f"{venv_full}/bin/pip install torch"
    [index] = [i for i, line in enumerate(optional) if line.startswith(pip)]
    # The why after the command, or (too long for the line together) on '# ' lines above it.
    assert any("# only for the model-code witness" in line for line in optional[:index + 1]), optional
    assert out.rstrip().endswith(optional[-1]), out  # printed after the report
    assert_parses(optional)


@pytest.mark.parametrize("name", sorted(path.name for path in RAW.glob("*.json")))
def test_golden_report_blocks_parse_and_split_by_severity(name: str) -> None:
    raw = RAW / name
    profile = build_profile(json.loads(raw.read_text(encoding="utf-8")))
    _code, out = run_in_terminal("profile", str(raw), columns=80)
    fixes, optional = block(out, "To fix:"), block(out, "Optional:")
    # As printed at 80 columns: prose folded into '# ' lines, commands whole.
    document = ProfileDocument.model_validate(profile)
    items, extras = report_fixes(document).items, report_optional(document).items
    assert fixes == paste_lines(items, 80) and optional == paste_lines(extras, 80), out
    for finding in profile["findings"]:
        if finding.get("fix"):  # each fix once, under the heading its severity names
            line = shell_line(finding["fix"])
            assert line in (extras if finding["severity"] == "info" else items), (finding, out)
    if optional and fixes:
        assert out.index("Optional:") > out.index("To fix:"), out
    assert_parses(fixes + optional)


def test_the_goldens_cover_both_blocks() -> None:
    """The case above proves nothing unless some golden has a fix under each heading."""
    profiles = [ProfileDocument.model_validate(build_profile(json.loads(path.read_text(encoding="utf-8"))))
                for path in RAW.glob("*.json")]
    assert any(report_fixes(p).items for p in profiles) and any(report_optional(p).items for p in profiles)


def _witness_profile(cause: str, missing: list[str], remote_code: bool = True) -> dict[str, Any]:
    from tests.witnesses.test_witnesses import raw_with

    error = {"type": "ModuleNotFoundError", "message": "No module named 'torch'", "cause": cause,
             "stage": "import", "missing_packages": missing}
    return build_profile(raw_with({"built": False, "params": None, "error": error}, remote_code=remote_code))


@pytest.mark.parametrize(("cause", "missing", "command"), [
    ("missing-package", ["torch"], "/venv/bin/pip install torch"),
    ("missing-package", ["torch", "tiktoken"], "/venv/bin/pip install torch tiktoken"),
    ("unknown-architecture", [], "/venv/bin/pip install --upgrade transformers"),
    ("remote-code-refused", [], ""),
])
def test_witness_fix_is_a_command_with_a_comment(cause: str, missing: list[str], command: str) -> None:
    profile = _witness_profile(cause, missing, remote_code=cause != "remote-code-refused")
    [info] = [f for f in profile["findings"] if f["code"] == "model-code-unavailable"]
    assert info["severity"] == "info"
    head, _, why = info["fix"].partition("#")
    assert head.strip() == command and why.strip(), info["fix"]
    assert is_command(info["fix"]) and shell_line(info["fix"]) == info["fix"]
    line = fix_on_target(info["fix"], profile["target"])  # the profile was taken over ssh
    document = ProfileDocument.model_validate(profile)
    assert line in report_optional(document).items and line not in report_fixes(document).items
    assert_parses([info["fix"], line])


@pytest.mark.parametrize(("fix", "line"), [
    ("check that config.json belongs to these weights", "# check that config.json belongs to these weights"),
    ("do not use ids from this load: it's wrong", "# do not use ids from this load: it's wrong"),
    ("test the shards, then re-run", "# test the shards, then re-run"),
    ("/opt/v/bin/pip install six  # for the tokenizer", "/opt/v/bin/pip install six  # for the tokenizer"),
    ("CUDA_VISIBLE_DEVICES=0 introspect probe --model /m", "CUDA_VISIBLE_DEVICES=0 introspect probe --model /m"),
    ("# already a comment", "# already a comment"),
])
def test_prose_becomes_a_comment_and_commands_stay(fix: str, line: str) -> None:
    assert shell_line(fix) == line
    assert_parses([line])
