"""Ansible inventories read as hosts.yaml entries, checked against ansible-core itself.

Each inventory (INI, YAML, an executable script) is read twice: by
``load_inventory_file`` from the file, and from the JSON that the real
``ansible-inventory -i FILE --list`` prints for it. Both must give the same host
entries (names, addresses, ports, users, keys, jumps, interpreters, venvs, tags),
so groups, children, ranges, host:port, group_vars/host_vars and variable
precedence are read as Ansible reads them. Then the values themselves, and errors
that name the file, line and variable.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from introspect.inventory import HostEntry, Inventory, InventoryError, load_inventory_file, select_hosts
from tests.ansible.conftest import Ansible
from tests.conftest import assert_clean_error, run_cli

INI = """\
spare ansible_host=10.9.0.1
[gpu]
gpu[01:03] ansible_host=10.0.0.5 ansible_user=ml
edge:2222 ansible_ssh_common_args='-o ProxyJump=ops@bastion:2200'
[gpu:vars]
ansible_python_interpreter=/usr/bin/python3
introspect_venvs=[{"path": "/opt/venvs/serve", "requires": ["transformers>=4.57"], "imports": ["json"]}]
[cpu]
node-[a:c:2]
[fleet:children]
gpu
cpu
[fleet:vars]
ansible_port=2201
ansible_user=fleet
[controller]
ctl ansible_connection=local
"""

YAML = """\
all:
  vars:
    ansible_user: root
  hosts:
    lonely:
      ansible_host: 10.8.0.1
  children:
    gpu:
      vars:
        ansible_ssh_private_key_file: /keys/gpu
        introspect_venvs:
          - path: /opt/venvs/serve
            imports: [json]
      hosts:
        gpu[08:10:2]:
          ansible_port: 2222
        gpu-x:9000:
      children:
        h100:
          hosts:
            gpu08:
              ansible_ssh_common_args: -o ProxyCommand="ssh -W %h:%p -q jump.example"
          vars:
            introspect_models: [/models/kimi]
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def _by_name(inventory: Inventory) -> dict[str, HostEntry]:
    # --list prints hosts sorted by name; the file's order is kept by the file readers.
    return {h.name: h for h in sorted(inventory.hosts, key=lambda h: h.name)}


def _listed(ansible: Ansible, inventory: Path, tmp_path: Path) -> Path:
    """What ansible-inventory --list prints for the inventory, saved as a JSON file."""
    proc = ansible.run("ansible-inventory", "-i", str(inventory), "--list", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "listed" / "inventory.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(proc.stdout, encoding="utf-8")
    return out


def test_ini_inventory_reads_as_ansible_does(ansible: Ansible, tmp_path: Path) -> None:
    _write(tmp_path, {"inv.ini": INI, "group_vars/cpu.yml": "ansible_user: cpuuser\n",
                      "group_vars/gpu/10-key.yml": "ansible_ssh_private_key_file: /keys/gpu\n",
                      "host_vars/gpu02.yml": "ansible_port: 2299\nintrospect_roots: [/models]\n"})
    ours = load_inventory_file(tmp_path / "inv.ini")
    assert _by_name(ours) == _by_name(load_inventory_file(_listed(ansible, tmp_path / "inv.ini", tmp_path)))

    by_name = {h.name: h for h in ours.hosts}
    assert list(by_name) == ["spare", "gpu01", "gpu02", "gpu03", "edge", "node-a", "node-c", "ctl"]
    assert (by_name["ctl"].url, by_name["ctl"].tags) == ("local://", ("controller",))
    gpu01, gpu02, edge, node = by_name["gpu01"], by_name["gpu02"], by_name["edge"], by_name["node-c"]
    # host line > group vars > parent group vars; host_vars/ beats the inventory file.
    assert (gpu01.address, gpu01.port, gpu01.user, gpu01.identity) == ("10.0.0.5", 2201, "ml", "/keys/gpu")
    assert (gpu02.port, gpu02.roots) == (2299, ("/models",))
    assert (edge.address, edge.port, edge.jump, edge.python) == ("edge", 2222, "ops@bastion:2200", "/usr/bin/python3")
    assert gpu01.venvs[0].path == "/opt/venvs/serve" and gpu01.venvs[0].requires == ("transformers>=4.57",)
    assert (node.user, node.port, node.tags, node.venvs) == ("cpuuser", 2201, ("fleet", "cpu"), ())
    assert by_name["spare"].tags == () and gpu01.tags == ("fleet", "gpu")
    # Groups are tags: --tags cpu selects that group's hosts.
    assert [h.name for h in select_hosts(ours, tags=["cpu"])] == ["node-a", "node-c"]


def test_yaml_inventory_and_inventory_script_read_as_ansible_does(ansible: Ansible, tmp_path: Path) -> None:
    _write(tmp_path, {"fleet.yml": YAML, "host_vars/gpu10.yaml": "ansible_host: 10.0.0.10\n"})
    ours = load_inventory_file(tmp_path / "fleet.yml")
    listed = _listed(ansible, tmp_path / "fleet.yml", tmp_path)
    assert _by_name(ours) == _by_name(load_inventory_file(listed))

    by_name = {h.name: h for h in ours.hosts}
    assert list(by_name) == ["lonely", "gpu08", "gpu10", "gpu-x"]
    gpu08, gpu10 = by_name["gpu08"], by_name["gpu10"]
    assert (gpu08.port, gpu08.user, gpu08.identity, gpu08.jump) == (2222, "root", "/keys/gpu", "jump.example")
    assert gpu08.tags == ("gpu", "h100") and gpu08.venvs[0].models == ("/models/kimi",)
    assert (gpu10.address, gpu10.venvs[0].models) == ("10.0.0.10", ())
    assert by_name["gpu-x"].port == 9000

    # An executable inventory script answering --list: Ansible's script plugin protocol.
    script = tmp_path / "inventory.py"
    script.write_text(f"#!/bin/sh\n[ \"$1\" = --list ] && exec cat {listed}\nexit 1\n", encoding="utf-8")
    script.chmod(0o755)
    assert _by_name(load_inventory_file(script)) == _by_name(ours)


def test_hosts_yaml_still_reads_by_any_name(tmp_path: Path) -> None:
    text = "hosts:\n  gpu-a:\n    address: 10.0.0.1\n    tags: [gpu]\n"
    _write(tmp_path, {"hosts.yaml": text, "fleet": text})
    assert load_inventory_file(tmp_path / "hosts.yaml").hosts == load_inventory_file(tmp_path / "fleet").hosts
    assert load_inventory_file(tmp_path / "fleet").hosts[0].address == "10.0.0.1"


@pytest.mark.parametrize(("files", "where", "needle"), [
    ({"inv.ini": "[gpu]\ngpu01\n", "group_vars/gpu.yml": "# key\nansible_port: 99999\n"},
     "group_vars/gpu.yml:2: gpu01: ansible_port", "out of range"),
    ({"inv.ini": "[gpu]\ngpu01 introspect_venv=[]\n"}, "inv.ini:2: gpu01: introspect_venv",
     "did you mean 'introspect_venvs'"),
    ({"inv.ini": "[gpu]\ngpu[01:3]\n"}, "inv.ini:2", "equally long"),
    ({"inv.ini": "[gpu]\ngpu01 ansible_ssh_common_args='-o StrictHostKeyChecking=no'\n"},
     "inv.ini:2: gpu01: ansible_ssh_common_args", "--ssh-option"),
    ({"inv.ini": "[all:children]\nmissing\n"}, "inv.ini:2", "undefined group 'missing'"),
    ({"inv.ini": "[gpu]\ngpu01 port2222\n"}, "inv.ini:2", "key=value"),
    ({"inv.yml": "all:\n  hosts:\n    gpu01:\n      introspect_venvs:\n        - path: relative/venv\n"},
     "inv.yml:5: gpu01: introspect_venvs[0].path", "absolute path"),
    ({"inv.yml": "all:\n  host:\n    gpu01:\n"}, "inv.yml:2: all.host", "unknown key"),
    ({"inv.yml": "all:\n  hosts:\n    gpu01:\n      ansible_user: !vault |\n        $ANSIBLE_VAULT;1.1\n"},
     "inv.yml:4: gpu01: ansible_user", "ansible-vault"),
])
def test_bad_entries_name_file_line_and_variable(tmp_path: Path, files: dict[str, str], where: str,
                                                 needle: str) -> None:
    _write(tmp_path, files)
    with pytest.raises(InventoryError) as caught:
        load_inventory_file(tmp_path / next(iter(files)))
    message = str(caught.value)
    assert message.startswith(str(tmp_path / where)), message
    assert needle in message, message


def test_cli_takes_an_ansible_inventory(tmp_path: Path) -> None:
    _write(tmp_path, {"inv.ini": "[gpu]\ngpu01 ansible_port=0\n"})
    result = run_cli("health", "--inventory", str(tmp_path / "inv.ini"), "--db", str(tmp_path / "h.db"))
    assert_clean_error(result, 2, "inv.ini:2: gpu01: ansible_port", "out of range")
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps({"_meta": {"hostvars": {}}, "all": {"children": ["gpu"]},
                                  "gpu": {"hosts": ["gpu01"]}}), encoding="utf-8")
    with pytest.raises(InventoryError, match="tags in use: gpu"):
        select_hosts(load_inventory_file(listed), tags=["cpu"])
