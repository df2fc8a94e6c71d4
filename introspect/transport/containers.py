"""docker://, podman://, kubectl://, lxc:// and pct://: an argv prefix and the client's error lines each.

Every error pattern below is a line the real client prints (docker 28, podman
4.3, kubectl 1.32, LXC 5, Proxmox VE 8 ``pct``); the executor maps the first
one found to introspect's error classes: cannot reach the daemon/cluster or
the container is missing or stopped -> exit 3 (like an unreachable host),
credentials refused -> exit 3 (like SSH auth), a bad client configuration or
container user -> exit 2 (usage), and anything else falls through to the
base rules (a missing interpreter inside the container -> exit 2).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence

from introspect.errors import AuthenticationFailed, ClientNotFound, HostUnreachable, UsageError
from introspect.transport.base import Executor, Target
from introspect.transport.exec_cli import (
    ClientErrorRule,
    ExecCLIExecutor,
    client_timeout,
    plain,
    rule,
    url_spec,
)
from introspect.transport.settings import ConnectionSettings

_NO_USER = rule(r"unable to find user|no matching entries in passwd file", UsageError,
                "the container has no such user", "# check ?user= against the container's /etc/passwd, "
                "or give a numeric UID", stage="exec")


class DockerExecutor(ExecCLIExecutor):
    """``docker exec -i [-u USER] CONTAINER ARGV`` (DOCKER_HOST / docker context pick the daemon)."""

    scheme = "docker"
    client = "docker"
    rules: Sequence[ClientErrorRule] = (
        rule(r"permission denied while trying to connect to the docker daemon", AuthenticationFailed,
             "docker may not use the daemon's socket",
             'sudo usermod -aG docker "$USER"  # then log in again; or run as root', stage="auth"),
        rule(r"Cannot connect to the Docker daemon", HostUnreachable, "docker cannot reach its daemon",
             "sudo systemctl start docker  # or point DOCKER_HOST / `docker context use` at the daemon"),
        rule(r"No such container", HostUnreachable, "no such container",
             "docker ps  # the NAME to pass"),
        rule(r"is not running|is paused|is restarting", HostUnreachable, "the container is not running",
             "docker ps -a  # start it (docker start NAME) or pick a running one"),
        _NO_USER,
    )

    def __init__(self, container: str, *, user: str | None = None, binary: str | None = None,
                 connect_timeout: float = 10.0) -> None:
        super().__init__(Target(scheme=self.scheme, user=user, label=f"{self.scheme}://{container}",
                                container=container), binary=binary, connect_timeout=connect_timeout)
        self.container = container
        self.user = user

    @classmethod
    def from_settings(cls, settings: ConnectionSettings) -> DockerExecutor:
        spec = url_spec(settings)
        assert spec.container is not None  # parse_host names one for docker:// and podman://
        return cls(spec.container, user=spec.user or settings.user, connect_timeout=client_timeout(settings))

    def running_check(self, client: str) -> tuple[list[str], str] | None:
        return [client, "container", "inspect", "--format", "{{.State.Running}}", self.container], "true"

    def exec_prefix(self, client: str) -> list[str]:
        user = ["-u", self.user] if self.user else []
        # No "--": docker and podman stop parsing options at the container name.
        return [client, "exec", "-i", *user, self.container]


class PodmanExecutor(DockerExecutor):
    """``podman exec -i [-u USER] CONTAINER ARGV`` (CONTAINER_HOST / --connection pick a remote)."""

    scheme = "podman"
    client = "podman"

    @classmethod
    def from_settings(cls, settings: ConnectionSettings) -> PodmanExecutor:
        # The same URL and argv as docker's; only the client differs (``cls`` is this class).
        executor = super().from_settings(settings)
        assert isinstance(executor, PodmanExecutor)
        return executor
    rules: Sequence[ClientErrorRule] = (
        rule(r"no container with name or ID .* found|no such container", HostUnreachable, "no such container",
             "podman ps  # the NAME to pass"),
        rule(r"can only create exec sessions on running containers|container state improper",
             HostUnreachable, "the container is not running",
             "podman ps -a  # start it (podman start NAME) or pick a running one"),
        rule(r"unable to connect to Podman|Cannot connect to Podman", HostUnreachable,
             "podman cannot reach its service",
             "systemctl start podman.socket  # or fix CONTAINER_HOST / `podman system connection`"),
        _NO_USER,
    )


class KubectlExecutor(ExecCLIExecutor):
    """``kubectl [--kubeconfig F] [--context C] exec -i [-n NS] [-c CONTAINER] POD -- ARGV``."""

    scheme = "kubectl"
    client = "kubectl"
    rules = (
        rule(r"Error in configuration|context was not found|invalid configuration|"
             r"Missing or incomplete configuration", UsageError, "kubectl's configuration is not usable",
             "kubectl config get-contexts  # the names ?context= takes (and check ?kubeconfig= / KUBECONFIG)",
             stage="config"),
        rule(r"The connection to the server .* was refused|Unable to connect to the server",
             HostUnreachable, "kubectl cannot reach the cluster's API server",
             "kubectl cluster-info  # check that the cluster is up and the context's server address"),
        rule(r"You must be logged in to the server|\(Unauthorized\)", AuthenticationFailed,
             "the API server refused kubectl's credentials", "# log in again or refresh the kubeconfig's "
             "credentials", stage="auth"),
        rule(r"\(Forbidden\)", AuthenticationFailed, "the cluster forbids this exec",
             "kubectl auth can-i create pods/exec  # ask for that permission in the namespace",
             stage="auth"),
        rule(r"\(NotFound\): pods .* not found", HostUnreachable, "no such pod",
             "kubectl get pods -n NAMESPACE  # check the pod and namespace"),
        rule(r"container not found|is not valid for pod", HostUnreachable, "no such container in the pod",
             "kubectl get pod POD -o jsonpath='{.spec.containers[*].name}'  # the pod's containers"),
        rule(r"cannot exec into a container in a completed pod|current phase is", HostUnreachable,
             "the pod is not running", "kubectl get pods  # pick a running pod"),
    )

    def __init__(self, pod: str, *, namespace: str | None = None, container: str | None = None,
                 context: str | None = None, kubeconfig: str | None = None,
                 binary: str | None = None, connect_timeout: float = 10.0) -> None:
        where = "/".join(p for p in (namespace, pod, container) if p)
        for what, value in (("pod", pod), ("namespace", namespace), ("container", container),
                            ("context", context), ("kubeconfig", kubeconfig)):
            plain(value, what, f"kubectl://{where}")
        super().__init__(Target(scheme=self.scheme, host=context, label=f"kubectl://{where}",
                                container=where), binary=binary, connect_timeout=connect_timeout)
        self.pod, self.namespace, self.container = pod, namespace, container
        self.context, self.kubeconfig = context, kubeconfig

    @classmethod
    def from_settings(cls, settings: ConnectionSettings) -> KubectlExecutor:
        spec = url_spec(settings)
        assert spec.container is not None
        return cls(spec.container, namespace=spec.namespace, container=spec.pod_container, context=spec.context,
                   kubeconfig=spec.kubeconfig, connect_timeout=client_timeout(settings))

    def _globals(self, client: str) -> list[str]:
        argv = [client]
        if self.kubeconfig:
            argv += ["--kubeconfig", self.kubeconfig]
        if self.context:
            argv += ["--context", self.context]
        return argv

    def exec_prefix(self, client: str) -> list[str]:
        argv = [*self._globals(client), "exec", "-i"]
        if self.namespace:
            argv += ["-n", self.namespace]
        if self.container:
            argv += ["-c", self.container]
        return [*argv, self.pod, "--"]

    def running_check(self, client: str) -> tuple[list[str], str] | None:
        argv = [*self._globals(client), "get", "pod", self.pod, "-o", "jsonpath={.status.phase}",
                f"--request-timeout={max(1, round(self.connect_timeout))}s"]
        return [*argv, "-n", self.namespace] if self.namespace else argv, "Running"


class LxcExecutor(ExecCLIExecutor):
    """``lxc-attach -n NAME -- ARGV`` (classic LXC) or ``lxc exec NAME --mode=non-interactive -- ARGV`` (LXD)."""

    scheme = "lxc"
    client = "lxc-attach"
    rules = (
        # lxc-attach says the same for a stopped and for a missing container (LXC 5: attach.c).
        rule(r"is not running|Failed to get init pid", HostUnreachable,
             "the container is not running or does not exist",
             "lxc-ls -f  # start it (lxc-start -n NAME, or lxc start NAME)"),
        rule(r"Instance not found|does not exist|doesn't exist|No such container", HostUnreachable,
             "no such container", "lxc-ls -f  # the NAME to pass (LXD: lxc list)"),
        rule(r"unix socket not accessible|Failed to connect to local LXD", HostUnreachable,
             "lxc cannot reach the LXD daemon", "sudo snap start lxd  # then check `lxc list`"),
        rule(r"Failed to attach to container", AuthenticationFailed,
             "not allowed to attach to the container", "# run as root, or as the container's owner",
             stage="auth"),
    )

    def __init__(self, name: str, *, client: str | None = None, lxcpath: str | None = None,
                 binary: str | None = None, connect_timeout: float = 10.0) -> None:
        super().__init__(Target(scheme=self.scheme, label=f"lxc://{name}", container=name), binary=binary,
                         connect_timeout=connect_timeout)
        self.name = name
        self.chosen = client
        self.lxcpath = plain(lxcpath, "lxcpath", self.label)  # lxc-attach -P: containers outside /var/lib/lxc

    @classmethod
    def from_settings(cls, settings: ConnectionSettings) -> LxcExecutor:
        spec = url_spec(settings)
        assert spec.container is not None
        return cls(spec.container, client=spec.client, connect_timeout=client_timeout(settings))

    def connect(self) -> None:
        if self.chosen is None:
            # The first of the two clients found here; naming one with ?client= skips the guess.
            self.chosen = next((c for c in ("lxc-attach", "lxc") if shutil.which(c)), None)
            if self.chosen is None:
                raise ClientNotFound("neither lxc-attach nor lxc is installed here (not found on PATH)",
                                     hint="sudo apt-get install lxc  # LXC; for LXD: sudo snap install lxd",
                                     host=self.label, stage="client")
        self.client = self.chosen
        super().connect()

    def exec_prefix(self, client: str) -> list[str]:
        if self.client == "lxc":
            return [client, "exec", self.name, "--mode=non-interactive", "--"]
        where = ["-P", self.lxcpath] if self.lxcpath else []
        return [client, *where, "-n", self.name, "--"]

    def running_check(self, client: str) -> tuple[list[str], str] | None:
        if self.client == "lxc":
            return None  # LXD's exec says itself that an instance is missing or stopped
        # lxc-info ships with lxc-attach, in the same directory; without it, skip the check.
        sibling = os.path.join(os.path.dirname(client), "lxc-info")
        info = sibling if os.path.dirname(client) and os.access(sibling, os.X_OK) else shutil.which("lxc-info")
        if info is None:
            return None
        where = ["-P", self.lxcpath] if self.lxcpath else []
        return [info, *where, "-n", self.name, "-s", "-H"], "RUNNING"


class PctExecutor(ExecCLIExecutor):
    """``pct exec VMID -- ARGV`` on this Proxmox host, or on ``via`` (an SSH executor to one)."""

    scheme = "pct"
    client = "pct"
    # pve-container src/PVE/CLI/pct.pm (exec: load_config, then check_running):
    # https://git.proxmox.com/?p=pve-container.git;a=blob;f=src/PVE/CLI/pct.pm
    rules = (
        rule(r"Configuration file '.*' does not exist", HostUnreachable, "no such container on that node",
             "pct list  # on the Proxmox host that runs it: the VMID to pass"),
        rule(r"container '\d+' not running", HostUnreachable, "the container is not running",
             "pct start VMID  # on the Proxmox host"),
        rule(r"only root can|permission denied", AuthenticationFailed, "pct needs root",
             "# log in to the Proxmox host as root (pct://VMID?via=ssh://root@PVE-HOST)", stage="auth"),
    )

    def __init__(self, vmid: str | int, *, via: Executor | None = None, binary: str | None = None,
                 connect_timeout: float = 10.0) -> None:
        via_target = getattr(via, "target", None)
        host = getattr(via_target, "host", None) if via is not None else None
        user = getattr(via_target, "user", None) if via is not None else None
        at = f"@{via.label}" if via is not None else ""
        super().__init__(Target(scheme=self.scheme, host=host, user=user, label=f"pct://{vmid}{at}",
                                container=str(vmid)), via=via, binary=binary, connect_timeout=connect_timeout)
        self.vmid = str(vmid)

    @classmethod
    def from_settings(cls, settings: ConnectionSettings) -> PctExecutor:
        """``?via=URL`` is built through the registry, with the same connection flags (the jump is
        an SSH hop: --identity, --known-hosts, --ssh-option apply to it)."""
        from introspect.transport.registry import create_executor, settings_for_spec

        spec = url_spec(settings)
        assert spec.container is not None
        via = create_executor(settings_for_spec(spec.via, settings)) if spec.via is not None else None
        return cls(spec.container, via=via, connect_timeout=client_timeout(settings))

    def running_check(self, client: str) -> tuple[list[str], str] | None:
        return [client, "status", self.vmid], "status: running"

    def exec_prefix(self, client: str) -> list[str]:
        return [client, "exec", self.vmid, "--"]
