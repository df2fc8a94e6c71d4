"""``main`` is the one printer of error/fix lines: commands hand their notices back to it."""

from __future__ import annotations

import pytest

from introspect.cli.main import print_notices
from introspect.cli.outcome import Notice, notice
from introspect.errors import HostUnreachable
from tests.conftest import run_cli


def test_notices_print_in_order_with_their_fix(capsys: pytest.CaptureFixture[str]) -> None:
    exc = HostUnreachable("connection refused by 10.0.0.9:22", hint="check that sshd runs there",
                          host="10.0.0.9", stage="connect")
    print_notices([Notice("gpu-a1: skipped: /data is not readable", level="warning"), notice(exc, "gpu-b2"),
                   Notice("no hint here")])
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "warning: gpu-a1: skipped: /data is not readable",
        "error: gpu-b2: 10.0.0.9: [connect] connection refused by 10.0.0.9:22",
        "fix: # check that sshd runs there",
        "error: no hint here",
    ]


def test_a_model_path_that_is_no_model_dir_ends_in_one_error_and_fix(tmp_path) -> None:
    result = run_cli("probe", "--model", str(tmp_path), "--no-tokenizer", "--no-cache", "--json")
    assert result.code == 2, result.stderr
    lines = result.stderr.splitlines()
    assert lines[-2].startswith(f"error: model path {str(tmp_path)!r}: "), result.stderr
    assert lines[-1] == "fix: # pass --model the directory that holds config.json"
    assert result.json()["schema"].startswith("introspect.profile/")
