"""The wheel users install: its name, license, typing marker, package data and entry point.

Built offline from a copy of the tree (``--no-build-isolation``: this venv's setuptools),
so the checkout gets no ``build/`` dir.
"""

from __future__ import annotations

import email.parser
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from introspect import __version__

REPO = Path(__file__).resolve().parent.parent.parent
SOURCES = ("introspect", "pyproject.toml", "README.md", "LICENSE", "MANIFEST.in", "hosts.yaml",
           "scripts/introspect-health.service", "scripts/introspect-health.timer")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    tree = tmp_path_factory.mktemp("tree")
    for name in SOURCES:
        source, target = REPO / name, tree / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, target)
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "--disable-pip-version-check", "-w", str(out), str(tree)],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (built,) = out.glob("*.whl")
    assert built.name == f"introspect_models-{__version__}-py3-none-any.whl"
    return zipfile.ZipFile(built)


def test_wheel_metadata(wheel: zipfile.ZipFile) -> None:
    info = f"introspect_models-{__version__}.dist-info"
    meta = email.parser.Parser().parsestr(wheel.read(f"{info}/METADATA").decode())
    assert meta["Name"] == "introspect-models" and meta["License-Expression"] == "Apache-2.0"
    assert meta["License-File"] == "LICENSE"
    requires = {r.split(";")[0].replace(" ", "") for r in meta.get_all("Requires-Dist")}
    for bounded in ("paramiko<6,>=3.4", "click<9,>=8.1", "rich<16,>=13"):
        assert bounded in requires, requires
    assert not any(r.startswith("fabric") for r in requires), requires  # the ssh transport is paramiko alone
    license_text = wheel.read(f"{info}/licenses/LICENSE").decode()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text  # the full text, not a stub
    assert "introspect = introspect.cli.main:main" in wheel.read(f"{info}/entry_points.txt").decode()


def test_wheel_contents(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    assert {"introspect/py.typed", "introspect/api.py", "introspect/cli/main.py", "introspect/remote/contract.py",
            "introspect/remote/tasks/model.py"} <= names
    # The JSON Schemas ship with the models they are generated from (`introspect schema NAME` reads them).
    assert {"introspect/schemas/profile.v1.json", "introspect/schemas/VERSIONS", "introspect/documents/profile.py"} <= names
    for example, original in (("hosts.yaml", "hosts.yaml"),
                              ("introspect-health.service", "scripts/introspect-health.service"),
                              ("introspect-health.timer", "scripts/introspect-health.timer")):
        # A file, not a link, with the repo's text.
        assert wheel.read(f"introspect/examples/{example}") == (REPO / original).read_bytes()
    assert not [n for n in names if n.startswith("tests/") or "__pycache__" in n]
