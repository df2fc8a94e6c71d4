"""``introspect ARGS`` through ``main()`` in the test's own process, where a fresh interpreter is
not what a test checks.

A CLI run in a subprocess pays the controller's imports (the document models, paramiko, the
shipped-code packing) every time: about 1.5 CPU-s, against ~0.2 CPU-s for the probe of a small
model dir on the local executor, whose remote side still runs in its own interpreter here. Like
``tests.conftest.run_cli``: a neutral working dir, the environment given (a result cache of the
call's own unless it names one), stdout checked against the committed JSON Schema.

Not for a run that must be killable (a hang is the fault under test: ``run_cli`` has a timeout),
that needs an interpreter of its own (a ``sitecustomize``, its own PID), that must start with
nothing memoized (a later run in this process reuses what an earlier one computed and wrote, the
stripped sources say: what a first run leaves behind is then not seen), or whose signals or
process tree are the subject.
"""

from __future__ import annotations

import contextlib
import io
import itertools
from pathlib import Path

import pytest

from introspect.cli.main import main
from tests.conftest import NEUTRAL_CWD, REPO, SESSION_TMP, CLIResult
from tests.documents.validate import check_stdout

_CACHE_DIRS = itertools.count()


def run_main(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> CLIResult:
    out, err = io.StringIO(), io.StringIO()
    # run_cli's environment, which the probe's interpreters inherit on the local executor: the
    # result cache matches their environment facts, so an entry a subprocess wrote serves this run.
    full_env = {"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO), "TMPDIR": str(SESSION_TMP / "tmp"),
                "INTROSPECT_CACHE_DIR": str(SESSION_TMP / f"cache-in-process-{next(_CACHE_DIRS)}"), **(env or {})}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in full_env.items():
            patch.setenv(name, value)
        patch.chdir(cwd or NEUTRAL_CWD)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    check_stdout(out.getvalue())
    return CLIResult(code, out.getvalue(), err.getvalue())
