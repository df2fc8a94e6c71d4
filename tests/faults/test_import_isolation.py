"""Nothing in the caller's directory is importable by the probe itself.

``python -c`` puts ``''`` (the cwd) first on ``sys.path``
(https://docs.python.org/3/using/cmdline.html#cmdoption-c), so a ``json.py`` in the
directory the CLI runs from (the model dir, say) would be imported by the shipped
bootstrap's own ``import json`` before any task runs, ``--no-remote-code`` or not. The
bootstrap drops the cwd entry before importing anything (``-P``/``PYTHONSAFEPATH`` exist
only from Python 3.11; ``-I`` would also drop ``PYTHONPATH`` and the user site, which the
host's pipeline does see).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CLIResult

# Modules the bootstrap, the runner or the file probes import after startup (os, sys and
# the codecs are imported by the interpreter before any -c code, from its own library).
SHADOWED = ("json", "subprocess", "threading", "hashlib", "struct", "tempfile", "signal")


def _installed_cli(*args: str, cwd: Path) -> CLIResult:
    """The console script a user runs: its sys.path[0] is its own bin dir, never the cwd (the
    suite's ``run_cli`` uses ``python -m``, which puts the cwd first and would import the traps
    into the controller itself)."""
    script = Path(sys.executable).parent / "introspect"
    env = dict(os.environ, HF_HUB_OFFLINE="1", INTROSPECT_CACHE_DIR=str(cwd.parent / "cache"),
               TMPDIR=str(cwd.parent))
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([str(script), *args], capture_output=True, text=True, timeout=180, env=env, cwd=cwd)
    return CLIResult(proc.returncode, proc.stdout, proc.stderr)


def _trap_dir(kimi_model: Path, dest: Path) -> Path:
    shutil.copytree(kimi_model, dest)
    for name in SHADOWED:
        (dest / f"{name}.py").write_text(
            f"open({str(dest / ('IMPORTED-' + name))!r}, 'w').close()\nraise SystemExit(97)\n")
    return dest


# An empty PYTHONPATH component ("export PYTHONPATH=$PYTHONPATH:/opt/x" with it unset) puts the
# cwd on sys.path as an absolute path, after the '' of -c.
@pytest.mark.parametrize(("flags", "pythonpath"), [(("--no-remote-code",), None),
                                                   (("--no-remote-code", "--no-tokenizer"), None),
                                                   ((), None), (("--no-remote-code",), ":/nonexistent")])
def test_a_module_in_the_cwd_is_never_imported_by_the_probe(kimi_model, venv_full, tmp_path, flags, pythonpath):
    model = _trap_dir(kimi_model, tmp_path / "model")
    interpreter = ["--venv", str(venv_full)]
    if pythonpath is not None:  # the host's login environment, not the controller's: a wrapper sets it
        wrapper = tmp_path / "python-with-pythonpath"
        wrapper.write_text(f"#!/bin/sh\nPYTHONPATH={pythonpath} exec {venv_full}/bin/python \"$@\"\n")
        wrapper.chmod(0o755)
        interpreter = ["--python", str(wrapper)]
    result = _installed_cli("probe", "--model", ".", *interpreter, "--json", "--refresh", *flags, cwd=model)
    imported = sorted(p.name for p in model.glob("IMPORTED-*"))
    assert imported == [], imported
    assert "Traceback" not in result.stderr
    assert result.code in (0, 1), result.stderr[-2000:]
    profile = result.json()
    assert profile["target"]["model_path"] == str(model)
    assert profile["architecture"]["num_layers"] == 61
