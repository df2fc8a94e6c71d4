"""``introspect`` run in this process (``main()``, as tests/analysis/test_hostile_mutations.py does): a
report test makes several runs, and a fresh interpreter for each would cost a second apiece."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

from introspect.cli.main import main
from tests.conftest import NEUTRAL_CWD, CLIResult


def introspect(*args: str, cwd: Path | None = None) -> CLIResult:
    out, err = io.StringIO(), io.StringIO()
    before = os.getcwd()
    os.chdir(cwd or NEUTRAL_CWD)  # never the repo, whose hosts.yaml is a user example
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        os.chdir(before)
    return CLIResult(code, out.getvalue(), err.getvalue())
