"""hosts.yaml loading and validation (issue 4): every rejection names file, line and key."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from introspect.inventory import (
    Defaults,
    HostEntry,
    Inventory,
    InventoryError,
    VenvEntry,
    load_inventory,
    parse_inventory,
    select_hosts,
)

REPO = Path(__file__).resolve().parents[2]

VALID = """\
defaults:
  user: ops
  connect_timeout: 3
  parallel: 4
  remote_code: false
hosts:
  gpu-a:
    address: 10.1.2.200
    port: 2222
    tags: [serving, h100]
    remote_code: true
    venvs:
      - path: /opt/venvs/serve/
        requires: ["transformers>=4.57", tiktoken, "numpy<2; python_version < '3.9'"]
        imports: [tiktoken, google.protobuf]
        models: [/models/qwen]
        min_free_gb: 10
      - path: /opt/venvs/data
        remote_code: false
  gpu-b:
    jump: ops@bastion:22
    tags: [batch]
    passphrase_env: GPU_B_PASS
    user: svc
    roots: [/models]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hosts.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_valid_inventory(tmp_path: Path) -> None:
    inv = load_inventory(write(tmp_path, VALID))
    assert isinstance(inv, Inventory)
    assert inv.defaults == Defaults(user="ops", connect_timeout=3.0, parallel=4, remote_code=False)
    a, b = inv.hosts
    assert isinstance(a, HostEntry)
    assert (a.name, a.address, a.port, a.user, a.tags) == ("gpu-a", "10.1.2.200", 2222, "ops", ("serving", "h100"))
    assert a.remote_code is True
    serve, data = a.venvs
    assert serve == VenvEntry(
        path="/opt/venvs/serve",  # trailing slash dropped: the path keys history and metrics
        requires=("transformers>=4.57", "tiktoken", "numpy<2; python_version < '3.9'"),
        imports=("tiktoken", "google.protobuf"),
        models=("/models/qwen",),
        remote_code=True,  # inherited from the host
        min_free_gb=10.0,
    )
    assert serve.python == "/opt/venvs/serve/bin/python"
    assert data.remote_code is False
    # No address: the name is the destination (an ~/.ssh/config alias); port left to ssh config.
    assert (b.address, b.port, b.user, b.jump, b.passphrase_env) == ("gpu-b", None, "svc", "ops@bastion:22",
                                                                     "GPU_B_PASS")
    assert b.roots == ("/models",) and b.venvs == () and b.remote_code is False
    assert inv.host("gpu-b") is b and inv.find("gpu-b") is b and inv.find("gpu-z") is None
    with pytest.raises(InventoryError, match="no host named 'gpu-z'"):
        inv.host("gpu-z")
    assert a.line == 7


def test_list_form_and_empty_host(tmp_path: Path) -> None:
    inv = load_inventory(write(tmp_path, """\
        hosts:
          - name: h1
            address: 10.1.2.200
          - name: h2
        """))
    assert [(h.name, h.address) for h in inv.hosts] == [("h1", "10.1.2.200"), ("h2", "h2")]
    assert inv.defaults == Defaults()


def test_example_inventory_at_repo_root_is_valid() -> None:
    # Explicitly loaded: the documented example must not rot.
    inv = load_inventory(REPO / "hosts.yaml")
    assert {h.name for h in inv.hosts} == {"gpu-a1", "gpu-b7"}
    assert all(h.address != "127.0.0.1" for h in inv.hosts)
    assert inv.host("gpu-b7").jump
    assert len(inv.host("gpu-a1").venvs) == 2


REJECTIONS = [
    pytest.param(
        """\
        hosts:
          gpu-a:
            adress: 10.1.2.200
        """, 3, "hosts.gpu-a.adress", "did you mean 'address'", id="unknown-key"),
    pytest.param(
        """\
        defaults:
          parallel: 4
          paralel: 8
        hosts: {a: {}}
        """, 3, "defaults.paralel", "unknown key", id="unknown-key-defaults"),
    pytest.param(
        """\
        hosts:
          gpu-a:
            address: 10.1.2.200
            port: "22"
        """, 4, "hosts.gpu-a.port", "expected an integer", id="wrong-type-port"),
    pytest.param(
        """\
        hosts:
          gpu-a:
            tags: serving
        """, 3, "hosts.gpu-a.tags", "expected a list", id="wrong-type-tags"),
    pytest.param(
        """\
        hosts:
          gpu-a:
            venvs:
              - path: /opt/v
                remote_code: "yes"
        """, 5, "hosts.gpu-a.venvs[0].remote_code", "expected true or false", id="wrong-type-bool"),
    pytest.param(
        """\
        hosts:
          gpu-a:
            address: 10.1.2.200
          gpu-b:
            address: 10.1.2.201
          gpu-a:
            address: 10.1.2.202
        """, 6, "hosts.gpu-a", "duplicate host 'gpu-a' (first defined on line 2)", id="duplicate-host-mapping"),
    pytest.param(
        """\
        hosts:
          gpu-a:
            address: 10.1.2.200
            tags: [a]
            address: 10.1.2.201
        """, 5, "hosts.gpu-a.address", "duplicate key 'address' (first defined on line 3)",
        id="duplicate-key-in-host"),
    pytest.param(
        """\
        hosts:
          - name: gpu-a
          - name: gpu-a
        """, 3, "hosts[1].name", "duplicate host name 'gpu-a'", id="duplicate-host-list"),
    pytest.param(
        """\
        hosts:
          gpu-a:
            address: 10.1.2.200
            password: hunter2
        """, 4, "hosts.gpu-a.password", "ssh-agent", id="password"),
    pytest.param(
        """\
        defaults:
          ssh_passphrase: hunter2
        hosts: {a: {}}
        """, 2, "defaults.ssh_passphrase", "passphrase_env", id="passphrase"),
    pytest.param(
        """\
        hosts:
          gpu-a:
            venvs:
              - path: /opt/v
                hf_token: hf_abcdef
        """, 5, "hosts.gpu-a.venvs[0].hf_token", "environment variable", id="token"),
    pytest.param(
        """\
        hosts:
          gpu-a:
            passphrase_env: "hunter2!"
        """, 3, "hosts.gpu-a.passphrase_env", "not an environment variable name", id="passphrase-env-value"),
    pytest.param(
        """\
        hosts:
          gpu-a:
            venvs:
              - path: /opt/v
                requires:
                  - tiktoken
                  - transformers>=>4.57
        """, 7, "hosts.gpu-a.venvs[0].requires[1]", "invalid requirement 'transformers>=>4.57'",
        id="bad-requirement"),
    pytest.param(
        """\
        hosts:
          gpu-a:
            venvs:
              - path: /opt/v
                imports: ["os; import shutil"]
        """, 5, "hosts.gpu-a.venvs[0].imports[0]", "not a valid module name", id="bad-import"),
    pytest.param(
        """\
        hosts:
          gpu-a:
            venvs:
              - path: venvs/serve
        """, 4, "hosts.gpu-a.venvs[0].path", "absolute path", id="relative-path"),
    pytest.param(
        """\
        hosts:
          gpu-a:
            venvs:
              - requires: [tiktoken]
        """, 4, "hosts.gpu-a.venvs[0]", "missing required key 'path'", id="venv-without-path"),
    pytest.param(
        """\
        hosts:
          gpu-a:
            venvs:
              - path: /opt/v
              - path: /opt/v/
        """, 5, "hosts.gpu-a.venvs[1]", "duplicate venv path", id="duplicate-venv"),
    pytest.param(
        """\
        hosts:
          gpu-a:
            address: -oProxyCommand=touch /tmp/pwned
        """, 3, "hosts.gpu-a.address", "must not start with '-'", id="option-injection"),
    pytest.param(
        """\
        hosts:
          gpu-a:
            address: root@10.1.2.200
        """, 3, "hosts.gpu-a.address", "put the user in `user:`", id="user-in-address"),
    pytest.param(
        """\
        hosts:
          gpu-a:
            port: 70000
        """, 3, "hosts.gpu-a.port", "out of range", id="port-range"),
    pytest.param(
        """\
        hosts:
          gpu-a: {address: 10.1.2.200
        """, 3, "", "invalid YAML", id="yaml-syntax"),
    pytest.param(
        """\
        hosts: []
        """, 1, "hosts", "no hosts", id="no-hosts"),
    pytest.param(
        """\
        host:
          gpu-a: {}
        """, 1, "host", "did you mean 'hosts'", id="top-level-typo"),
]


@pytest.mark.parametrize(("text", "line", "key", "detail"), REJECTIONS)
def test_rejections_name_file_line_and_key(tmp_path: Path, text: str, line: int, key: str, detail: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InventoryError) as info:
        load_inventory(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: "), message
    if key:
        assert f": {key}: " in message, message
    assert detail in message, message
    assert info.value.line == line and info.value.source == str(path)
    assert info.value.exit_code == 2


def test_secret_values_are_not_echoed(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts:\n  a:\n    password: hunter2\n")
    with pytest.raises(InventoryError) as info:
        load_inventory(path)
    assert "hunter2" not in str(info.value)


def test_private_key_pasted_inline_is_rejected(tmp_path: Path) -> None:
    path = write(tmp_path, "hosts:\n  a:\n    identity: \"-----BEGIN OPENSSH PRIVATE KEY-----\\nabc\"\n")
    with pytest.raises(InventoryError, match="ssh-agent"):
        load_inventory(path)


def test_empty_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="empty"):
        load_inventory(write(tmp_path, ""))
    with pytest.raises(InventoryError, match="cannot read"):
        load_inventory(tmp_path / "nope.yaml")


def test_merge_keys_override_without_duplicate_error() -> None:
    inv = parse_inventory(textwrap.dedent("""\
        hosts:
          a: &base
            address: 10.1.2.200
            port: 22
          b:
            <<: *base
            port: 2222
        """))
    assert [(h.address, h.port) for h in inv.hosts] == [("10.1.2.200", 22), ("10.1.2.200", 2222)]


def test_select_hosts() -> None:
    inv = parse_inventory(VALID, "hosts.yaml")
    assert [h.name for h in select_hosts(inv)] == ["gpu-a", "gpu-b"]
    assert [h.name for h in select_hosts(inv, tags=["batch"])] == ["gpu-b"]
    assert [h.name for h in select_hosts(inv, tags=["batch,serving"])] == ["gpu-a", "gpu-b"]
    assert [h.name for h in select_hosts(inv, only=["gpu-b", "gpu-a"])] == ["gpu-a", "gpu-b"]
    with pytest.raises(InventoryError, match="no host named 'gpu-z'"):
        select_hosts(inv, only=["gpu-z"])
    with pytest.raises(InventoryError, match="no host matches"):
        select_hosts(inv, only=["gpu-a"], tags=["batch"])
    with pytest.raises(InventoryError, match="tags in use: batch, h100, serving"):
        select_hosts(inv, tags=["nope"])
