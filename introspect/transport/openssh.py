"""openssh:// : the system ``ssh`` client, so all of ~/.ssh/config applies.

Certificates, Kerberos/GSSAPI, ProxyCommand, hardware keys through the agent,
``Match`` blocks: whatever the user's OpenSSH does, this transport does, because
OpenSSH does it. introspect adds only what a batch tool needs:

- ``BatchMode=yes`` (a prompt would hang a fleet run) and a ConnectTimeout
  (``connect_timeout``, else the config's, else 5 s); ServerAlive keepalives
  unless the config sets its own;
- one ControlMaster per executor (= per host per run) in a private 0700
  directory, started by ``connect()`` and ended by ``close()`` with
  ``ssh -O exit``; every probe is a multiplexed session on it. With
  ``control_persist`` the master is left running for that long in a per-user
  0700 directory and the next run reuses it;
- the remote command is the same quoted boot line as for paramiko, passed as
  one argv word after ``--`` and the destination: no local shell is involved;
- exit status 255 with OpenSSH's stderr is mapped to the error classes and
  one-line fixes paramiko's transport uses (``openssh_errors``).

``ssh -G`` (which reads the configuration and contacts nobody) resolves the
alias to the real host name, port, user and known_hosts file for messages.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from introspect.errors import ConnectionLost, HostUnreachable, IntrospectError, UsageError
from introspect.interrupts import deferred, refuse_new_work
from introspect.transport.base import ExecResult, Executor, RemoteProcess, Target
from introspect.transport.exec_cli import ClientProcess, find_client
from introspect.transport.names import check_destination, check_jump, check_port, check_user
from introspect.transport.openssh_errors import SSHContext, classify
from introspect.transport.settings import ConnectionSettings, checked_identity

# Options introspect sets itself; a --ssh-option naming one would silently lose (first value wins).
_OWN_OPTIONS = {"batchmode", "controlmaster", "controlpath", "controlpersist", "connecttimeout"}
_OPTION = re.compile(r"([A-Za-z][A-Za-z0-9]*)[= ]\s*(\S.*)")
_PERSIST = re.compile(r"(yes|[0-9]+[smhdwSMHDW]?)+")
# A unix socket path must fit sockaddr_un (108 bytes on Linux, 104 on BSD/macOS).
_MAX_SOCKET_PATH = 100
# A probe runs a command and needs no tty or port forwards: a RemoteCommand, RequestTTY or
# LocalForward meant for interactive logins to that host must not break it or open listeners here.
_SESSION = ["RemoteCommand=none", "RequestTTY=no", "ClearAllForwardings=yes"]
AUTH_SLACK_S = 20.0  # login after TCP connect: banner, kex, auth (paramiko's banner+auth budget is 25 s)


def check_options(options: Sequence[str]) -> list[str]:
    """``KEY=VALUE`` words for ``-o``, refusing the ones introspect owns."""
    checked = []
    for option in options:
        found = _OPTION.fullmatch(option.strip())
        if found is None:
            raise UsageError(f"--ssh-option {option!r} is not KEY=VALUE",
                             hint="# write it as OpenSSH's -o does, e.g. --ssh-option ServerAliveInterval=10")
        if found.group(1).lower() in _OWN_OPTIONS:
            raise UsageError(f"--ssh-option {found.group(1)} is set by introspect itself",
                             hint="# use --connect-timeout / --control-persist instead (BatchMode is always yes)")
        checked.append(f"{found.group(1)}={found.group(2)}")
    return checked


def control_dir(persist: bool) -> Path:
    """A 0700 directory only this user can enter, short enough for a socket path."""
    if not persist:
        base = tempfile.gettempdir()
        if len(base) > _MAX_SOCKET_PATH - 60:
            base = "/tmp"
        return Path(tempfile.mkdtemp(prefix="introspect-ssh-", dir=base))
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    root = Path(runtime) if runtime and os.path.isdir(runtime) else Path(tempfile.gettempdir())
    path = root / f"introspect-ssh-{os.getuid()}"
    if len(str(path)) + 41 > _MAX_SOCKET_PATH:  # + "/" and %C's 40 hex digits
        path = Path("/tmp") / f"introspect-ssh-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    info = path.lstat()
    if path.is_symlink() or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise UsageError(f"{path} is not a private directory of this user",
                         hint=f"rm -r {shlex.quote(str(path))}  # then rerun")
    return path


class OpenSSHExecutor(Executor):
    scheme = "openssh"

    def __init__(self, host: str, *, port: int | None = None, user: str | None = None,
                 identity: str | None = None, jump: str | None = None, ssh_config: str | None = None,
                 known_hosts: str | None = None, accept_new: bool = False, options: Sequence[str] = (),
                 connect_timeout: float | None = None, keepalive: int = 5,
                 control_persist: str | None = None, binary: str | None = None) -> None:
        # Checked here, before `ssh -G` reads a config whose `Match exec` substitutes %h/%r into a
        # shell command (OpenSSH >= 9.6 refuses such names itself; older clients run them).
        check_destination(host)
        if user is not None:
            check_user(user)
        if port is not None:
            check_port(port)
        if jump is not None:
            check_jump(jump)
        if control_persist is not None and not _PERSIST.fullmatch(control_persist):
            raise UsageError(f"--control-persist {control_persist!r} is not an OpenSSH time",
                             hint="# give seconds or a time like 10m or 1h (see ControlPersist in ssh_config(5))")
        self.host, self.port, self.user = host, port, user
        self.identity, self.jump, self.ssh_config = identity, jump, ssh_config
        self.known_hosts, self.accept_new = known_hosts, accept_new
        self.options = check_options(options)
        self.connect_timeout, self.keepalive = connect_timeout, keepalive
        self.control_persist, self.binary = control_persist, binary
        super().__init__(Target(scheme=self.scheme, host=host, port=port, user=user, label=host))
        self._opened = 0
        self._ssh: str | None = None
        self._dir: Path | None = None
        self._master: subprocess.Popen[bytes] | None = None
        self._ctx: SSHContext | None = None
        self._keepalive: list[str] = []
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: ConnectionSettings) -> OpenSSHExecutor:
        if not settings.host:
            raise UsageError("an OpenSSH target needs a host", hint="# pass --host openssh://[user@]HOST[:PORT]")
        return cls(settings.host, port=settings.port, user=settings.user,
                   identity=checked_identity(settings.identity),
                   jump=settings.jump, ssh_config=settings.ssh_config, known_hosts=settings.known_hosts,
                   accept_new=settings.accept_new, options=settings.ssh_options,
                   connect_timeout=settings.connect_timeout, control_persist=settings.control_persist)

    @property
    def connections_opened(self) -> int:
        return self._opened

    # -- argv -------------------------------------------------------------------------
    def _base_argv(self, *, extra: Sequence[str] = ()) -> list[str]:
        assert self._ssh is not None
        argv = [self._ssh]
        if self.ssh_config:
            argv += ["-F", self.ssh_config]
        argv += ["-o", "BatchMode=yes"]
        if self.connect_timeout is not None:
            argv += ["-o", f"ConnectTimeout={self.connect_timeout:g}"]
        if self.accept_new:
            argv += ["-o", "StrictHostKeyChecking=accept-new"]
        if self.known_hosts:
            argv += ["-o", f"UserKnownHostsFile={self.known_hosts}"]
        for flag, value in (("-p", self.port), ("-l", self.user), ("-i", self.identity), ("-J", self.jump)):
            if value:
                argv += [flag, str(value)]
        for option in [*extra, *self.options]:
            argv += ["-o", option]
        return argv

    def _socket_options(self) -> list[str]:
        assert self._dir is not None
        path = self._dir / ("%C" if self.control_persist else "master")
        return [f"ControlPath={path}"]

    # -- connection -------------------------------------------------------------------
    def connect(self) -> None:
        with self._lock:
            if self._ctx is not None:
                return
            refuse_new_work(self.label)
            self._ssh = find_client("ssh", label=self.label, binary=self.binary)
            ctx, keepalive = self._resolve()
            with deferred():  # a signal here must not leave the dir without an owner
                self._dir = control_dir(self.control_persist is not None)
            try:
                self._start_master(ctx, keepalive)
            except BaseException:
                self._cleanup()
                raise
            self._ctx = ctx
            self.target = Target(scheme=self.scheme, host=self.host, port=ctx.port, user=ctx.user,
                                 label=self.label)

    def _resolve(self) -> tuple[SSHContext, list[str]]:
        """``ssh -G``: the effective configuration, without contacting anyone."""
        try:
            proc = subprocess.run([*self._base_argv(), "-G", "--", self.host], capture_output=True, text=True,
                                  timeout=30, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise UsageError("ssh -G (reading the ssh configuration) did not finish within 30 s",
                             hint="# check ssh_config for a Match exec command that hangs", host=self.label,
                             stage="config") from None
        fallback = SSHContext(self.label, self.host, self.port or 22, self.user or "", self.connect_timeout or 5)
        if proc.returncode != 0:
            raise classify(proc.stderr, fallback) or UsageError(
                f"ssh -G failed: {proc.stderr.strip().splitlines()[-1:] or proc.returncode}",
                hint="# check the ssh_config and --ssh-option values", host=self.label, stage="config")
        conf: dict[str, str] = {}
        for line in proc.stdout.splitlines():
            key, _, value = line.partition(" ")
            conf.setdefault(key, value)
        timeout = self.connect_timeout
        if timeout is None:
            configured = conf.get("connecttimeout", "none")
            timeout = float(configured) if configured.isdigit() else 5.0
            self.connect_timeout = timeout
        extra = [] if conf.get("serveraliveinterval", "0") != "0" else [
            f"ServerAliveInterval={self.keepalive}", "ServerAliveCountMax=3"]
        known = os.path.expanduser(conf.get("userknownhostsfile", "~/.ssh/known_hosts").split()[0])
        ctx = SSHContext(self.label, conf.get("hostname", self.host), int(conf.get("port", "22")),
                         conf.get("user", ""), timeout, known)
        return ctx, extra

    def _start_master(self, ctx: SSHContext, keepalive: list[str]) -> None:
        self._keepalive = keepalive
        if self.control_persist is not None and self._check_master():
            return  # a master left by an earlier run with --control-persist: reuse it
        argv = [*self._base_argv(extra=[*keepalive, *_SESSION, *self._socket_options(), "ControlMaster=yes"]),
                "-N"]
        assert self._dir is not None
        # Its own log: with --control-persist the directory is shared by every host and run.
        log_path = self._dir / f"master-{os.getpid()}-{id(self):x}.log"
        if self.control_persist is not None:
            # -f: ssh goes to the background once logged in, and stays for control_persist after the last session.
            argv += ["-f", "-o", f"ControlPersist={self.control_persist}"]
        with open(log_path, "wb") as log, deferred():
            master = subprocess.Popen([*argv, "--", self.host], stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
            # Recorded before the login: in its own session it outlives us unless _cleanup stops
            # it, whatever ends the login (a signal, a refused key, the deadline).
            self._master = master
            _OPEN[id(self)] = self
        try:
            self._wait_for(master, log_path, ctx)
        finally:
            if self.control_persist is not None:
                log_path.unlink(missing_ok=True)
        if self.control_persist is not None:
            self._master = None  # logged in: `-f` left a master meant to persist, the one we started is done
        self._opened += 1

    def _wait_for(self, master: subprocess.Popen[bytes], log_path: Path, ctx: SSHContext) -> None:
        """Until the master is logged in (its socket answers), or why it could not."""
        deadline = time.monotonic() + ctx.connect_timeout + AUTH_SLACK_S
        while time.monotonic() < deadline:
            refuse_new_work(self.label)  # a worker thread's login, when a signal stops the run
            status = master.poll()
            if status is not None and (status != 0 or self.control_persist is None):
                raise self._login_error(log_path.read_text(errors="replace"), ctx)
            if status == 0 and self._check_master() or status is None and self._socket_ready():
                return
            time.sleep(0.05)
        _stop(master)
        raise HostUnreachable(f"no SSH login to {ctx.where} within {ctx.connect_timeout + AUTH_SLACK_S:g} s",
                              hint="# check the host and the network path (or raise --connect-timeout)",
                              host=self.label, stage="connect")

    def _socket_ready(self) -> bool:
        return self._dir is not None and (self._dir / "master").exists()

    def _check_master(self) -> bool:
        argv = [*self._base_argv(extra=self._socket_options()), "-O", "check", "--", self.host]
        try:
            return subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL, timeout=15).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def _login_error(self, log: str, ctx: SSHContext) -> IntrospectError:
        error = classify(log, ctx)
        if error is not None and error.stage == "host-key" and "unknown host key" in error.message:
            # BatchMode prints no fingerprint; one more attempt at -v level shows the key offered.
            error = classify(self._verbose_attempt(), ctx) or error
        last = next((line for line in reversed(log.splitlines()) if line.strip()), "no output")
        return error or HostUnreachable(f"ssh could not log in to {ctx.where}: {last}",
                                        hint="# run `ssh -v` to that host to see why", host=self.label,
                                        stage="connect")

    def _verbose_attempt(self) -> str:
        argv = [*self._base_argv(extra=["ControlMaster=no", "ControlPath=none"]), "-v", "-N", "--", self.host]
        try:
            return subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                                  timeout=(self.connect_timeout or 5) + AUTH_SLACK_S).stderr
        except subprocess.TimeoutExpired:
            return ""

    def close(self) -> None:
        super().close()
        with self._lock:
            self._cleanup()
            self._ctx = None

    def _cleanup(self) -> None:
        master, persist = self._master, self.control_persist is not None
        if master is not None and master.poll() is None and not persist and self._socket_ready():
            with contextlib.suppress(subprocess.TimeoutExpired, OSError):
                subprocess.run([*self._base_argv(extra=self._socket_options()), "-O", "exit", "--",
                                self.host], capture_output=True, stdin=subprocess.DEVNULL, timeout=10)
        if master is not None:
            # Without --control-persist: the master. With it: a login that never finished.
            _stop(master)
        if self._dir is not None and not persist:
            shutil.rmtree(self._dir, ignore_errors=True)
        self._master = None
        self._dir = None
        _OPEN.pop(id(self), None)

    # -- sessions ---------------------------------------------------------------------
    def _spawn(self, argv: list[str]) -> RemoteProcess:
        self.connect()
        remote = " ".join(shlex.quote(word) for word in argv)
        extra = [*self._keepalive, *_SESSION, *self._socket_options(), "ControlMaster=no"]
        return ClientProcess([*self._base_argv(extra=extra), "-T", "--", self.host, remote], client="ssh",
                             label=self.label)

    def _no_reply_error(self, python: str, task: str, result: ExecResult, stderr: str,
                        timeout: float) -> Exception:
        if result.exit_status == 255 and not result.timed_out and self._ctx is not None:
            last = next((line for line in reversed(stderr.splitlines()) if line.strip()), "no message")
            # The probe itself never exits 255: this is ssh failing, with or without a message.
            return classify(stderr, self._ctx) or ConnectionLost(
                f"ssh ended with status 255 during the {task} probe: {last}",
                hint="# check that the host and its sshd are up, then rerun", host=self.label, stage=task)
        return super()._no_reply_error(python, task, result, stderr, timeout)


# Executors whose master we started and have not stopped yet: closed at exit, should a program
# (an API user) end without closing them, since a master in its own session outlives us.
_OPEN: dict[int, OpenSSHExecutor] = {}


@atexit.register
def _close_masters() -> None:
    for executor in list(_OPEN.values()):
        with contextlib.suppress(Exception):
            executor._cleanup()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the master and its session's group (signalled before ssh is reaped, so that the group
    id cannot be another's): ssh ended during its login leaves its ProxyCommand running (it kills
    it only from its cleanup at exit: ssh_kill_proxy_command in
    https://github.com/openssh/openssh-portable/blob/master/sshconnect.c)."""
    if proc.poll() is None:
        _signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            proc.wait()


def _signal_group(proc: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signum)
