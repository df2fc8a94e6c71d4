"""A real podman container for the transport tests, built without any registry.

The image is tests/rootfs.py's tree (this machine's own Python and the libraries
it needs) imported with ``podman import``. The container runs with no network, with the
fixture's temp dir (and pyenv's Python 3.8, when present) bind-mounted at the
same paths, so a test can put files where both sides see them.

Two settings make podman work in restricted sandboxes and change nothing elsewhere:
the container's RLIMIT_NOFILE/NPROC are pinned at or below our own soft limits
(podman otherwise raises them, which fails with EPERM without CAP_SYS_RESOURCE), and
runc is used when installed (crun 1.8 refuses hosts with both cgroup v1 and v2
mounted: "cgroups in hybrid mode not supported").
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from tests.rootfs import OLD_PYTHON_TREE, SYSTEM_PYTHON, Unavailable, rootfs_tar

PODMAN = shutil.which("podman")
IMAGE_VERSION = 2  # bump when the image's contents change: images are reused by tag


def _podman(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    assert PODMAN is not None
    proc = subprocess.run([PODMAN, *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    if check and proc.returncode != 0:
        raise Unavailable(f"podman {' '.join(args[:2])} failed (exit {proc.returncode}): "
                          f"{proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def run_flags() -> list[str]:
    # Lowering a limit needs no privilege; 4096 files and processes are plenty for a probe.
    limits = [min(resource.getrlimit(kind)[0], 4096) if resource.getrlimit(kind)[0] != resource.RLIM_INFINITY
              else 4096 for kind in (resource.RLIMIT_NOFILE, resource.RLIMIT_NPROC)]
    flags = ["--network", "none", "--ulimit", f"nofile={limits[0]}:{limits[0]}",
             "--ulimit", f"nproc={limits[1]}:{limits[1]}"]
    if shutil.which("runc"):
        flags += ["--runtime", "runc"]
    return flags


@dataclass
class Container:
    name: str
    image: str

    @property
    def python(self) -> str:
        return "/usr/bin/python3"

    def diff(self) -> set[str]:
        """Paths changed in the container's root file system since it started (``podman diff``)."""
        return set(_podman("diff", self.name).stdout.splitlines())

    def stop(self) -> None:
        _podman("rm", "--force", "--time", "0", self.name, check=False)


def image(workdir: Path) -> str:
    if PODMAN is None:
        raise Unavailable("podman is not installed (scripts/setup installs it as root: apt-get install podman runc)")
    tag = f"localhost/introspect-test-python:{os.path.basename(SYSTEM_PYTHON)}-{IMAGE_VERSION}"
    if _podman("image", "exists", tag, check=False).returncode != 0:
        _podman("import", "--quiet", str(rootfs_tar(workdir / "rootfs.tar")), tag)
    return tag


def start(workdir: Path, shared: Path) -> Container:
    """A running container with ``shared`` (and pyenv's 3.8 tree, read-only) at the same paths."""
    tag = image(workdir)
    # Run once in the foreground: if the runtime cannot start containers here, this is where it says why.
    _podman("run", "--rm", *run_flags(), tag, "/usr/bin/python3", "-c", "pass")
    name = f"introspect-test-{uuid.uuid4().hex[:8]}"
    mounts = ["-v", f"{shared}:{shared}"]
    if OLD_PYTHON_TREE.is_dir():
        mounts += ["-v", f"{OLD_PYTHON_TREE}:{OLD_PYTHON_TREE}:ro"]
    _podman("run", "-d", "--name", name, *run_flags(), *mounts, tag, "/usr/bin/python3", "-B", "-c",
            "import time; time.sleep(86400)")
    return Container(name, tag)


def created(tag: str) -> Container:
    """A container that exists but was never started."""
    name = f"introspect-test-{uuid.uuid4().hex[:8]}"
    _podman("create", "--name", name, *run_flags(), tag, "/usr/bin/python3", "-B", "-c", "pass")
    return Container(name, tag)


@dataclass
class DockerAPI:
    url: str
    proc: subprocess.Popen[bytes]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def docker_api(workdir: Path) -> DockerAPI:
    """``podman system service``: the Docker Engine API over a unix socket, for the real docker CLI."""
    import time

    docker = shutil.which("docker")
    if PODMAN is None or docker is None:
        raise Unavailable("the docker CLI is not installed (scripts/setup installs docker.io's CLI as root)")
    socket_path = workdir / "docker.sock"
    log = open(workdir / "service.log", "wb")  # noqa: SIM115 - the service keeps it until stop()
    proc = subprocess.Popen([PODMAN, "system", "service", "--time=0", f"unix://{socket_path}"],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    log.close()
    url = f"unix://{socket_path}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise Unavailable(f"podman system service exited: {(workdir / 'service.log').read_text()[-2000:]}")
        version = subprocess.run([docker, "--host", url, "version"], capture_output=True, text=True)
        if version.returncode == 0:
            return DockerAPI(url, proc)
        time.sleep(0.2)
    proc.kill()
    raise Unavailable(f"the docker CLI cannot talk to podman's Docker API: {version.stderr.strip()}")
