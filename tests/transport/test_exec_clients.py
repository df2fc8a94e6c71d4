"""The CLI-exec transports' failures, from the real client binaries where they install here.

docker and kubectl are pointed at a daemon / cluster that cannot answer (a socket that does not
exist, a kubeconfig naming a closed loopback port or a loopback API server that answers every
pod request with a Kubernetes Status error), so the lines mapped are the clients' own. podman
fails against a real container. pct cannot exist off Proxmox: its "not installed" paths are real
(locally and over ssh); its Proxmox-side lines are taken from pve-container's source.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from introspect.errors import (
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    AuthenticationFailed,
    ClientNotFound,
    HostUnreachable,
    IntrospectError,
    UsageError,
)
from introspect.transport.containers import (
    DockerExecutor,
    KubectlExecutor,
    LxcExecutor,
    PctExecutor,
    PodmanExecutor,
)
from introspect.transport.exec_cli import match_rules
from introspect.transport.hostkeys import KnownHosts
from introspect.transport.openssh import OpenSSHExecutor
from introspect.transport.ssh import SSHExecutor, SSHTarget
from tests.sshd_server import free_port

PY = os.path.realpath(sys.executable)


def run_error(executor, python: str = PY) -> IntrospectError:
    with pytest.raises(IntrospectError) as info, executor:
        executor.run_python(python, "echo", {}, timeout=30)
    error = info.value
    assert error.hint and "\n" not in error.one_line()
    return error


def need(binary: str) -> None:
    if shutil.which(binary) is None:
        pytest.skip(f"{binary} is not installed here (scripts/setup installs it as root)")


# -- argv: what each scheme runs ---------------------------------------------------------------

def test_argv_prefixes():
    assert DockerExecutor("vllm", user="nobody").exec_prefix("docker") == ["docker", "exec", "-i", "-u", "nobody",
                                                                           "vllm"]
    assert PodmanExecutor("vllm").exec_prefix("podman") == ["podman", "exec", "-i", "vllm"]
    assert KubectlExecutor("vllm-0").exec_prefix("kubectl") == ["kubectl", "exec", "-i", "vllm-0", "--"]
    assert KubectlExecutor("vllm-0", namespace="serving", container="engine", context="east",
                           kubeconfig="/k").exec_prefix("kubectl") == [
        "kubectl", "--kubeconfig", "/k", "--context", "east", "exec", "-i", "-n", "serving", "-c", "engine",
        "vllm-0", "--"]
    assert LxcExecutor("ct1", client="lxc-attach").exec_prefix("lxc-attach") == ["lxc-attach", "-n", "ct1", "--"]
    lxd = LxcExecutor("ct1", client="lxc")
    lxd.client = "lxc"
    assert lxd.exec_prefix("lxc") == ["lxc", "exec", "ct1", "--mode=non-interactive", "--"]
    assert PctExecutor(200).exec_prefix("pct") == ["pct", "exec", "200", "--"]


@pytest.mark.parametrize("make", [lambda: DockerExecutor("-H=tcp://evil"), lambda: PodmanExecutor("c", user="-u0"),
                                  lambda: KubectlExecutor("pod", context="--kubeconfig=/x"),
                                  lambda: LxcExecutor("a b")])
def test_option_like_names_are_refused(make):
    with pytest.raises(UsageError):
        make()


def test_targets():
    assert DockerExecutor("vllm", user="nobody").target.as_dict() == {
        "scheme": "docker", "host": None, "port": None, "user": "nobody", "label": "docker://vllm",
        "container": "vllm"}
    kube = KubectlExecutor("vllm-0", namespace="serving", context="east").target
    assert (kube.scheme, kube.host, kube.container, kube.label) == ("kubectl", "east", "serving/vllm-0",
                                                                     "kubectl://serving/vllm-0")
    assert PctExecutor("200").target.label == "pct://200"


# -- missing clients: exit 2 with the install hint ----------------------------------------------

@pytest.mark.parametrize(("make", "hint"), [
    (lambda b: DockerExecutor("c", binary=b), "apt-get install docker.io"),
    (lambda b: PodmanExecutor("c", binary=b), "apt-get install podman"),
    (lambda b: KubectlExecutor("pod", binary=b), "apt-get install kubernetes-client"),
    (lambda b: PctExecutor(200, binary=b), "pct://VMID?via=ssh://root@PVE-HOST"),
])
def test_missing_client_is_a_usage_error_with_its_install_hint(make, hint, tmp_path):
    error = run_error(make(str(tmp_path / "not-installed")))
    assert isinstance(error, ClientNotFound) and error.exit_code == EXIT_USAGE
    assert "is not installed here" in error.message and hint in (error.hint or "")


def test_missing_lxc_clients(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    error = run_error(LxcExecutor("ct1"))
    assert isinstance(error, ClientNotFound) and "neither lxc-attach nor lxc" in error.message


def test_real_pct_is_missing_off_proxmox():
    if shutil.which("pct"):
        pytest.skip("this machine is a Proxmox VE host")
    error = run_error(PctExecutor(200))
    assert isinstance(error, ClientNotFound) and error.message == "pct is not installed here (not found on PATH)"


@pytest.mark.ssh
@pytest.mark.parametrize("via", ["openssh", "ssh"])
def test_pct_missing_on_the_via_host(via, sshd, client_keys, tmp_path):
    if via == "openssh":
        config = tmp_path / "ssh_config"
        config.write_text(f"IdentityFile {client_keys.key}\nIdentityAgent none\n"
                          f"UserKnownHostsFile {client_keys.known_hosts}\n")
        jump = OpenSSHExecutor(sshd.address, port=sshd.port, ssh_config=str(config))
    else:
        jump = SSHExecutor(SSHTarget(host=sshd.address, port=sshd.port, identity=str(client_keys.key),
                                     ssh_config="/dev/null"), KnownHosts(client_keys.known_hosts))
    error = run_error(PctExecutor(200, via=jump, binary="pct-not-here"))
    assert isinstance(error, ClientNotFound)
    assert error.message == f"pct-not-here is not installed on {sshd.address}"
    # The failed connect closed the jump connection itself: no caller closes what never opened.
    if via == "openssh":
        assert jump._master is None and jump._dir is None
    else:
        assert jump._conn is None
    assert PctExecutor(200, via=jump).target.host == sshd.address


# -- docker: the real CLI, no daemon -------------------------------------------------------------

def test_docker_without_a_daemon(tmp_path, monkeypatch):
    need("docker")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/docker.sock")
    error = run_error(DockerExecutor("vllm"))
    assert isinstance(error, HostUnreachable) and error.exit_code == EXIT_UNREACHABLE
    assert error.message.startswith("docker cannot reach its daemon: Cannot connect to the Docker daemon at unix://")
    assert "systemctl start docker" in (error.hint or "")


# -- podman: the real CLI, a real container ------------------------------------------------------

def test_podman_no_such_container(podman_container):
    error = run_error(PodmanExecutor("introspect-no-such-container"))
    assert isinstance(error, HostUnreachable) and error.exit_code == EXIT_UNREACHABLE
    assert error.message == ("no such container: Error: inspecting object: no such container "
                             "introspect-no-such-container")


def test_podman_no_such_user(podman_container):
    error = run_error(PodmanExecutor(podman_container.name, user="nobody2"), podman_container.python)
    assert type(error) is UsageError and "no such user" in error.message and "?user=" in (error.hint or "")


def test_podman_as_another_user(podman_container):
    with PodmanExecutor(podman_container.name, user="nobody") as ex:
        reply = ex.run_python(podman_container.python, "echo", {"a": 1}, timeout=30)
    assert reply.facts["request"] == {"a": 1}


def test_podman_stopped_container(podman_container):
    from tests import podman_host

    stopped = podman_host.created(podman_container.image)
    try:
        error = run_error(PodmanExecutor(stopped.name), podman_container.python)
        assert isinstance(error, HostUnreachable)
        assert error.message == "the container is not running (podman reports 'false')"
    finally:
        stopped.stop()


# -- kubectl: the real CLI against a closed port and a loopback API server ------------------------

def kubeconfig(path: Path, server: str) -> Path:
    path.write_text(f"""apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {{server: "{server}"}}
contexts:
- name: test
  context: {{cluster: test, user: dev, namespace: serving}}
users:
- name: dev
  user: {{token: not-a-real-token}}
current-context: test
""")
    return path


@pytest.fixture()
def kube_env(tmp_path, monkeypatch) -> Path:
    need("kubectl")
    # Never the developer's ~/.kube/config, and kubectl's caches in the test's dir.
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none.yaml"))
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_kubectl_unknown_context(kube_env):
    config = kubeconfig(kube_env / "kubeconfig", f"https://127.0.0.1:{free_port('127.0.0.1')}")
    error = run_error(KubectlExecutor("vllm-0", context="no-such-context", kubeconfig=str(config)))
    assert type(error) is UsageError and error.exit_code == EXIT_USAGE
    assert "context was not found for specified context: no-such-context" in error.message


def test_kubectl_cluster_unreachable(kube_env):
    port = free_port("127.0.0.1")
    config = kubeconfig(kube_env / "kubeconfig", f"https://127.0.0.1:{port}")
    error = run_error(KubectlExecutor("vllm-0", kubeconfig=str(config)))
    assert isinstance(error, HostUnreachable) and error.exit_code == EXIT_UNREACHABLE
    assert f"The connection to the server 127.0.0.1:{port} was refused" in error.message


class _StatusAPI(BaseHTTPRequestHandler):
    """Just enough of the Kubernetes API for kubectl exec to get to the pod, which then fails."""

    status = (404, "NotFound", "")

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path = self.path.split("?")[0]
        discovery = {
            "/version": {"major": "1", "minor": "32", "gitVersion": "v1.32.0"},
            "/api": {"kind": "APIVersions", "versions": ["v1"],
                     "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]},
            "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
            "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
                {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod", "verbs": ["get"]},
                {"name": "pods/exec", "singularName": "", "namespaced": True, "kind": "PodExecOptions",
                 "verbs": ["create", "get"]}]},
        }
        if path in discovery:
            return self._send(200, discovery[path])
        if path.count("/") == 4 and path.startswith("/api/v1/namespaces/"):
            # kubectl looks the namespace up after a pod's 404, to say which one is missing.
            return self._send(200, {"kind": "Namespace", "apiVersion": "v1",
                                    "metadata": {"name": path.rsplit("/", 1)[1]}})
        code, reason, message = self.status
        name = path.rsplit("/pods/", 1)[-1].split("/")[0]
        self._send(code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                          "message": message.format(name=name), "reason": reason, "code": code,
                          "details": {"name": name, "kind": "pods"}})

    do_POST = do_GET


@pytest.fixture()
def status_api(kube_env) -> Iterator[tuple[ThreadingHTTPServer, Path]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StatusAPI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server, kubeconfig(kube_env / "kubeconfig", f"http://127.0.0.1:{server.server_address[1]}")
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(("status", "kind", "message"), [
    ((404, "NotFound", 'pods "{name}" not found'), HostUnreachable,
     'no such pod: Error from server (NotFound): pods "vllm-0" not found'),
    ((403, "Forbidden", 'pods "{name}" is forbidden: User "dev" cannot get resource "pods" in the namespace'
                        ' "serving"'), AuthenticationFailed, "the cluster forbids this exec: Error from server "
                                                             "(Forbidden)"),
    ((401, "Unauthorized", "Unauthorized"), AuthenticationFailed,
     "the API server refused kubectl's credentials: error: You must be logged in to the server (Unauthorized)"),
])
def test_kubectl_api_errors(status_api, status, kind, message, monkeypatch):
    server, config = status_api
    monkeypatch.setattr(_StatusAPI, "status", status)
    error = run_error(KubectlExecutor("vllm-0", namespace="serving", kubeconfig=str(config)))
    assert type(error) is kind and error.exit_code == EXIT_UNREACHABLE
    assert error.message.startswith(message), error.message


# -- lxc-attach: the real client, no such container ------------------------------------------------

def test_lxc_attach_no_such_container():
    need("lxc-attach")
    error = run_error(LxcExecutor("introspect-no-such-ct", client="lxc-attach"))
    assert isinstance(error, HostUnreachable) and error.exit_code == EXIT_UNREACHABLE
    assert error.message == "no such container: introspect-no-such-ct doesn't exist"


# -- pct on Proxmox: its lines, from pve-container's src/PVE/CLI/pct.pm and PVE::AbstractConfig ------

@pytest.mark.parametrize(("line", "kind"), [
    ("Configuration file 'nodes/pve1/lxc/999.conf' does not exist", HostUnreachable),
    ("container '200' not running!", HostUnreachable),
])
def test_pct_lines(line, kind):
    error = match_rules(PctExecutor.rules, line + "\n", "pct://200")
    assert type(error) is kind and line in error.message


# -- the connect deadline: a daemon or API server that accepts and never answers ---------------------

def test_docker_daemon_that_never_answers_hits_the_connect_deadline(tmp_path, monkeypatch):
    import socket

    need("docker")
    path = tmp_path / "silent.sock"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))
        listener.listen(8)
        monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
        error = run_error(DockerExecutor("vllm", connect_timeout=2))
    assert isinstance(error, HostUnreachable) and error.stage == "connect"
    assert error.message == "docker did not answer within 2 s" and "--connect-timeout" in (error.hint or "")


def test_api_server_that_never_answers_hits_the_connect_deadline(kube_env):
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        config = kubeconfig(kube_env / "kubeconfig", f"https://127.0.0.1:{listener.getsockname()[1]}")
        error = run_error(KubectlExecutor("vllm-0", kubeconfig=str(config), connect_timeout=2))
    assert isinstance(error, HostUnreachable) and error.exit_code == EXIT_UNREACHABLE
    assert error.stage == "connect"
