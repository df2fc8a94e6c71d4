"""``introspect.SSH`` reaches the CLI's connection flags field by field (introspect/api.py ``_flags``)."""

from __future__ import annotations

import dataclasses

from introspect.api import SSH, _flags
from introspect.cli.connect import ConnectionFlags


def test_every_ssh_field_reaches_its_flag() -> None:
    """Each SSH field set to a value unlike its default arrives as that flag; a field added to SSH and
    not passed on fails here. The flags SSH has no field for keep the CLI's defaults."""
    values = {"port": 2222, "user": "ops", "identity": "/keys/id_ed25519", "jump": "bastion",
              "known_hosts": "/tmp/known_hosts", "accept_new": True, "ssh_config": "/tmp/ssh_config",
              "connect_timeout": 7.5, "transport": "openssh"}
    assert set(values) == {f.name for f in dataclasses.fields(SSH)}, "a new SSH field: give it a value here"
    flags = _flags("gpu1", SSH(**values))
    assert flags.host == "gpu1"
    assert {name: getattr(flags, name) for name in values} == values
    defaults = {f.name: f.default for f in dataclasses.fields(ConnectionFlags)
                if f.default is not dataclasses.MISSING and f.name not in values}
    assert {name: getattr(flags, name) for name in defaults} == defaults
    assert flags.hosts_file is None
