"""``introspect completion SHELL``: click's completion scripts, and completion answering from them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CLIResult, run_cli

SCRIPT = Path(sys.executable).parent / "introspect"  # the console script the shell calls back


def _installed(*args: str, tmp_path: Path, env: dict[str, str] | None = None) -> CLIResult:
    full_env = dict(os.environ, HF_HUB_OFFLINE="1", INTROSPECT_CACHE_DIR=str(tmp_path / "cache"), **(env or {}))
    full_env.pop("PYTHONPATH", None)
    proc = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120, env=full_env,
                          cwd=tmp_path)
    return CLIResult(proc.returncode, proc.stdout, proc.stderr)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_bash_script_is_valid_bash(tmp_path: Path) -> None:
    result = _installed("completion", "bash", tmp_path=tmp_path)
    assert result.code == 0, result.stderr
    assert "_INTROSPECT_COMPLETE=bash_complete" in result.stdout
    script = tmp_path / "introspect.bash"
    script.write_text(result.stdout)
    check = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stderr


def test_completing_a_command_name_offers_every_match(tmp_path: Path) -> None:
    result = _installed(tmp_path=tmp_path, env={"COMP_WORDS": "introspect pr", "COMP_CWORD": "1",
                                                 "_INTROSPECT_COMPLETE": "bash_complete"})
    assert result.code == 0, result.stderr
    offered = {line.split(",", 1)[1] for line in result.stdout.splitlines()}
    assert offered == {"probe", "preflight", "profile"}


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_loaded_bash_function_completes_options(tmp_path: Path) -> None:
    """End to end, as a user's shell does it: eval the script, then call its function."""
    source = _installed("completion", "bash", tmp_path=tmp_path).stdout
    (tmp_path / "introspect.bash").write_text(source)
    line = ('source introspect.bash; COMP_WORDS=(introspect completion ""); COMP_CWORD=2; '
            '_introspect_completion introspect; printf "%s\\n" "${COMPREPLY[@]}"')
    env = dict(os.environ, PATH=f"{SCRIPT.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.stdout.split() == ["bash", "zsh", "fish"], proc.stderr


@pytest.mark.parametrize(("shell", "marker"), [("zsh", "compdef _introspect_completion introspect"),
                                               ("fish", "complete --no-files --command introspect")])
def test_the_zsh_and_fish_scripts_call_introspect_back(tmp_path: Path, shell: str, marker: str) -> None:
    result = _installed("completion", shell, tmp_path=tmp_path)
    assert result.code == 0, result.stderr
    assert f"_INTROSPECT_COMPLETE={shell}_complete" in result.stdout
    assert marker in result.stdout


def test_an_unknown_shell_is_a_usage_error_with_a_command_to_paste() -> None:
    result = run_cli("completion", "tcsh")
    assert result.code == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == ["error: no completion for shell 'tcsh' (bash, zsh and fish have one)",
                                          "fix: introspect completion bash   # or: zsh, fish"]


def test_help_shows_how_to_load_each_script() -> None:
    result = run_cli("completion", "--help")
    assert result.code == 0, result.stderr
    for example in ('eval "$(introspect completion bash)"', 'introspect completion zsh > "${fpath[1]}/_introspect"',
                    "introspect completion fish > ~/.config/fish/completions/introspect.fish"):
        assert example in result.stdout
