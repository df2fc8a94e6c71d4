"""A fleet's ``To fix:`` block: one block per distinct command, with the hosts that need it.

Three hosts missing transformers and tiktoken in the same venv need one command, not six
lines without a host name. Per host, package installs into the same interpreter are merged
(``pip install transformers tiktoken``); then hosts that need the same command share one block:

- a command for the controller, or one whose target has no transport to wrap it in (a health
  run knows only the inventory name): a ``# h1, h2, h3 (3 hosts)`` line, then the command once;
- a command for the host (``pip``, ``ls``) whose target is known: ``# the command`` as the
  heading, then one line per host through its transport (``ssh -p 22 root@h1 '...'``,
  ``podman exec NAME ...``: :mod:`introspect.cli.remote_fix`), each pasteable as it reads.

Every line is a command or a ``# comment``, so ``bash -n`` parses the whole block.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from introspect.cli.remote_fix import fix_on_target, split_comment

PIP_NAME = re.compile(r"pip(3(\.\d+)?)?")
PYTHON_NAME = re.compile(r"python(3(\.\d+)?)?")


def _requirements_start(words: Sequence[str]) -> int | None:
    """Where the requirements begin in a plain ``pip install REQ...`` (``<venv>/bin/pip``,
    ``python3 -m pip``, ``uv pip``), or None: options (``-U``, ``-r file``) make it another command."""
    name = posixpath.basename(words[0]) if words else ""
    if PIP_NAME.fullmatch(name):
        start = 1
    elif PYTHON_NAME.fullmatch(name) and list(words[1:3]) == ["-m", "pip"]:
        start = 3
    elif name == "uv" and list(words[1:2]) == ["pip"]:
        start = 2
    else:
        return None
    requirements = words[start + 1:]
    if list(words[start:start + 1]) != ["install"] or not requirements:
        return None
    return None if any(word.startswith("-") for word in requirements) else start + 1


def _install_parts(line: str) -> tuple[tuple[str, ...], list[str], str] | None:
    """(the words before the requirements, the requirements, the `` # why``) of an install, else None."""
    command, comment = split_comment(line)
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    # Only a plain argv, as shlex.join prints it: `pip install a; rm x` is two commands, not one install.
    start = _requirements_start(words) if words and shlex.join(words) == command else None
    if start is None:
        return None
    return tuple(words[:start]), words[start:], comment


def merge_installs(lines: Sequence[tuple[int, str]]) -> list[tuple[int, str]]:
    """``(rank, line)`` pairs of one host with the installs into the same interpreter (same words
    before the requirements, same comment) as one line, at the rank of the first; other lines and
    a lone install stay as they are. Duplicates are dropped."""
    out: list[tuple[int, str]] = []
    installs: dict[tuple[tuple[str, ...], str], tuple[int, list[str]]] = {}  # key -> (index in out, requirements)
    for rank, line in lines:
        parts = _install_parts(line)
        if parts is None:
            if line not in (text for _, text in out):
                out.append((rank, line))
            continue
        prefix, requirements, comment = parts
        key = (prefix, comment)
        if key not in installs:
            installs[key] = (len(out), list(requirements))
            out.append((rank, line))
            continue
        index, merged = installs[key]
        merged.extend(r for r in requirements if r not in merged)
        out[index] = (out[index][0], shlex.join([*prefix, *merged]) + comment)
    return out


def hosts_comment(hosts: Sequence[str]) -> str:
    """``# h1, h2, h3 (3 hosts)``; ``# h1`` for one."""
    names = ", ".join(" ".join(str(host).split()) for host in hosts)  # a comment stays one line
    return f"# {names} ({len(hosts)} hosts)" if len(hosts) > 1 else f"# {names}"


@dataclass
class _Group:
    rank: int
    hosts: list[str] = field(default_factory=list)


def _named(line: str, hosts: Sequence[str]) -> str:
    """``line`` (through a transport) with the hosts' inventory names after ``#``, which the
    address in it may not show: ``ssh root@10.1.2.200 '...'  # gpu1``."""
    command, comment = split_comment(line)
    names = ", ".join(" ".join(str(host).split()) for host in hosts)
    why = comment.strip().lstrip("#").strip()
    return f"{command}  # {names}: {why}" if why else f"{command}  # {names}"


def _block(command: str, hosts: Sequence[str], targets: Mapping[str, Any]) -> list[str]:
    wrapped = {host: fix_on_target(command, targets.get(host)) for host in hosts}
    here = [host for host in hosts if wrapped[host] == command]
    by_line: dict[str, list[str]] = {}  # two names for one address: one line
    for host in hosts:
        if wrapped[host] != command:
            by_line.setdefault(wrapped[host], []).append(host)
    through = [_named(line, names) for line, names in by_line.items()]
    lines: list[str] = []
    if here and command.startswith("#"):  # advice, not a command: the hosts and it on one comment line
        lines.append(f"{hosts_comment(here)}: {command.lstrip('#').strip()}")
    elif here:
        lines += [hosts_comment(here), command]
    if through:
        lines += [command if command.startswith("#") else f"# {command}", *through]
    return lines


def grouped_lines(items: Sequence[str], hosts: Mapping[str, Sequence[str]], targets: Mapping[str, Any],
                  order: Sequence[str] = ()) -> list[str]:
    """The ``To fix:`` lines of fixes met on several hosts: ``items`` are shell lines in the order
    met, ``hosts`` names the hosts of each (none: printed alone, first), ``targets`` the target
    block of a host whose transport the command can run through, ``order`` the hosts' order
    (the report's; others follow as met)."""
    lines = [item for item in items if not hosts.get(item)]
    per_host: dict[str, list[tuple[int, str]]] = {host: [] for host in order}
    for rank, item in enumerate(items):
        for host in hosts.get(item) or ():
            per_host.setdefault(host, []).append((rank, item))
    groups: dict[str, _Group] = {}
    for host, entries in per_host.items():
        for rank, line in merge_installs(entries):
            group = groups.setdefault(line, _Group(rank))
            group.rank = min(group.rank, rank)
            group.hosts.append(host)
    for command, group in sorted(groups.items(), key=lambda pair: pair[1].rank):
        lines += _block(command, group.hosts, targets)
    return lines
