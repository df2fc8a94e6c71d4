"""Hosts behind one jump host whose sshd refuses past MaxStartups: real OpenSSH on both ends.

Every login to a host behind a jump host first logs into the jump host (one connection per hop
per host, ``transport/ssh.py``), so a fleet behind one bastion is a burst of unauthenticated
connections to that one sshd. Past ``MaxStartups`` sshd drops the newcomer with one line and a
close (openssh-portable sshd.c drop_connection(),
https://github.com/openssh/openssh-portable/blob/0ef0f5a839831c213f24e3f2ae434765c607fb50/sshd.c#L588-L638).
The refusal at the jump hop must be named as such and paced and retried against the jump host
(``client/fleet_pacing.py`` endpoint_of), never reported as the target being down.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from introspect.client.fleet_pacing import endpoint_of
from introspect.inventory import HostEntry
from tests.health.test_health_e2e import health, write_inventory
from tests.sshd_server import ClientKeys, SSHServer, start_sshd, trust

HOSTS = 8


@pytest.fixture
def strict_bastion(tmp_path: Path, client_keys: ClientKeys) -> Iterator[SSHServer]:
    """A jump host taking one unauthenticated connection at a time (the rest dropped at once)."""
    server = start_sshd(tmp_path / "bastion", client_keys, address="127.0.0.19", extra_config="MaxStartups 1")
    trust(server, client_keys)
    yield server
    server.stop()


@pytest.mark.ssh
def test_hosts_behind_a_refusing_jump_host_are_all_reached(sshd: SSHServer, strict_bastion: SSHServer,
                                                           client_keys: ClientKeys, tmp_path: Path) -> None:
    jump = f"{strict_bastion.address}:{strict_bastion.port}"
    hosts = {f"behind-{i}": {"address": sshd.address, "port": sshd.port, "jump": jump} for i in range(HOSTS)}
    # A budget that a loaded CI machine cannot run out of while eight logins queue at one bastion.
    inventory = write_inventory(tmp_path / "hosts.yaml", client_keys, hosts, connect_timeout=30)
    result = health(inventory, tmp_path / "h.db", "--json", "--parallel", str(HOSTS))
    doc = json.loads(result.stdout)
    down = {h["host"]: h["results"] for h in doc["hosts"] if not h["reachable"]}
    assert down == {} and result.code == 0, (result.stderr, down)
    fleet = doc["fleet"]
    # Eight logins at once against MaxStartups 1: sshd refused some, each was retried there.
    assert fleet["refusals"] >= 1 and fleet["retries"] >= fleet["refusals"], fleet
    assert fleet["refused_endpoints"] == 1 and fleet["smallest_window"] < HOSTS, fleet


def test_hosts_behind_one_jump_host_are_paced_as_one_sshd() -> None:
    """Different targets behind one bastion count against the bastion's MaxStartups, so they share
    its window; the same targets reached directly are paced each on its own."""
    behind = [HostEntry(f"h{i}", f"10.0.0.{i}", 22, jump="bastion:2222") for i in range(3)]
    direct = [HostEntry(f"d{i}", f"10.0.0.{i}", 22) for i in range(3)]
    assert {endpoint_of(h) for h in behind} == {"jump bastion:2222"}
    assert len({endpoint_of(h) for h in direct}) == 3
