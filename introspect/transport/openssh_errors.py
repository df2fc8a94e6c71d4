"""OpenSSH's stderr (exit status 255) -> introspect's errors, with the same causes and fixes as paramiko's.

The messages are OpenSSH 9's (sshconnect.c, sshconnect2.c, readconf.c,
clientloop.c, mux.c); each rule names the error class and stage that
``transport/ssh.py`` uses for the same failure, so ``ssh://`` and
``openssh://`` tell a user the same thing.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from introspect.errors import (
    AuthenticationFailed,
    ConnectionLost,
    HostKeyError,
    HostUnreachable,
    IntrospectError,
    UsageError,
)
from introspect.transport.hostkeys import entry_name
from introspect.transport.ssh_dial import StartupsRefused, refusal_fix

_FLAGS = re.MULTILINE | re.IGNORECASE


@dataclass(frozen=True)
class SSHContext:
    """What the messages name: the resolved destination (``ssh -G``) and our deadlines."""

    label: str
    hostname: str
    port: int
    user: str
    connect_timeout: float
    known_hosts: str = "~/.ssh/known_hosts"

    @property
    def where(self) -> str:
        return f"{self.hostname}:{self.port}"

    @property
    def entry(self) -> str:
        return entry_name(self.hostname, self.port)


def messages(stderr: str) -> str:
    """ssh's own lines, without ``-v`` debug lines and CRs."""
    lines = [line.rstrip("\r") for line in stderr.splitlines()]
    return "\n".join(line for line in lines if line.strip() and not line.startswith("debug"))


def classify(stderr: str, ctx: SSHContext) -> IntrospectError | None:
    """The error an exit-255 ssh run means, or None when its stderr is not one of OpenSSH's."""
    text = messages(stderr)
    for check in (_config, _host_key, _network, _auth, _lost):
        error = check(text, stderr, ctx)
        if error is not None:
            return error
    return None


def _config(text: str, _raw: str, ctx: SSHContext) -> IntrospectError | None:
    found = re.search(r"^.*(Bad configuration option|Unsupported option|garbage at end of line|"
                      r"no argument after keyword|Bad owner or permissions on|terminating, \d+ bad "
                      r"configuration option|Can't open user config file|Missing argument|"
                      r"unknown option|Invalid .* argument).*$", text, _FLAGS)
    if found is None:
        return None
    return UsageError(f"ssh rejected its configuration: {found.group(0).strip()}",
                      hint="# fix that ssh_config line or the --ssh-option KEY=VALUE it names",
                      host=ctx.label, stage="config")


def _host_key(text: str, raw: str, ctx: SSHContext) -> IntrospectError | None:
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in text or re.search(r"Host key for .* has changed", text):
        offered = re.search(r"fingerprint for the (\S+) key sent by the remote host is\s+(\S+?)\.?$", text, _FLAGS)
        offending = re.search(r"Offending \S+ key in (.+):\d+$", text, _FLAGS)
        name = re.search(r"Host key for (\S+) has changed", text)
        entry = name.group(1) if name else ctx.entry
        known = offending.group(1) if offending else ctx.known_hosts
        offers = f"{offered.group(1)} {offered.group(2)}" if offered else "a different key"
        return HostKeyError(
            f"HOST KEY CHANGED for {entry}: server offers {offers}; refusing to connect "
            "(possible man-in-the-middle)",
            hint=f"ssh-keygen -R {shlex.quote(entry)} -f {shlex.quote(known)}  # only if the host was really "
                 "reinstalled",
            host=entry, stage="host-key")
    if "Host key verification failed" not in text:
        return None
    key = re.search(r"Server host key: (\S+) (SHA256:\S+)", raw)
    unknown = re.search(r"No (\S+) host key is known for (\S+)", text)
    entry = unknown.group(2) if unknown else ctx.entry
    offer = f"{key.group(1)} {key.group(2)}" if key else "its key"
    scan = f"ssh-keyscan -p {ctx.port} {shlex.quote(ctx.hostname)} >> {shlex.quote(ctx.known_hosts)}"
    return HostKeyError(f"unknown host key for {entry}: {offer} (not in {ctx.known_hosts})",
                        hint=f"{scan}  # once the fingerprint is verified (or rerun with --accept-new)",
                        host=entry, stage="host-key")


def _network(text: str, _raw: str, ctx: SSHContext) -> IntrospectError | None:
    found = re.search(r"Could not resolve hostname (\S+): (.+)$", text, _FLAGS)
    if found:
        return HostUnreachable(f"cannot resolve host name {found.group(1)!r}: {found.group(2).strip()}",
                               hint="# check the name, or the Host/HostName entry in ~/.ssh/config",
                               host=ctx.label, stage="connect")
    found = re.search(r"connect to host (\S+) port (\d+): (.+)$", text, _FLAGS)
    if found:
        where, reason = f"{found.group(1)}:{found.group(2)}", found.group(3).strip()
        if "refused" in reason.lower():
            return HostUnreachable(f"connection refused by {where}",
                                   hint="# check that sshd runs there and listens on that port",
                                   host=ctx.label, stage="connect")
        if "timed out" in reason.lower():
            return HostUnreachable(f"TCP connect to {where} timed out after {ctx.connect_timeout:g} s",
                                   hint="# check the address, the network path and that the host is up "
                                        "(or raise --connect-timeout)", host=ctx.label, stage="connect")
        return HostUnreachable(f"cannot connect to {where}: {reason}", hint="# check the address and the network path",
                               host=ctx.label, stage="connect")
    if re.search(r"timed out during banner exchange", text, _FLAGS):
        return HostUnreachable(
            f"no SSH banner from {ctx.where} within {ctx.connect_timeout:g} s",
            hint="# the port may not be sshd, or sshd is refusing new connections (MaxStartups); "
                 "retry with fewer parallel hosts", host=ctx.label, stage="banner")
    found = re.search(r"^kex_exchange_identification: (Connection closed by remote host|read: Connection reset by "
                      r"peer)\s*$", text, _FLAGS)
    if found and not re.search(r"open failed|stdio forwarding failed", text, _FLAGS):
        # sshd closed before its banner: past MaxStartups it writes one line and closes (sshd.c
        # drop_connection(), https://github.com/openssh/openssh-portable/blob/0ef0f5a839831c213f24e3f2ae434765c607fb50/sshd.c#L588-L638),
        # which OpenSSH 9 reports so (kex.c kex_exchange_identification()). Worth a paced retry (ssh_dial.py).
        return StartupsRefused(f"{ctx.where} closed the connection before its SSH banner ({found.group(0).strip()}): "
                               "sshd's MaxStartups or PerSourcePenalties, or an access rule",
                               hint=refusal_fix(ctx.hostname, ctx.port, ctx.user), host=ctx.label, stage="banner")
    found = re.search(r"^.*(kex_exchange_identification|ssh_exchange_identification|"
                      r"Connection closed by \S+ port \d+|Connection reset by \S+ port \d+|"
                      r"banner exchange).*$", text, _FLAGS)
    if found:
        return HostUnreachable(f"{ctx.where} closed the connection during the handshake ({found.group(0).strip()})",
                               hint="# check the server's sshd logs (MaxStartups, AllowUsers)",
                               host=ctx.label, stage="handshake")
    found = re.search(r"^.*(channel \d+: open failed|stdio forwarding failed|ProxyCommand|"
                      r"UNKNOWN port 65535).*$", text, _FLAGS)
    if found:
        return HostUnreachable(f"the jump/proxy could not reach {ctx.where}: {found.group(0).strip()}",
                               hint="# check ProxyJump/ProxyCommand in ssh_config, and that the jump host "
                                    "can reach the target", host=ctx.label, stage="connect")
    return None


def _auth(text: str, _raw: str, ctx: SSHContext) -> IntrospectError | None:
    found = re.search(r"Permission denied \(([^)]*)\)|Too many authentication failures", text, _FLAGS)
    if found is None:
        return None
    return AuthenticationFailed(
        f"authentication refused for user {ctx.user!r} at {ctx.where} ({found.group(0).strip()})",
        hint="# load the right key into ssh-agent, pass --identity FILE, or check --user",
        host=ctx.label, stage="auth")


def _lost(text: str, _raw: str, ctx: SSHContext) -> IntrospectError | None:
    found = re.search(r"^.*(closed by remote host|client_loop: |Broken pipe|not responding|"
                      r"mux_client_\w+|Connection to \S+ closed|Control socket connect).*$", text, _FLAGS)
    if found is None:
        return None
    return ConnectionLost(f"the SSH connection dropped while a probe was running ({found.group(0).strip()})",
                          hint="# check that the host and its sshd are up, then rerun",
                          host=ctx.label, stage="probe")
