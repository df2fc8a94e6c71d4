"""The introspect.models collection, built from this checkout, run by the real ``ansible``
against loopback sshd hosts, and its results read back by ``--ansible-tree``.

The profile and health report made from Ansible's results must equal the native ones
of the same model and venvs (architecture, tokenizer facts, findings; every check's
status), and a host Ansible could not reach must be reported unreachable with
Ansible's own message.
"""

from __future__ import annotations

import glob
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from introspect.transport import shipping
from tests.ansible.conftest import Ansible, Hosts
from tests.conftest import REPO, CLIResult, run_cli
from tests.sshd_server import free_port

pytestmark = [pytest.mark.ssh, pytest.mark.slow]


def _oldest_python() -> str:
    """Python 3.8 (the floor of the remote side, and of ansible-core 2.19's targets) when the
    machine has one: h2's modules run under it; else this interpreter."""
    found = sorted(glob.glob("/root/.pyenv/versions/3.8*/bin/python3.8")) + [
        p for p in ("/usr/bin/python3.8", "/usr/local/bin/python3.8") if Path(p).exists()]
    return found[0] if found else sys.executable


@pytest.fixture(scope="module")
def fleet(ansible_hosts: Hosts, kimi_model: Path, venv_full: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An INI inventory: h1 (a venv with one model), h2 (a venv; Ansible's modules under Python 3.8),
    h3 (nothing listens there)."""
    root = tmp_path_factory.mktemp("ansible-fleet")
    h1, h2 = ansible_hosts.servers
    venv_h1 = [{"path": str(venv_full), "requires": ["transformers>=4.0"], "imports": ["json", "no_such_module"],
                "models": [str(kimi_model)]}]
    venv_h2 = [{"path": str(venv_full), "imports": ["json"]}]
    (root / "inv.ini").write_text(f"""\
[gpu]
h1 ansible_host={h1.address} ansible_port={h1.port} introspect_venvs='{json.dumps(venv_h1)}'
h2 ansible_host={h2.address} ansible_port={h2.port} introspect_venvs='{json.dumps(venv_h2)}' \
ansible_python_interpreter={_oldest_python()}
h3 ansible_host=127.0.0.33 ansible_port={free_port("127.0.0.33")} introspect_venvs='{json.dumps(venv_h2)}'
[gpu:vars]
ansible_ssh_private_key_file={ansible_hosts.keys.key}
ansible_python_interpreter={sys.executable}
""", encoding="utf-8")
    return root


def _ansible(collection: Ansible, hosts: Hosts, fleet: Path, pattern: str, module: str, args: dict[str, Any],
             tree: str, *extra: str) -> Path:
    proc = collection.run("ansible", pattern, "-i", str(fleet / "inv.ini"), "-m", f"introspect.models.{module}",
                          "-a", json.dumps(args), "--tree", str(fleet / tree), *extra,
                          known_hosts=hosts.keys.known_hosts, cwd=fleet)
    # 0: every host ok; 4: some host unreachable (ansible's exit codes)
    assert proc.returncode in (0, 4), (proc.stdout[-3000:], proc.stderr[-3000:])
    assert (fleet / tree).is_dir(), (proc.stdout[-3000:], proc.stderr[-3000:])
    return fleet / tree


def _native(hosts: Hosts, fleet: Path, *args: str) -> CLIResult:
    return run_cli(*args, "--inventory", str(fleet / "inv.ini"), "--known-hosts", str(hosts.keys.known_hosts),
                   "--ssh-config", "/dev/null")


def test_modules_carry_the_remote_package_generated_at_build(collection: Ansible) -> None:
    assert collection.collections is not None
    installed = collection.collections / "ansible_collections" / "introspect" / "models"
    payload: dict[str, Any] = {}
    exec((installed / "plugins" / "module_utils" / "introspect_payload.py").read_text(), payload)
    assert payload["SOURCES"] == shipping.remote_sources()
    assert payload["BOOT"] == shipping.boot_source()
    # Never a kept copy in the repository: only the build writes it.
    assert not list((REPO / "integrations").rglob("introspect_payload.py"))
    assert sorted(p.stem for p in (installed / "plugins" / "modules").glob("*.py")) == [
        "discover_models", "model_facts", "venv_health"]


def test_model_facts_make_the_native_profile(collection: Ansible, ansible_hosts: Hosts, fleet: Path,
                                             kimi_model: Path, venv_full: Path) -> None:
    tree = _ansible(collection, ansible_hosts, fleet, "h1:h2", "model_facts",
                    {"model_path": str(kimi_model), "venv": str(venv_full), "tokenizer": True,
                     "model_code": True}, "model-tree")
    fromtree = run_cli("profile", "--ansible-tree", str(tree), "--json")
    assert fromtree.code == 0, fromtree.stderr
    native = _native(ansible_hosts, fleet, "probe", "--host", "h1", "--model", str(kimi_model), "--venv",
                     str(venv_full), "--json")
    assert native.code == 0, native.stderr
    document, expected = fromtree.json(), native.json()
    assert [item["host"] for item in document["hosts"]] == ["h1", "h2"]
    for item in document["hosts"]:
        profile = item["profile"]
        for key in ("architecture", "tokenizer", "findings", "files", "environment"):
            assert profile[key] == expected[key], (item["host"], key)
        assert profile["target"]["host"] == item["host"] and profile["target"]["venv"] == str(venv_full)


def _run_module(collection: Ansible, module: str, args: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """One module run by Ansible's own module machinery on this machine (AnsibleModule reads an
    args file), check mode on: what a managed host does after ``ansible --check`` shipped it."""
    assert collection.collections is not None
    path = collection.collections / "ansible_collections" / "introspect" / "models" / "plugins" / "modules"
    (tmp_path / "args.json").write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {**args, "_ansible_check_mode": True}}))
    proc = subprocess.run([str(collection.bin / "python"), str(path / f"{module}.py"), str(tmp_path / "args.json")],
                          capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
                          env={**collection.env(), "PYTHONPATH": str(collection.collections)})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_check_mode_skips_the_tokenizer_load_only(collection: Ansible, kimi_model: Path, venv_full: Path,
                                                  tmp_path: Path) -> None:
    result = _run_module(collection, "model_facts",
                         {"model_path": str(kimi_model), "venv": str(venv_full), "tokenizer": True}, tmp_path)
    facts = result["ansible_facts"]["introspect_model"]
    assert result["changed"] is False
    assert [c["task"] for c in facts["calls"]] == ["model"] and facts["skipped_in_check_mode"] == ["tokenizer"]
    assert facts["calls"][0]["reply"]["facts"]["files"]["status"] == "ok"
    # Read-only discovery runs in check mode as it does otherwise.
    found = _run_module(collection, "discover_models", {"roots": [str(kimi_model.parent)]}, tmp_path)
    reply = found["ansible_facts"]["introspect_models"]["calls"][0]["reply"]
    assert [m["path"] for m in reply["facts"]["models"]] == [str(kimi_model)]


def _statuses(report: dict[str, Any]) -> dict[str, Any]:
    return {h["name"]: (h["reachable"], [(c["check"], c["status"]) for c in h["checks"]],
                        [[(c["check"], c["status"]) for c in v["checks"]] for v in h["venvs"]])
            for h in report["hosts"]}


def test_venv_health_makes_the_native_report(collection: Ansible, ansible_hosts: Hosts, fleet: Path) -> None:
    tree = _ansible(collection, ansible_hosts, fleet, "all", "venv_health", {"venvs": "{{ introspect_venvs }}"},
                    "health-tree")
    assert json.loads((tree / "h3").read_text())["unreachable"] is True
    fromtree = run_cli("health", "--ansible-tree", str(tree), "--inventory", str(fleet / "inv.ini"),
                       "--db", str(fleet / "tree.db"), "--prom", str(fleet / "tree.prom"), "--json")
    native = _native(ansible_hosts, fleet, "health", "--db", str(fleet / "native.db"), "--prom",
                     str(fleet / "native.prom"), "--json")
    assert fromtree.code == native.code == 3, (fromtree.stderr, native.stderr)  # h3 unreachable: exit 3
    ours, expected = fromtree.json(), native.json()
    assert _statuses(ours) == _statuses(expected)
    checks = {c["check"]: c for c in ours["hosts"][0]["venvs"][0]["checks"]}
    assert checks["import:no_such_module"]["status"] == "fail"
    assert any(name.startswith("tokenizer") and c["status"] == "pass" for name, c in checks.items()), checks
    down = ours["hosts"][2]["checks"][0]
    assert down["check"] == "reachable" and down["status"] == "fail"
    assert down["message"].startswith("[ansible] Ansible: unreachable: ") and "ssh" in down["message"].lower()

    def metrics(path: Path) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
        families = text_string_to_metric_families(path.read_text())
        return {(s.name, tuple(sorted(s.labels.items()))) for f in families for s in f.samples if "seconds" not in s.name and "timestamp" not in s.name}

    assert metrics(fleet / "tree.prom") == metrics(fleet / "native.prom")
    with sqlite3.connect(fleet / "tree.db") as db:
        rows = db.execute("SELECT host, status FROM results ORDER BY host").fetchall()
    assert {host for host, _ in rows} == {"h1", "h2", "h3"} and ("h3", "fail") in rows
