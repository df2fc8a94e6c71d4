"""The collection's documentation as Ansible reads it, its ``model`` option, and Ansible's own
failure message carried into introspect's error.

``ansible-doc`` refuses a module whose DOCUMENTATION is not YAML (a plain scalar holding
": "), so each block is parsed here and the real ansible-doc of ansible-core 2.19 lists
every module's options. A failed task's tree file is the shape 2.19's tree callback
writes: no ``failed`` key (callbacks get the status as the event, not in the result).
"""

from __future__ import annotations

import ast
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ansible.conftest import Ansible
from tests.conftest import REPO, assert_clean_error, run_cli

MODULES = REPO / "integrations" / "ansible" / "collection" / "plugins" / "modules"
NAMES = ("discover_models", "model_facts", "venv_health")


def _blocks(name: str) -> dict[str, str]:
    tree = ast.parse((MODULES / f"{name}.py").read_text(encoding="utf-8"))
    return {node.targets[0].id: node.value.value for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id in ("DOCUMENTATION", "EXAMPLES", "RETURN")
            and isinstance(node.value, ast.Constant)}


def _argument_spec(name: str) -> dict[str, list[str]]:
    """Each option of the module's argument_spec with its aliases, read from the source."""
    tree = ast.parse((MODULES / f"{name}.py").read_text(encoding="utf-8"))
    spec = next(kw.value for node in ast.walk(tree) if isinstance(node, ast.Call)
                for kw in node.keywords if kw.arg == "argument_spec")
    assert isinstance(spec, ast.Call)
    out = {}
    for option in spec.keywords:
        assert isinstance(option.value, ast.Call) and option.arg
        aliases = [kw.value for kw in option.value.keywords if kw.arg == "aliases"]
        out[option.arg] = ast.literal_eval(aliases[0]) if aliases else []
    return out


@pytest.mark.parametrize("name", NAMES)
def test_documentation_is_yaml_and_matches_the_argument_spec(name: str) -> None:
    blocks = _blocks(name)
    assert sorted(blocks) == ["DOCUMENTATION", "EXAMPLES", "RETURN"]
    parsed = {key: yaml.safe_load(text) for key, text in blocks.items()}
    doc = parsed["DOCUMENTATION"]
    assert doc["module"] == name
    assert all(isinstance(line, str) for line in doc["description"])
    documented = {option: sorted(spec.get("aliases") or []) for option, spec in doc["options"].items()}
    assert documented == {option: sorted(a) for option, a in _argument_spec(name).items()}
    assert isinstance(parsed["EXAMPLES"], list) and isinstance(parsed["RETURN"], dict)


def test_model_is_the_option_and_model_path_its_alias() -> None:
    assert _argument_spec("model_facts")["model"] == ["model_path"]
    example = yaml.safe_load(_blocks("model_facts")["EXAMPLES"])[0]["introspect.models.model_facts"]
    assert "model" in example and "model_path" not in example


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_ansible_doc_lists_every_option(collection: Ansible, name: str) -> None:
    text = collection.run("ansible-doc", f"introspect.models.{name}")
    assert text.returncode == 0, text.stderr[-3000:]
    for option in _argument_spec(name):
        assert f"{option}" in text.stdout, (option, text.stdout[-3000:])
    as_json = collection.run("ansible-doc", "--json", f"introspect.models.{name}")
    assert as_json.returncode == 0, as_json.stderr[-3000:]
    options = json.loads(as_json.stdout)[f"introspect.models.{name}"]["doc"]["options"]
    assert {o: sorted(s.get("aliases") or []) for o, s in options.items()} == {
        o: sorted(a) for o, a in _argument_spec(name).items()}


def _run_module(collection: Ansible, args: dict[str, Any], tmp_path: Path) -> tuple[int, dict[str, Any]]:
    """model_facts run by Ansible's module machinery here, in check mode (the model task reads only)."""
    assert collection.collections is not None
    module = collection.collections / "ansible_collections/introspect/models/plugins/modules/model_facts.py"
    (tmp_path / "args.json").write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {**args, "_ansible_check_mode": True}}))
    proc = subprocess.run([str(collection.bin / "python"), str(module), str(tmp_path / "args.json")],
                          capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
                          env={**collection.env(), "PYTHONPATH": str(collection.collections)})
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.slow
def test_model_and_model_path_both_name_the_model(collection: Ansible, tmp_path: Path) -> None:
    model = tmp_path / "tiny"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama"}')
    for spelling in ("model", "model_path"):
        code, result = _run_module(collection, {spelling: str(model), "python": sys.executable}, tmp_path)
        assert code == 0, result
        facts = result["ansible_facts"]["introspect_model"]
        assert facts["target"]["model_path"] == str(model), spelling
        assert facts["calls"][0]["request"]["model_path"] == str(model), spelling
    code, result = _run_module(collection, {"python": sys.executable}, tmp_path)
    assert code != 0 and "model" in result["msg"]


# What ansible-core 2.19.14 writes with --tree when the interpreter it discovered is a broken
# pyenv shim (captured from a real `ansible -m ping --tree` run against such a shim).
SHIM = {"changed": False, "module_stderr": "pyenv: python3: command not found\n", "module_stdout": "",
        "msg": "Module result deserialization failed: No start of json char found", "rc": 127,
        "ansible_facts": {"discovered_interpreter_python": "/usr/bin/python3"}}
# A module's own fail_json, as the same tree callback writes it.
FAIL_JSON = {"changed": False, "msg": "venvs[0]: needs a path", "invocation": {"module_args": {}}}


def _fix_lines(stderr: str) -> list[str]:
    return [line[len("fix: "):] for line in stderr.splitlines() if line.startswith("fix: ")]


def test_ansibles_failure_message_reaches_the_profile_error(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "gpu01").write_text(json.dumps(SHIM))
    result = run_cli("profile", "--ansible-tree", str(tree), "--json")
    # exit 1: the task failed on the host (exit 3 is kept for hosts Ansible could not reach)
    assert_clean_error(result, 1, "No start of json char found", "pyenv: python3: command not found")
    error = result.json()["hosts"][0]["error"]
    assert "discovered interpreter /usr/bin/python3" in error["message"] and "rc 127" in error["message"]
    assert "ansible_python_interpreter" in error["hint"]
    for line in _fix_lines(result.stderr):
        assert shlex.split(line, comments=True)[0] == "ansible", line


def test_ansibles_failure_message_reaches_the_health_report_not_a_venv_fix(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "gpu01").write_text(json.dumps(SHIM))
    (tree / "gpu02").write_text(json.dumps(FAIL_JSON))
    result = run_cli("health", "--ansible-tree", str(tree), "--db", str(tmp_path / "h.db"), "--json")
    assert result.code == 3, result.stderr
    hosts = {h["name"]: h for h in result.json()["hosts"]}
    shim = hosts["gpu01"]["checks"][0]
    assert hosts["gpu01"]["reachable"] is False
    assert "pyenv: python3: command not found" in shim["message"]
    assert "recreate" not in json.dumps(hosts["gpu01"])
    assert shlex.split(shim["fix"], comments=True)[:2] == ["ansible", "gpu01"]
    assert "venvs[0]: needs a path" in hosts["gpu02"]["checks"][0]["message"]


@pytest.mark.slow
def test_a_real_failed_play_keeps_ansibles_message(collection: Ansible, tmp_path: Path) -> None:
    """The real ansible, a local connection (no network), a broken interpreter shim: its tree
    file is read back with Ansible's own message and the module's stderr."""
    shim = tmp_path / "python3"
    shim.write_text("#!/bin/sh\necho 'pyenv: python3: command not found' >&2\nexit 127\n")
    shim.chmod(0o755)
    tree = tmp_path / "tree"
    proc = collection.run("ansible", "localhost", "-c", "local", "-i", "localhost,", "-m",
                          "introspect.models.venv_health", "-a", json.dumps({"venvs": [{"path": "/opt/v"}]}),
                          "-e", f"ansible_python_interpreter={shim}", "--tree", str(tree))
    assert proc.returncode != 0 and (tree / "localhost").is_file(), proc.stdout[-2000:] + proc.stderr[-2000:]
    result = run_cli("profile", "--ansible-tree", str(tree), "--json")
    message = result.json()["hosts"][0]["error"]["message"]
    assert message.startswith("Ansible: the module failed: "), message
    assert "pyenv: python3: command not found" in message and "rc 127" in message
