"""Fix lines that run where the profile was taken, not where it is read.

A probe of ``podman://vllm`` or ``ssh://root@gpu1`` reports ``python3 -m pip install tiktoken``
for the interpreter *there*; pasted as it reads, it installs on the controller. :func:`on_target`
wraps such a command in the transport's own exec (the argv the executors in
:mod:`introspect.transport.containers` and :mod:`introspect.transport.openssh` use, less ``-i``:
a pasted fix reads no stdin). Commands for the controller (``introspect ...``, ``podman ...``,
``ssh-keygen ...``) stay as they are: :func:`runs_on_target` tells the two apart.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Mapping
from typing import Any

# Programs our fixes run against the target's files and interpreter.
TARGET_PROGRAMS = frozenset({
    "pip", "pip3", "python", "python3", "uv", "ls", "cp", "mv", "ln", "rm", "mkdir", "chmod", "chown",
    "cat", "df", "du", "nvidia-smi", "hf", "huggingface-cli", "sha256sum", "command", "stat", "head",
})
SSH_SCHEMES = frozenset({"ssh", "openssh", "paramiko"})


def split_comment(line: str) -> tuple[str, str]:
    """``line`` as (command, `` # why`` or ""): the first ``#`` outside quotes after a blank."""
    for index, char in enumerate(line):
        if char == "#" and index and line[index - 1].isspace():
            try:
                shlex.split(line[:index])  # balanced so far: the '#' is not inside quotes
            except ValueError:
                continue
            command = line[:index].rstrip()
            return command, line[len(command):]
    return line, ""


def _program(words: list[str]) -> str | None:
    """The word that names what runs, past ``NAME=value`` assignments."""
    for word in words:
        if not ("=" in word and word.split("=", 1)[0].isidentifier()):
            return word
    return None


def runs_on_target(command: str) -> bool:
    """Whether ``command`` is meant for the profiled machine: it starts with a program from
    :data:`TARGET_PROGRAMS` or a path to one (a venv's ``bin/pip``), not ``introspect`` or a client."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return False
    program = _program(words)
    if program is None:
        return False
    name = posixpath.basename(program)
    return name in TARGET_PROGRAMS or ("/" in program and name != "introspect")


def _argv_words(command: str) -> str:
    """``command`` as words an exec client passes on: as it is when it is a plain argv already
    (what shlex.join would print), else through ``sh -c`` (operators, ``~``, assignments)."""
    words = shlex.split(command)
    if shlex.join(words) == command and _program(words) == words[0]:
        return command
    return f"sh -c {shlex.quote(command)}"


def _ssh(target: Mapping[str, Any], remote: str) -> str:
    port = target.get("port")
    user = target.get("user")
    argv = ["ssh", *(["-p", str(port)] if port else []), f"{user}@{target['host']}" if user else target["host"]]
    return f"{shlex.join(argv)} {shlex.quote(remote)}"


def _kubectl(target: Mapping[str, Any], inner: str) -> str:
    # The target names the pod as NAMESPACE/POD/CONTAINER, NAMESPACE/POD or POD (hostspec's order),
    # and the kubectl context as its host.
    parts = str(target["container"]).split("/")
    namespace, pod, container = (None, parts[0], None) if len(parts) == 1 else (
        parts[0], parts[1], parts[2] if len(parts) > 2 else None)
    argv = ["kubectl", *(["--context", target["host"]] if target.get("host") else []), "exec"]
    argv += [*(["-n", namespace] if namespace else []), *(["-c", container] if container else []), pod, "--"]
    return f"{shlex.join(argv)} {inner}"


def on_target(command: str, target: Mapping[str, Any] | None) -> str:
    """``command`` wrapped to run through the target's transport; local targets leave it alone."""
    target = target or {}
    scheme, container, host = target.get("scheme"), target.get("container"), target.get("host")
    if scheme in ("docker", "podman") and container:
        user = target.get("user")
        return f"{shlex.join([scheme, 'exec', *(['-u', user] if user else []), container])} {_argv_words(command)}"
    if scheme == "kubectl" and container:
        return _kubectl(target, _argv_words(command))
    if scheme == "lxc" and container:
        return f"{shlex.join(['lxc-attach', '-n', container, '--'])} {_argv_words(command)}"
    if scheme == "pct" and container:
        inner = f"{shlex.join(['pct', 'exec', container, '--'])} {_argv_words(command)}"
        return _ssh(target, inner) if host else inner  # pct runs on the Proxmox host (?via=ssh://...)
    if host and not container and (scheme in SSH_SCHEMES or scheme is None):
        return _ssh(target, command)
    return command


def fix_on_target(line: str, target: Mapping[str, Any] | None) -> str:
    """A printed fix line with its command wrapped by :func:`on_target` when it is meant for the
    target; ``# comments`` and controller commands come back unchanged."""
    command, comment = split_comment(line)
    if not command or not runs_on_target(command):
        return line
    wrapped = on_target(command, target)
    return f"{wrapped}{comment}" if wrapped != command else line
