"""``preflight --host H``: an install or a disk command of its ``To fix:`` block runs on H, through
its transport (``ssh -p PORT HOST '.../pip install tiktoken'``), as probe's fixes do; pasted as
printed, it must not install on the machine that ran introspect."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from tests.conftest import run_cli, ssh_flags

pytestmark = pytest.mark.ssh


def _fix_block(out: str) -> list[str]:
    lines = out.splitlines()
    assert "To fix:" in lines, out[-3000:]
    block = []
    for line in lines[lines.index("To fix:") + 1:]:
        if not line.startswith("  "):
            break
        block.append(line.strip())
    return block


def test_single_host_fixes_run_through_ssh(sshd, client_keys, kimi_model, venv_no_tiktoken):
    args = ["preflight", *ssh_flags(sshd, client_keys), "--model", str(kimi_model), "--venv", str(venv_no_tiktoken),
            "--min-free-gb", "1e9"]
    result = run_cli(*args, "--wide", env={"COLUMNS": "200"})
    assert result.code == 1 and "Traceback" not in result.stderr, (result.code, result.stderr[-2000:])
    block = _fix_block(result.stdout)
    pip = shlex.quote(f"{venv_no_tiktoken}/bin/pip install tiktoken")
    ssh = f"ssh -p {sshd.port} {sshd.address}"
    assert f"{ssh} {pip}" in block, block
    # The disk fix names the directory on the host: through ssh too, its why after '#'.
    assert any(line.startswith(f"{ssh} 'df -h ") for line in block), block
    for line in block:  # each line a command or a comment; none left for the controller to run
        assert line.startswith(("#", f"{ssh} ")), line
        assert subprocess.run(["bash", "-n", "-c", line], check=False).returncode == 0, line
