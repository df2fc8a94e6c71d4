"""The transport registry: scheme -> executor class, the one factory, host specs."""

from __future__ import annotations

import pytest

from introspect.cli.connect import ConnectionFlags, executor_for
from introspect.errors import UsageError
from introspect.inventory import parse_inventory
from introspect.transport.base import Executor, Target
from introspect.transport.hostspec import parse_host
from introspect.transport.local import LocalExecutor
from introspect.transport.registry import TRANSPORTS, create_executor, executor_class
from introspect.transport.settings import ConnectionSettings
from introspect.transport.ssh import SSHExecutor
from tests.conftest import run_cli


def _flags(**over: object) -> ConnectionFlags:
    base: dict[str, object] = {name: None for name in ConnectionFlags.__dataclass_fields__}
    base["accept_new"] = False
    base.update(over)
    return ConnectionFlags(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("scheme", sorted(TRANSPORTS))
def test_every_registered_scheme_names_an_executor_class(scheme: str) -> None:
    cls = executor_class(scheme)
    assert issubclass(cls, Executor)
    assert "from_settings" in vars(cls), f"{cls.__name__} must build itself from ConnectionSettings"


def test_unknown_scheme_is_a_usage_error() -> None:
    with pytest.raises(UsageError) as info:
        executor_class("telnet")
    assert "telnet" in info.value.message and "ssh" in info.value.message and info.value.hint


@pytest.mark.parametrize(("spec", "scheme", "host", "port", "user"), [
    (None, "local", None, None, None),
    ("gpu-a1", "ssh", "gpu-a1", None, None),  # a bare name keeps its meaning: address or ssh_config alias
    ("ssh://root@10.1.2.200:2222", "ssh", "10.1.2.200", 2222, "root"),
    ("ssh://[::1]:22", "ssh", "::1", 22, None),
    ("local://", "local", None, None, None),
])
def test_host_specs_reach_the_settings(spec: str | None, scheme: str, host: str | None, port: int | None,
                                       user: str | None) -> None:
    from introspect.cli.connect import connection_settings

    settings = connection_settings(_flags(host=spec), None, None)
    assert (settings.scheme, settings.host, settings.port, settings.user) == (scheme, host, port, user)


def test_bad_port_in_a_host_spec_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        parse_host("ssh://gpu-a1:http")


def test_transport_flag_sends_a_bare_name_through_openssh() -> None:
    from introspect.transport.openssh import OpenSSHExecutor

    ex, _ = executor_for(_flags(host="gpu-a1", transport="openssh", ssh_options=("ServerAliveInterval=7",),
                                control_persist="10m"), None)
    assert isinstance(ex, OpenSSHExecutor) and ex.target == Target("openssh", "gpu-a1", None, None, "gpu-a1")
    assert ex.options == ["ServerAliveInterval=7"] and ex.control_persist == "10m"
    podman, _ = executor_for(_flags(host="vllm", transport="podman"), None)
    assert podman.target == Target("podman", None, None, None, "podman://vllm", "vllm")


def test_inventory_urls_reach_the_factory() -> None:
    inventory = parse_inventory("hosts:\n  engine: {url: 'podman://vllm?user=nobody'}\n"
                                "  pve: {address: 'pct://200?via=openssh://root@pve1:2222'}\n")
    engine, _ = executor_for(_flags(host="engine"), inventory)
    assert engine.target == Target("podman", None, None, "nobody", "podman://vllm", "vllm")
    pve, _ = executor_for(_flags(host="pve"), inventory)
    assert pve.target == Target("pct", "pve1", None, "root", "pct://200@pve1", "200")
    assert pve.via is not None and pve.via.target.scheme == "openssh" and pve.via.target.port == 2222


def test_the_factory_gives_each_transport_its_target() -> None:
    local = create_executor(ConnectionSettings())
    assert isinstance(local, LocalExecutor) and local.target == Target("local")
    ssh = create_executor(ConnectionSettings("ssh", host="gpu-a1", port=2222, user="ops", known_hosts="/dev/null"))
    assert isinstance(ssh, SSHExecutor)
    assert ssh.target == Target("ssh", "gpu-a1", 2222, "ops", "gpu-a1")


def test_cli_layers_reach_the_factory() -> None:
    # Flags > host spec > inventory entry > inventory defaults.
    inventory = parse_inventory("defaults: {user: ops, port: 2200}\nhosts:\n  a1: {address: 10.0.0.7}\n"
                                "  a2: {address: 'ssh://10.0.0.8:22', user: root}\n")
    a1, entry = executor_for(_flags(host="a1"), inventory)
    assert entry is not None and a1.target == Target("ssh", "10.0.0.7", 2200, "ops", "10.0.0.7")
    a2, _ = executor_for(_flags(host="a2"), inventory)
    assert a2.target == Target("ssh", "10.0.0.8", 22, "root", "10.0.0.8")
    a2, _ = executor_for(_flags(host="a2", port=2022, user="me"), inventory)
    assert a2.target == Target("ssh", "10.0.0.8", 2022, "me", "10.0.0.8")
    local, none = executor_for(_flags(), None)
    assert isinstance(local, LocalExecutor) and none is None


def test_unknown_scheme_through_the_cli() -> None:
    result = run_cli("probe", "--host", "telnet://gpu-a1", "--model", "/nowhere")
    assert result.code == 2, result.stderr
    lines = result.stderr.splitlines()
    assert any(line.startswith("error: unknown transport 'telnet'") for line in lines), result.stderr
    assert any(line.startswith("fix: ") for line in lines) and "Traceback" not in result.stderr


def test_openssh_flags_on_a_paramiko_host_are_refused() -> None:
    with pytest.raises(UsageError) as info:
        executor_for(_flags(host="gpu-a1", ssh_options=("ServerAliveInterval=7",)), None)
    assert "openssh://" in info.value.message and "--transport openssh" in (info.value.hint or "")
