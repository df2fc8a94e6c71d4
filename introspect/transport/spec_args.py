"""From a parsed host spec to the constructor of its executor, for the transport registry.

``EXECUTORS`` names each new scheme's class by module and attribute (imported
only when used); ``spec_kwargs`` gives the keyword arguments a spec supplies.
Connection flags (``--identity``, ``--ssh-option``, ``--control-persist`` ...)
are added by the caller, and ``pct://...?via=URL`` needs the caller to build the
executor for ``spec.via`` and pass it as ``via=``.
"""

from __future__ import annotations

from introspect.transport.hostspec import HostSpec

EXECUTORS: dict[str, tuple[str, str]] = {
    "openssh": ("introspect.transport.openssh", "OpenSSHExecutor"),
    "docker": ("introspect.transport.containers", "DockerExecutor"),
    "podman": ("introspect.transport.containers", "PodmanExecutor"),
    "kubectl": ("introspect.transport.containers", "KubectlExecutor"),
    "lxc": ("introspect.transport.containers", "LxcExecutor"),
    "pct": ("introspect.transport.containers", "PctExecutor"),
}


def spec_kwargs(spec: HostSpec) -> dict[str, object]:
    """Keyword arguments of ``EXECUTORS[spec.scheme]`` that the spec itself determines."""
    if spec.scheme == "openssh":
        return {"host": spec.host, "port": spec.port, "user": spec.user}
    if spec.scheme in ("docker", "podman"):
        return {"container": spec.container, "user": spec.user}
    if spec.scheme == "kubectl":
        return {"pod": spec.container, "namespace": spec.namespace, "container": spec.pod_container,
                "context": spec.context, "kubeconfig": spec.kubeconfig}
    if spec.scheme == "lxc":
        return {"name": spec.container, "client": spec.client}
    if spec.scheme == "pct":
        return {"vmid": spec.container}
    raise ValueError(f"{spec.scheme!r} is not one of the schemes in EXECUTORS")
