"""ssh:// without fabric: ssh_config resolution (paramiko's parser) and ProxyJump chains.

The resolution rules are fabric's (fabric/connection.py: HostName, User, Port, IdentityFile,
ConnectTimeout, ProxyJump with ``user@host:port`` hops), except that a chain is connected in
OpenSSH's order, ssh_config(5) ProxyJump: "the first jump host is connected to first". The
chain case runs through two real loopback sshd bastions, each allowed to forward only to the
next hop (sshd_config(5) PermitOpen), so a chain taken in any other order is refused.
"""

from __future__ import annotations

import getpass
import os
import subprocess
import sys
from pathlib import Path

import pytest

from introspect.errors import HostKeyError, HostUnreachable, InputError, UsageError
from introspect.transport.hostkeys import KnownHosts
from introspect.transport.ssh import SSHExecutor, SSHTarget
from introspect.transport.ssh_config import Resolver, load_config, split_hop
from tests.conftest import REPO, CLIResult, assert_clean_error
from tests.sshd_server import start_sshd

PY = os.path.realpath(sys.executable)
ME = getpass.getuser()


def _resolver(tmp_path: Path, text: str, **kwargs) -> Resolver:
    path = tmp_path / "ssh_config"
    path.write_text(text)
    return Resolver(*load_config(str(path)), **kwargs)


def test_alias_takes_hostname_user_port_identity_and_timeout(tmp_path: Path) -> None:
    resolver = _resolver(tmp_path, "Host gpu-box\n  HostName 10.1.2.3\n  User ops\n  Port 2222\n"
                                   "  IdentityFile ~/.ssh/gpu_key\n  ConnectTimeout 7\n"
                                   "Host *\n  IdentityFile /keys/fleet\n", identity="/keys/flag")
    hop = resolver.target("gpu-box")
    assert (hop.name, hop.host, hop.user, hop.port, hop.connect_timeout) == ("gpu-box", "10.1.2.3", "ops", 2222, 7)
    # --identity first, then every matching IdentityFile in file order (fabric's order), ~ expanded.
    assert hop.key_files == ("/keys/flag", os.path.expanduser("~/.ssh/gpu_key"), "/keys/fleet")
    assert hop.via is None and hop.explicit
    flagged = _resolver(tmp_path, "Host gpu-box\n  User ops\n  Port 2222\n  ConnectTimeout 7\n",
                        connect_timeout=2.5).target("gpu-box", port=22, user="root")
    assert (flagged.host, flagged.user, flagged.port, flagged.connect_timeout) == ("gpu-box", "root", 22, 2.5)
    plain = _resolver(tmp_path, "").target("10.9.9.9")
    assert (plain.host, plain.user, plain.port, plain.connect_timeout, plain.key_files) == \
        ("10.9.9.9", ME, 22, 5.0, ())


def test_proxyjump_chains_resolve_in_openssh_order(tmp_path: Path) -> None:
    resolver = _resolver(tmp_path, "Host gpu\n  HostName 10.0.0.5\n  ProxyJump ops@edge:2200,inner\n"
                                   "Host inner\n  HostName 10.0.0.2\n  User svc\n  ProxyJump elsewhere\n"
                                   "Host edge\n  ProxyJump outer\n  IdentityFile /keys/edge\n"
                                   "Host outer\n  HostName 192.0.2.1\n")
    chain = resolver.target("gpu").chain()
    # edge's own ProxyJump is followed (it comes first); inner's is not (it is reached through edge).
    assert [(h.host, h.user, h.port) for h in chain] == [
        ("192.0.2.1", ME, 22), ("edge", "ops", 2200), ("10.0.0.2", "svc", 22), ("10.0.0.5", ME, 22)]
    assert chain[1].key_files == ("/keys/edge",) and not chain[1].explicit and chain[-1].explicit
    # --jump replaces the target's ProxyJump; the jump host keeps its own and the flags' identity.
    jumped = _resolver(tmp_path, "Host gpu\n  ProxyJump inner\nHost bastion\n  ProxyJump outer\n",
                       identity="/keys/flag").target("gpu", jump="me@bastion:2022")
    assert [(h.host, h.user, h.port, h.key_files) for h in jumped.chain()] == [
        ("outer", ME, 22, ()), ("bastion", "me", 2022, ("/keys/flag",)), ("gpu", ME, 22, ("/keys/flag",))]


def test_proxyjump_none_self_and_loops(tmp_path: Path) -> None:
    resolver = _resolver(tmp_path, "Host direct\n  ProxyJump none\nHost a\n  ProxyJump b\nHost b\n  ProxyJump a\n"
                                   "Host *\n  ProxyJump bastion\n")
    assert resolver.target("direct").via is None
    # `Host *` also names the bastion itself: the bastion is reached directly (fabric's rule).
    assert [h.host for h in resolver.target("gpu").chain()] == ["bastion", "gpu"]
    with pytest.raises(UsageError, match="loops") as caught:
        resolver.target("a")
    assert "a -> b -> a" in caught.value.message


@pytest.mark.parametrize(("text", "parsed"), [
    ("ops@edge:2200", ("ops", "edge", 2200)), ("edge", (None, "edge", None)),
    ("a@b@host", ("a@b", "host", None)), ("::1", (None, "::1", None)), ("u@[::1]:2222", ("u", "::1", 2222)),
])
def test_split_hop(text: str, parsed: tuple) -> None:
    assert split_hop(text) == parsed


def test_bad_configs_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        load_config(str(tmp_path / "missing"))
    with pytest.raises(InputError, match="port 'ssh' for x .*not a number"):
        _resolver(tmp_path, "Host x\n  Port ssh\n").target("x")
    with pytest.raises(UsageError, match="not a number"):
        _resolver(tmp_path, "").target("x", jump="bastion:twenty")


def _match_exec_run(tmp_path: Path, code: str, *, hide_invoke: bool) -> subprocess.CompletedProcess:
    """A fresh interpreter (this one imported invoke long ago); ``hide_invoke``: invoke is not
    importable there, as where it is not installed (the import system's None mark)."""
    config = tmp_path / "ssh_config"
    # (The Host * fallback keeps every outcome on loopback, never a name looked up in DNS.)
    config.write_text('Match exec "test 1 = 1"\n  HostName 127.0.0.9\n  Port 2299\nHost *\n  HostName 127.0.0.8\n')
    prelude = "import sys; sys.modules['invoke'] = None\n" if hide_invoke else ""
    return subprocess.run([sys.executable, "-c", prelude + code, str(config)], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, PYTHONPATH=str(REPO)), cwd=tmp_path)


def test_match_exec_loads_invoke_only_when_a_config_needs_it(tmp_path: Path) -> None:
    pytest.importorskip("invoke")
    code = ("import sys\nimport introspect.transport.ssh\nfrom introspect.transport.ssh_config import Resolver, "
            "load_config\nassert 'invoke' not in sys.modules, 'paramiko was imported with invoke'\n"
            "hop = Resolver(*load_config(sys.argv[1])).target('gpu')\nprint(hop.where, 'invoke' in sys.modules)\n")
    done = _match_exec_run(tmp_path, code, hide_invoke=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["127.0.0.9:2299", "True"]


def test_match_exec_without_invoke_is_one_clear_error(tmp_path: Path) -> None:
    code = ("import sys\nfrom introspect.cli.main import main\nsys.exit(main(['models', '--host', 'gpu', "
            "'--ssh-config', sys.argv[1], '--roots', '/tmp']))\n")
    done = _match_exec_run(tmp_path, code, hide_invoke=True)
    assert_clean_error(CLIResult(done.returncode, done.stdout, done.stderr), 2, "Match exec", "invoke is not installed", "--transport openssh")


# -- a chain through two real bastions --------------------------------------------------------------

@pytest.fixture()
def bastions(tmp_path, client_keys, sshd):
    """edge forwards only to inner, inner only to the target sshd."""
    inner = start_sshd(tmp_path / "inner", client_keys, address="127.0.0.18",
                       extra_config=f"PermitOpen {sshd.address}:{sshd.port}")
    edge = start_sshd(tmp_path / "edge", client_keys, address="127.0.0.17",
                      extra_config=f"PermitOpen {inner.address}:{inner.port}")
    yield edge, inner
    edge.stop()
    inner.stop()


def test_proxyjump_chain_through_two_sshd_checks_every_host_key(bastions, sshd, client_keys, tmp_path):
    edge, inner = bastions
    config = tmp_path / "chain_config"
    config.write_text(f"Host gpu\n  HostName {sshd.address}\n  Port {sshd.port}\n"
                      f"  ProxyJump {ME}@{edge.address}:{edge.port},inner\n"
                      f"Host inner\n  HostName {inner.address}\n  Port {inner.port}\n"
                      f"Host *\n  IdentityFile {client_keys.key}\n")
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts_line + edge.known_hosts_line)
    target = SSHTarget(host="gpu", ssh_config=str(config))
    refused = SSHExecutor(target, KnownHosts(known, global_files=()))
    with pytest.raises(HostKeyError, match="unknown host key") as caught:
        refused.connect()  # the second bastion's key is not known: refused like the target's would be
    assert f"[{inner.address}]:{inner.port}" in caught.value.message and refused._conn is None
    with open(known, "a") as fh:
        fh.write(inner.known_hosts_line)
    with SSHExecutor(target, KnownHosts(known, global_files=())) as executor:
        reply = executor.run_python(PY, "echo", {"via": "edge,inner"}, timeout=30)
        assert reply.facts["request"] == {"via": "edge,inner"} and len(executor._hops) == 2
    assert executor._conn is None and executor._hops == []  # every hop closed


def test_proxycommand_from_ssh_config(bastions, sshd, client_keys, tmp_path):
    """ssh_config's ProxyCommand (here the usual ``ssh -W %h:%p bastion``) carries the connection."""
    _, inner = bastions
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts_line + inner.known_hosts_line)
    config = tmp_path / "proxy_config"
    config.write_text(f"Host gpu\n  HostName {sshd.address}\n  Port {sshd.port}\n  IdentityFile {client_keys.key}\n"
                      f"  ProxyCommand ssh -F /dev/null -i {client_keys.key} -o BatchMode=yes -o IdentityAgent=none "
                      f"-o UserKnownHostsFile={known} -p {inner.port} -W %h:%p {inner.address}\n"
                      "Host missing\n  HostName 127.0.0.9\n  ProxyCommand /nonexistent/proxy %h %p\n")
    with SSHExecutor(SSHTarget(host="gpu", ssh_config=str(config)), KnownHosts(known, global_files=())) as ex:
        assert ex.run_python(PY, "echo", {"a": 1}, timeout=30).facts["request"] == {"a": 1}
    broken = SSHExecutor(SSHTarget(host="missing", ssh_config=str(config)), KnownHosts(known, global_files=()))
    with pytest.raises(HostUnreachable, match="cannot start the ProxyCommand"):
        broken.connect()
