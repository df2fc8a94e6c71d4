"""Host names, user names and ports, checked as OpenSSH checks them, before anything uses them.

A host name reaches more than a TCP connect: ssh_config's ``Match exec`` runs a shell
command with ``%h``, ``%n`` and ``%r`` substituted as they are (paramiko's
``SSHConfig._tokenize``, then ``invoke.run``: https://github.com/paramiko/paramiko/blob/main/paramiko/config.py),
and a ``ProxyCommand`` does the same. OpenSSH refuses such names on its command line
since 9.6 (``valid_hostname``/``valid_ruser`` in ssh.c, after CVE-2023-51385:
https://github.com/openssh/openssh-portable/blob/master/ssh.c); introspect checks every
name itself, from every entry (``--host``, URLs, inventories, ``--user``, ``--jump``,
ssh_config's HostName/User/Port), before any lookup or resolution, and on every
transport, so that no shell ever sees one and the refusal is ours (exit 2, the value
and the reason named).

The rule is an allow-list, stricter than OpenSSH's deny-list: a host is letters, digits,
``.``, ``-``, ``_`` (and ``:`` of an IPv6 address), a user also ``@`` (Kerberos and AD
principals) and ``\\`` inside (``DOMAIN\\user``); neither starts with ``-`` (an option to
ssh). None of them means anything to a shell, to ssh_config's patterns or to its ``%``
tokens.
"""

from __future__ import annotations

import re

from introspect.errors import UsageError

MAX_NAME = 255  # a DNS name is at most 253 characters; ssh_config aliases get a little slack
_HOST = re.compile(r"[A-Za-z0-9._:-]+")
_USER = re.compile(r"[A-Za-z0-9._@\\-]+")
_DIGITS = re.compile(r"[0-9]{1,5}")  # ASCII only: str.isdigit() also takes '²'
HOST_RULE = "letters, digits, '.', '-' and '_' (an IPv6 address in [ ])"
USER_RULE = "letters, digits, '.', '-', '_', '@' and '\\'"


def _bad_char(value: str, allowed: re.Pattern[str]) -> str | None:
    for ch in value:
        if not allowed.fullmatch(ch):
            if ch.isspace() or ord(ch) < 32 or ord(ch) == 127:
                return f"contains a blank or control character ({ch!r})"
            return f"contains {ch!r}"
    return None


def host_problem(name: str) -> str | None:
    """Why ``name`` is not a host name introspect passes on (None: it is one)."""
    if not name:
        return "is empty"
    if name.startswith("-"):
        return "starts with '-' (ssh would read it as an option)"
    if len(name) > MAX_NAME:
        return f"is longer than {MAX_NAME} characters"
    return _bad_char(name, _HOST)


def user_problem(name: str) -> str | None:
    """Why ``name`` is not a login name introspect passes on (None: it is one)."""
    if not name:
        return "is empty"
    if name.startswith("-"):
        return "starts with '-' (ssh would read it as an option)"
    if len(name) > MAX_NAME:
        return f"is longer than {MAX_NAME} characters"
    if name.endswith("\\"):
        return "ends with '\\'"
    return _bad_char(name, _USER)


def port_problem(value: object) -> str | None:
    """Why ``value`` (an int, or its digits) is not a TCP port (None: it is one)."""
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not _DIGITS.fullmatch(text) or not 1 <= int(text) <= 65535:
        return "is not a number from 1 to 65535"
    return None


def _refuse(within: str | None, what: str, value: object, problem: str, rule: str, hint: str) -> UsageError:
    where = f"{within}: " if within else ""
    plain = "is not a plain name: it " if rule else ""
    return UsageError(f"{where}{what} {value!r} {plain}{problem}{rule}", hint=hint)


def check_host(name: str, *, what: str = "host name", within: str | None = None, hint: str | None = None) -> str:
    """``name`` unchanged, or a UsageError naming it and why (``[v6]`` brackets are allowed around it)."""
    problem = host_problem(name[1:-1] if name.startswith("[") and name.endswith("]") else name)
    if problem:
        raise _refuse(within, what, name, problem, f"; a host name is {HOST_RULE}",
                      hint or "# pass --host gpu1.example.com: a host name, ssh_config alias or address, no shell characters")
    return name


def check_user(name: str, *, what: str = "user name", within: str | None = None, hint: str | None = None) -> str:
    problem = user_problem(name)
    if problem:
        raise _refuse(within, what, name, problem, f"; a user name is {USER_RULE}",
                      hint or "# pass --user ubuntu: the login name on the host")
    return name


def check_port(value: object, *, what: str = "port", within: str | None = None, hint: str | None = None) -> int:
    problem = port_problem(value)
    if problem:
        raise _refuse(within, what, value, problem, "", hint or "# pass --port 22: the port sshd listens on")
    return int(str(value))


def split_destination(text: str) -> tuple[str | None, str, str | None]:
    """``[user@]host[:port]`` as ``ssh -J`` reads it (``[v6]:port`` too; a bare IPv6 address keeps
    its colons), unchecked: (user or None, host, port text or None)."""
    user, _, hostport = text.strip().rpartition("@")
    port: str | None = None
    if hostport.startswith("[") and "]" in hostport:
        host, _, rest = hostport[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else (rest or None)
    elif hostport.count(":") == 1:
        host, port = hostport.split(":")
    else:
        host = hostport
    return user or None, host, port


def check_destination(text: str, *, what: str = "host") -> tuple[str | None, str, int | None]:
    """``[user@]host[:port]`` split and every part checked: (user or None, host, port or None)."""
    user, host, port = split_destination(text)
    within = f"{what} {text!r}" if user or port is not None else None
    hint = f"# pass --{'jump' if 'jump' in what else 'host'} root@gpu1:2222: a host name is {HOST_RULE}"
    checked_user = check_user(user, within=within, hint=hint) if user else None
    checked_host = check_host(host, what="host name" if within else what, within=within, hint=hint)
    checked_port = check_port(port, within=within, hint=hint) if port is not None else None
    return checked_user, checked_host, checked_port


def check_jump(text: str, *, what: str = "jump host") -> str:
    """``--jump``/``jump:``: one or more ``[user@]host[:port]`` (or ``ssh://`` URLs, as ``ssh -J``
    takes), comma-separated; every hop checked. Returns ``text``."""
    hops = text.split(",")
    for hop in hops:
        hop = hop.strip()
        check_destination(hop[len("ssh://"):].rstrip("/") if hop.lower().startswith("ssh://") else hop, what=what)
    return text


__all__ = ["HOST_RULE", "USER_RULE", "check_destination", "check_host", "check_jump", "check_port",
           "check_user", "host_problem", "port_problem", "split_destination", "user_problem"]
