"""One executor for every "client exec with stdin piped" transport.

docker, podman, kubectl, lxc-attach/lxc and pct all run a command inside a
container when given ``CLIENT exec ... -- ARGV``, with our stdin piped to it.
That is all the shipped probe needs: the base executor feeds the envelope and
drains both streams, this module adds the argv prefix, runs the client in its
own process group (so that a timeout or Ctrl-C kills the whole local client
group, and the terminal's SIGINT does not reach it first), and maps the
client's own error lines to introspect's errors. Killing the client closes the
probe's stdin inside the container; the probe's watchdog then kills its task
group, which is what stops remote work for every client alike.

With ``via`` (another executor, e.g. SSH to a Proxmox host) the same argv is
run there instead of here.
"""

from __future__ import annotations

import abc
import os
import re
import shlex
import shutil
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from introspect.errors import ClientNotFound, HostUnreachable, IntrospectError, UsageError
from introspect.interrupts import refuse_new_work
from introspect.transport.base import ExecResult, Executor, RemoteProcess, Target
from introspect.transport.hostspec import HostSpec, parse_host
from introspect.transport.local import LocalExecutor, LocalProcess
from introspect.transport.settings import ConnectionSettings

#: Seconds for the container's state query when no --connect-timeout is given (a daemon
#: or API server can be slower to answer than an sshd).
DEFAULT_CLIENT_CONNECT_TIMEOUT = 10.0

INSTALL_HINTS = {
    "ssh": "sudo apt-get install openssh-client  # the OpenSSH client",
    "docker": "sudo apt-get install docker.io  # the Docker CLI (or docker-ce-cli)",
    "podman": "sudo apt-get install podman",
    "kubectl": "sudo apt-get install kubernetes-client  # or see https://kubernetes.io/docs/tasks/tools/",
    "lxc-attach": "sudo apt-get install lxc  # LXC",
    "lxc": "sudo snap install lxd  # LXD; or use lxc://NAME?client=lxc-attach for classic LXC",
    "pct": "# pct exists only on Proxmox VE hosts: run introspect there, or use pct://VMID?via=ssh://root@PVE-HOST",
}


def plain(value: str | None, what: str, label: str) -> str | None:
    """Refuse a name a client would read as an option (hostspec already checks; this guards direct callers)."""
    if value is not None and (not value or value.startswith("-") or any(c.isspace() for c in value)):
        raise UsageError(f"{what} {value!r} is not a plain name", hint=f"# pass the {what} as `ps`/`list` shows it",
                         host=label, stage="client")
    return value


def url_spec(settings: ConnectionSettings) -> HostSpec:
    """The parsed URL of a client-exec target (settings built in code may give only ``host``)."""
    if settings.spec is not None and settings.spec.scheme == settings.scheme:
        return settings.spec
    if not settings.host:
        raise UsageError(f"a {settings.scheme}:// target needs a name", hint=f"# pass --host {settings.scheme}://NAME")
    return parse_host(f"{settings.scheme}://{settings.host}")


def client_timeout(settings: ConnectionSettings) -> float:
    return settings.connect_timeout or DEFAULT_CLIENT_CONNECT_TIMEOUT


def find_client(name: str, *, label: str, binary: str | None = None) -> str:
    """Absolute path of the client, or ClientNotFound with its install hint."""
    path = shutil.which(binary or name)
    if path is None:
        raise ClientNotFound(f"{binary or name} is not installed here (not found on PATH)",
                             hint=INSTALL_HINTS.get(name, f"# install {name}"), host=label, stage="client")
    return path


@dataclass(frozen=True)
class ClientErrorRule:
    """One error line a client prints, and the introspect error it means."""

    pattern: re.Pattern[str]
    error: type[IntrospectError]
    what: str
    hint: str
    stage: str = "connect"


def rule(pattern: str, error: type[IntrospectError], what: str, hint: str, stage: str = "connect") -> ClientErrorRule:
    return ClientErrorRule(re.compile(pattern, re.IGNORECASE), error, what, hint, stage)


def match_rules(rules: Sequence[ClientErrorRule], stderr: str, label: str) -> IntrospectError | None:
    """The first rule that one of the client's stderr lines matches, as an error naming that line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for candidate in rules:
        for line in lines:
            if candidate.pattern.search(line):
                return candidate.error(f"{candidate.what}: {line}", hint=candidate.hint, host=label,
                                       stage=candidate.stage)
    return None


class ClientProcess(LocalProcess):
    """A local client (docker, kubectl, ssh ...) in its own session; kill() kills its group.

    It reuses LocalProcess's stream and kill primitives and only replaces the
    start, so that a missing client is a ClientNotFound, not an interpreter error.
    """

    def __init__(self, argv: list[str], *, client: str, label: str) -> None:
        try:
            self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, start_new_session=True)
        except (FileNotFoundError, PermissionError) as exc:
            raise ClientNotFound(f"cannot run {argv[0]}: {exc.strerror}",
                                 hint=INSTALL_HINTS.get(client, f"# install {client}"), host=label,
                                 stage="client") from None
        self._adopt_streams()


class ExecCLIExecutor(Executor):
    """Runs the probe through ``<client> exec ... -- ARGV``, locally or on ``via``."""

    scheme: str = ""
    #: The client program, looked up on PATH (or on ``via``'s host).
    client: str = ""
    #: Client error lines that mean "cannot reach / not allowed", checked before the base's rules.
    rules: Sequence[ClientErrorRule] = ()

    def __init__(self, target: Target, *, via: Executor | None = None, binary: str | None = None,
                 connect_timeout: float = 10.0) -> None:
        for what, value in (("container", target.container), ("user", target.user), ("host", target.host)):
            plain(value, what, target.label)
        super().__init__(target)
        self.via = via
        self.binary = binary
        self.connect_timeout = connect_timeout
        self._client_path: str | None = None
        self._checked = False
        self._connect_lock = threading.Lock()

    @abc.abstractmethod
    def exec_prefix(self, client: str) -> list[str]:
        """argv before the probe's own argv (``client`` is the program to put first)."""

    def running_check(self, client: str) -> tuple[list[str], str] | None:
        """A quick command that prints the target's state, and the state that means "running"."""
        return None

    def connect(self) -> None:
        with self._connect_lock:
            refuse_new_work(self.label)
            if self.via is not None:
                self.via.connect()
            elif self._client_path is None:
                self._client_path = find_client(self.client, label=self.label, binary=self.binary)
            if not self._checked:
                try:
                    self._check_running()
                except BaseException:
                    # A failed connect leaves nothing behind (no caller closes what never opened).
                    if self.via is not None:
                        self.via.close()
                    raise
                self._checked = True

    def _check_running(self) -> None:
        """The connect deadline of a client transport: is the container there and running, within
        ``connect_timeout``? (Without it a hung daemon or API server would show as a probe timeout.)"""
        check = self.running_check(self._client_path or self.binary or self.client)
        if check is None:
            return
        argv, running = check
        result = (self.via or LocalExecutor()).execute(argv, b"", self.connect_timeout)
        name = os.path.basename(argv[0])
        if result.timed_out:
            raise HostUnreachable(f"{name} did not answer within {self.connect_timeout:g} s",
                                  hint="# check that its daemon / API server is up (or raise --connect-timeout)",
                                  host=self.label, stage="connect")
        stderr = result.stderr.decode("utf-8", "replace")
        state = result.stdout.decode("utf-8", "replace").strip()
        if result.exit_status != 0:
            last = next((line for line in reversed(stderr.splitlines()) if line.strip()), f"exit {result.exit_status}")
            raise self._client_error(result, stderr) or HostUnreachable(
                f"{name} cannot see {self.label}: {last}", hint=f"{shlex.join(argv)}  # shows why",
                host=self.label, stage="connect")
        if state != running:
            raise HostUnreachable(f"the container is not running ({name} reports {state or 'nothing'!r})",
                                  hint="# start it, or pick a running one", host=self.label, stage="connect")

    def close(self) -> None:
        super().close()
        if self.via is not None:
            self.via.close()

    def _spawn(self, argv: list[str]) -> RemoteProcess:
        if self.via is not None:
            # The remote host finds the client on its own PATH; the via executor quotes every word.
            return self.via._spawn(self.exec_prefix(self.binary or self.client) + argv)
        self.connect()
        assert self._client_path is not None
        return ClientProcess(self.exec_prefix(self._client_path) + argv, client=self.client, label=self.label)

    def _no_reply_error(self, python: str, task: str, result: ExecResult, stderr: str,
                        timeout: float) -> Exception:
        if not result.timed_out:
            mapped = self._client_error(result, stderr)
            if mapped is not None:
                return mapped
        return super()._no_reply_error(python, task, result, stderr, timeout)

    def _client_error(self, result: ExecResult, stderr: str) -> IntrospectError | None:
        name = self.binary or self.client
        if self.via is not None and result.exit_status == 127 and re.search(
                rf"(^|\W){re.escape(name)}: (command )?not found", stderr):
            # A comment: the install must run there, not where this line is pasted.
            install = INSTALL_HINTS.get(self.client, f"install {name}").lstrip("# ")
            return ClientNotFound(f"{name} is not installed on {self.via.label}",
                                  hint=f"# on {self.via.label}: {install}",
                                  host=self.label, stage="client")
        return match_rules(self.rules, stderr, self.label)
