"""What ships: every module of introspect.remote and its sub-packages, packages marked as such."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from introspect.remote import runner
from introspect.transport import shipping

REMOTE = Path(runner.__file__).resolve().parent


def test_sources_cover_every_remote_module_and_package() -> None:
    on_disk = set()
    for path in REMOTE.rglob("*.py"):
        parts = path.relative_to(REMOTE.parent.parent).with_suffix("").parts
        on_disk.add(".".join(parts[:-1]) if parts[-1] == "__init__" else ".".join(parts))
    sources = shipping.remote_sources()
    assert on_disk <= set(sources)
    assert set(sources) - on_disk == {"introspect"}  # the controller's __init__ is never shipped
    assert set(shipping.remote_packages()) == {"introspect", "introspect.remote", "introspect.remote.tasks",
                                              "introspect.remote.facts", "introspect.remote.facts.host",
                                              "introspect.remote.facts.model", "introspect.remote.facts.tokenizer"}
    for task, (module, func) in runner.TASKS.items():
        assert module in sources, task
        names = {n.name for n in ast.parse(sources[module]).body if isinstance(n, ast.FunctionDef)}
        assert func in names, task


def _bare_python() -> str:
    """The venv's base interpreter: the same Python, without introspect installed."""
    exe = os.path.join(sys.base_prefix, "bin", "python3")
    probe = subprocess.run([exe, "-I", "-c", "import introspect"], capture_output=True, timeout=60, check=False)
    if probe.returncode == 0:
        pytest.skip("the base interpreter has introspect installed")
    return exe


def test_boot_imports_a_sub_package_module_from_memory_only(tmp_path: Path) -> None:
    """BOOT's importer serves tasks/ and facts/ from the envelope: this Python has no introspect."""
    argv = shipping.command_argv(_bare_python())
    argv.insert(1, "-I")  # isolated: neither PYTHONPATH, the cwd nor user site-packages
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=str(tmp_path))
    assert proc.stdin is not None and proc.stdout is not None
    # stdin stays open while the task runs: its EOF means the controller is gone.
    proc.stdin.write(shipping.envelope("fingerprint", {"model_path": str(tmp_path)}))
    proc.stdin.flush()
    out = proc.stdout.read()
    proc.stdin.close()
    proc.wait(timeout=60)
    reply = shipping.parse_reply(out)
    assert reply is not None, proc.stderr.read() if proc.stderr else ""
    assert reply["errors"] == [] and set(reply["facts"]) == {"digest", "entries"}
    assert json.loads(json.dumps(reply))["protocol"] == shipping.PROTOCOL
