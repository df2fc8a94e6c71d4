"""What `introspect health` loads at start-up and ships to each host (docs/performance.md, 2b and 2c).

Behaviour, not timings: a real ``health --json`` run against the loopback sshd must not import
pydantic, the document models or the profile's analysis (they cost more CPU than the rest of
the start-up), its document must be exactly what the typed model writes, and the remote side
must not be sent contract's TypedDict modules it never uses (tests/transport/test_strip.py
checks the health task's payload).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from introspect.documents.health import HealthDocument
from introspect.transport import shipping
from tests.conftest import REPO, check_stdout
from tests.sshd_server import ClientKeys, SSHServer

# Runs the CLI as `python -m introspect.cli.main` does, then reports every module it loaded.
WRAPPER = """\
import json, runpy, sys
sys.argv = ["introspect", *sys.argv[1:]]
try:
    runpy.run_module("introspect.cli.main", run_name="__main__")
except SystemExit as exc:
    code = exc.code
sys.stderr.write("\\n@@MODULES@@" + json.dumps(sorted(sys.modules)) + "\\n")
sys.exit(code)
"""
# pydantic and the models; the profile's analysis; the remote side's TypedDict modules (contract
# imports them on first use, and nothing in health uses one at run time).
HEAVY = ("pydantic", "introspect.documents.", "introspect.analysis.tokenizer.tokenizer_autotokenizer",
         "introspect.analysis.findings", "introspect.remote.sections", "introspect.remote.wire")


def _run(tmp_path: Path, *args: str) -> tuple[int, str, list[str]]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO), INTROSPECT_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-c", WRAPPER, *args], capture_output=True, text=True, timeout=240,
                          env=env, cwd=tmp_path)
    head, _, modules = proc.stderr.rpartition("@@MODULES@@")
    assert modules, proc.stderr
    assert "Traceback" not in head, head
    return proc.returncode, proc.stdout, json.loads(modules)


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m.startswith(HEAVY) or m in ("pydantic", "introspect.documents")]


def test_health_json_run_loads_no_document_model_and_prints_the_typed_document(
        tmp_path: Path, sshd: SSHServer, client_keys: ClientKeys) -> None:
    venv = Path(sys.prefix)  # this venv's own interpreter, on the loopback host
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text(yaml.safe_dump({
        "defaults": {"identity": str(client_keys.key), "known_hosts": str(client_keys.known_hosts),
                     "connect_timeout": 10, "probe_timeout": 90},
        "hosts": {"loop": {"address": sshd.address, "port": sshd.port,
                           "venvs": [{"path": str(venv), "requires": ["click"]}]}},
    }))
    code, stdout, modules = _run(tmp_path, "health", "--hosts", str(inventory), "--db", str(tmp_path / "h.db"),
                                 "--ssh-config", "/dev/null", "--json")
    check_stdout(stdout)
    doc = json.loads(stdout)
    assert code == 0 and doc["summary"]["hosts"] == 1 and not doc["summary"]["unreachable"], stdout
    assert _heavy(modules) == []
    # The object printed without pydantic is, key for key, what the typed document writes back.
    body = {k: v for k, v in doc.items() if k != "introspect_version"}
    assert HealthDocument.model_validate(body).to_dict() == body


def test_health_help_loads_no_document_model(tmp_path: Path) -> None:
    code, stdout, modules = _run(tmp_path, "health", "--help")
    assert code == 0 and "--hosts" in stdout
    assert _heavy(modules) == []


def test_contract_loads_its_shapes_on_first_use_only() -> None:
    code = ("import sys\nimport introspect.remote.contract as c\n"
            "before = 'introspect.remote.sections' in sys.modules or 'introspect.remote.wire' in sys.modules\n"
            "from introspect.remote.contract import TokenizerProbe, RawFacts, Envelope\n"
            "after = all(m in sys.modules for m in ('introspect.remote.sections', 'introspect.remote.wire'))\n"
            "try:\n    c.NoSuchShape\nexcept AttributeError:\n    missing = True\nelse:\n    missing = False\n"
            "print(before, after, missing, RawFacts.__name__, sorted(c.SHAPE_MODULES))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.stdout.split() == ["False", "True", "True", "RawFacts", "['sections',", "'wire',",
                                   "'wire_preflight']"], proc.stderr
    assert {f"introspect.remote.{m}" for m in ("sections", "wire", "wire_preflight")} == shipping.SHAPES


def test_a_module_naming_a_shape_gets_the_shapes_shipped() -> None:
    sources = dict(shipping.remote_sources())
    sources["introspect.remote.probe_x"] = "from .contract import DEFAULT_JSON_CAP, ErrorRecord\n"
    sources["introspect.remote.probe_y"] = "from .contract import DEFAULT_JSON_CAP, TokenizerProbe\n"
    sources["introspect.remote.probe_z"] = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                            "    from .contract import TokenizerProbe\nX = 1\n")
    packages = shipping.remote_packages()
    assert not shipping._imports("introspect.remote.probe_x", sources, packages) & shipping.SHAPES
    assert shipping._imports("introspect.remote.probe_y", sources, packages) >= shipping.SHAPES
    assert not shipping._imports("introspect.remote.probe_z", sources, packages) & shipping.SHAPES


def test_requirements_skipped_unparsed_are_exactly_ones_pip_check_skips() -> None:
    """Every Requires-Dist of this venv that the extra-only test skips is one packaging judges
    inapplicable for the base install (extra ""); and that test does skip most of them."""
    import importlib.metadata as metadata

    from packaging.requirements import Requirement

    from introspect.checks.packages import ONLY_AN_EXTRA

    raws = {raw for dist in metadata.distributions() for raw in dist.requires or []}
    skipped = [raw for raw in raws if ONLY_AN_EXTRA.search(raw)]
    assert len(skipped) > len(raws) / 2
    for raw in skipped:
        marker = Requirement(raw).marker
        assert marker is not None and not marker.evaluate({"extra": ""}), raw
    for raw in ('a; python_version < "3.9" or extra == "x"', 'a; extra == ""', 'a; (extra == "x")', "a"):
        assert not ONLY_AN_EXTRA.search(raw), raw
