"""What a command imports before it contacts a host: heavy or optional libraries load only
on the paths that use them (a YAML inventory, a requirement to judge, a terminal, --prom).

Behaviour, not timing: each case runs in a fresh interpreter and reads ``sys.modules``.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from introspect.cli.main import LAZY_COMMANDS, cli
from introspect.client.preload import preload

# Loaded only where used; none is needed to parse a command line or to reach a host.
OPTIONAL = ("yaml", "packaging", "rich", "prometheus_client", "platformdirs")
PROFILE = ("introspect.analysis",)  # the aggregator: only once a reply is there


def _modules(tmp_path: Path, code: str) -> set[str]:
    """The top-level names and introspect modules imported by ``code`` in a fresh interpreter."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)), file=sys.stderr)"
    env = {**os.environ, "INTROSPECT_CONFIG": str(tmp_path / "no-config.yaml"),
           "INTROSPECT_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("INTROSPECT_HOSTS", None)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    names = json.loads(proc.stderr.strip().splitlines()[-1])
    return {n.split(".")[0] for n in names} | {n for n in names if n.startswith("introspect.")}


def _loaded(modules: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes))


def test_the_health_command_imports_no_optional_library(tmp_path: Path) -> None:
    modules = _modules(tmp_path, "import introspect.cli.main, introspect.cli.cmd_health")
    assert _loaded(modules, (*OPTIONAL, *PROFILE, "paramiko", "fabric")) == []
    assert "introspect.inventory.loader" not in modules  # the inventory's readers: when one is read
    assert "sqlite3" in modules  # every health run records itself (a bad --db fails before any host)


def test_the_probe_command_imports_neither_the_profile_nor_the_history(tmp_path: Path) -> None:
    modules = _modules(tmp_path, "import introspect.cli.main, introspect.cli.cmd_probe")
    assert _loaded(modules, (*OPTIONAL, *PROFILE, "sqlite3", "paramiko", "fabric")) == []


@pytest.mark.parametrize("command", ["cmd_models", "cmd_history", "cmd_env", "cmd_cache"])
def test_other_commands_import_no_optional_library(tmp_path: Path, command: str) -> None:
    modules = _modules(tmp_path, f"import introspect.cli.main, introspect.cli.{command}")
    assert _loaded(modules, OPTIONAL) == []


def test_help_imports_no_command(tmp_path: Path) -> None:
    modules = _modules(tmp_path, "from introspect.cli.main import main\nmain(['--help'])")
    assert sorted(m for m in modules if m.startswith("introspect.cli.cmd_")) == []


def test_a_json_health_run_without_ssh_hosts_loads_no_optional_library(tmp_path: Path) -> None:
    """An ad-hoc local:// host, --json, no inventory: no yaml, packaging, rich, prometheus_client,
    and no SSH stack (no host of the run uses ssh, so no known_hosts is parsed)."""
    modules = _modules(tmp_path, f"""
import contextlib, io
from introspect.cli.main import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    code = main(['health', '--host', 'local://', '--json', '--db', {str(tmp_path / 'h.db')!r}])
assert code == 0 and '"reachable"' in out.getvalue(), (code, out.getvalue())
""")
    assert _loaded(modules, (*OPTIONAL, "paramiko", "fabric", "invoke")) == []


def test_reading_a_yaml_inventory_loads_yaml_and_packaging_only_then(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text("hosts:\n  gpu-a:\n    address: 127.0.0.1\n    venvs:\n"
                         "      - path: /opt/venv\n        requires: ['click>=8']\n")
    modules = _modules(tmp_path, f"""
from introspect.inventory import read_inventory
assert read_inventory({str(inventory)!r}).hosts[0].venvs[0].requires == ('click>=8',)
""")
    assert {"yaml", "packaging"} <= modules
    assert _loaded(modules, ("rich", "prometheus_client", "platformdirs", *PROFILE)) == []


@pytest.mark.parametrize("width", [60, 80, 100])
def test_help_lines_are_the_commands_own(width: int) -> None:
    """``introspect --help`` without importing the commands reads as click's own listing."""
    ctx = click.Context(cli, max_content_width=100)
    lazy, eager = click.HelpFormatter(width=width), click.HelpFormatter(width=width)
    cli.format_commands(ctx, lazy)
    click.Group.format_commands(cli, ctx, eager)
    assert lazy.getvalue() == eager.getvalue()
    for name, (_target, line) in LAZY_COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert command is not None and command.help is not None
        assert command.help.split("\n\n")[0].replace("\n", " ").strip() == line


def test_db_help_names_the_default_database() -> None:
    from introspect.checks.history import default_path

    for args in (["health", "--help"], ["history", "--help"], ["history", "prune", "--help"]):
        text = " ".join(CliRunner().invoke(cli, args, terminal_width=1000).output.split())
        assert f"History database (default {default_path()})." in text, args


def test_a_preloaded_module_is_imported(tmp_path: Path) -> None:
    modules = _modules(tmp_path, """
import threading
from introspect.client.preload import preload
preload('introspect.analysis.profile')
for thread in threading.enumerate():
    if thread is not threading.current_thread():
        thread.join()
""")
    assert "introspect.analysis.profile" in modules


def test_a_failing_preload_is_silent_and_left_to_the_real_import(capfd: pytest.CaptureFixture[str]) -> None:
    name = "introspect.no_such_module_for_preload"
    preload(name)
    for thread in [t for t in threading.enumerate() if t.name == f"preload {name}"]:
        thread.join()
    assert capfd.readouterr().err == ""
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(name)


def test_paramiko_is_imported_without_importlib_metadata_and_knows_its_version(tmp_path: Path) -> None:
    """paramiko's ``__init__`` reads ``metadata.version("paramiko")``; the stand-in answers it from
    paramiko's own dist-info, so importlib.metadata is never loaded, and the version (in the SSH
    banner, ``SSH-2.0-paramiko_<version>``) is the one importlib.metadata reports."""
    code = ("import sys\nfrom introspect.transport.paramiko_lib import paramiko\n"
            "assert 'importlib.metadata' not in sys.modules, 'importlib.metadata was imported'\n"
            "import importlib.metadata\n"
            "assert paramiko.__version__ == importlib.metadata.version('paramiko'), paramiko.__version__\n"
            "assert sys.modules['importlib.metadata'] is importlib.metadata\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(("infos", "expected"), [
    ({"fakepkg-1.2.3.dist-info": "Metadata-Version: 2.1\nName: fakepkg\nVersion: 1.2.3\n\nbody\n"}, "1.2.3"),
    ({"fakepkg-1.2.3.dist-info": "Name: fakepkg\n\nVersion: 9\n"}, None),  # not in the headers
    ({"fakepkg-1.dist-info": "Version: 1\n", "fakepkg-2.dist-info": "Version: 2\n"}, None),  # which one?
    ({}, None),
])
def test_the_version_stand_in_reads_only_one_clear_dist_info(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             infos: dict[str, str], expected: str | None) -> None:
    from introspect.transport.paramiko_lib import _dist_info_version

    (tmp_path / "fakepkg").mkdir()
    (tmp_path / "fakepkg" / "__init__.py").write_text("")
    for name, text in infos.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "METADATA").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _dist_info_version("fakepkg") == expected
