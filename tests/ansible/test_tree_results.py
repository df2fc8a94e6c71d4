"""``--ansible-tree`` on what Ansible writes for hosts it could not serve, and on bad trees.

The result files here have the shapes ansible-core writes with ``--tree`` for an
unreachable host (``unreachable: true``, ``msg``) and for a failed module
(``failed: true``, ``msg``, ``module_stderr``); the successful shape is produced by the
real ansible in test_collection.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import assert_clean_error, run_cli

UNREACHABLE = {"unreachable": True, "changed": False,
               "msg": "Failed to connect to the host via ssh: ssh: connect to host 10.0.0.9 port 22: "
                      "Connection refused"}
FAILED = {"failed": True, "changed": False, "rc": 127, "module_stdout": "",
          "module_stderr": "/bin/sh: 1: /opt/py/bin/python: not found\n",
          "msg": "The module failed to execute correctly, you probably need to set the interpreter."}


def test_hosts_ansible_could_not_serve_keep_ansibles_message(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "gpu-down").write_text(json.dumps(UNREACHABLE))
    (tree / "gpu-broken").write_text(json.dumps(FAILED))
    result = run_cli("profile", "--ansible-tree", str(tree), "--json")
    assert result.code == 3, result.stderr
    items = {item["host"]: item for item in result.json()["hosts"]}
    assert items["gpu-down"]["exit_code"] == 3
    assert items["gpu-down"]["error"]["message"] == "Ansible: unreachable: " + UNREACHABLE["msg"]
    assert "you probably need to set the interpreter" in items["gpu-broken"]["error"]["message"]
    assert "gpu-down: Ansible: unreachable: Failed to connect" in result.stderr
    assert "Traceback" not in result.stderr

    health = run_cli("health", "--ansible-tree", str(tree), "--db", str(tmp_path / "h.db"), "--json")
    assert health.code == 3, health.stderr  # hosts that could not be reached: exit 3, as natively
    hosts = {h["name"]: h for h in health.json()["hosts"]}
    assert hosts["gpu-down"]["reachable"] is False
    assert UNREACHABLE["msg"] in hosts["gpu-down"]["checks"][0]["message"]
    assert hosts["gpu-broken"]["reachable"] is False
    assert "Ansible: the module failed: " in hosts["gpu-broken"]["checks"][0]["message"]


def test_a_tree_that_is_not_ansibles_output_is_a_clean_usage_error(tmp_path: Path) -> None:
    (tmp_path / "gpu01").write_text("not json")
    assert_clean_error(run_cli("profile", "--ansible-tree", str(tmp_path)), 2, "cannot read Ansible's result")


def test_an_inventory_host_missing_from_the_tree_is_unreachable(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "gpu01").write_text(json.dumps(UNREACHABLE))
    (tmp_path / "inv.ini").write_text("[gpu]\ngpu01\ngpu02\n[cpu]\ncpu01\n")
    result = run_cli("health", "--ansible-tree", str(tree), "--inventory", str(tmp_path / "inv.ini"), "--tags",
                     "gpu", "--db", str(tmp_path / "h.db"), "--json")
    assert result.code == 3, result.stderr
    hosts = {h["name"]: h for h in result.json()["hosts"]}
    assert sorted(hosts) == ["gpu01", "gpu02"]  # --tags: the inventory's groups
    assert not hosts["gpu02"]["reachable"]
    assert f"no result for gpu02 in {tree}" in hosts["gpu02"]["checks"][0]["message"]
