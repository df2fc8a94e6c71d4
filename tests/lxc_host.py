"""A real LXC container for the transport tests: tests/rootfs.py's tree, unpacked, started by
``lxc-start`` in a private lxcpath (``-P``), so nothing is left in /var/lib/lxc.

Like the podman container it has no network, and the fixture's shared dir (and pyenv's
Python 3.8, read-only, when present) bind-mounted at the same paths.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from tests.rootfs import OLD_PYTHON_TREE, Unavailable, rootfs_tar

LXC_START = shutil.which("lxc-start")


@dataclass
class LxcContainer:
    name: str
    lxcpath: Path
    rootfs: Path
    skip: tuple[str, ...]

    @property
    def python(self) -> str:
        return "/usr/bin/python3"

    def files(self) -> set[str]:
        """Every path in the container's root file system, mounts left out."""
        found: set[str] = set()
        for dirpath, dirnames, filenames in os.walk(self.rootfs):
            rel = "/" + os.path.relpath(dirpath, self.rootfs)
            dirnames[:] = [d for d in dirnames if not any(
                os.path.normpath(f"{rel}/{d}").startswith(s) for s in self.skip)]
            found.update(os.path.normpath(f"{rel}/{name}") for name in dirnames + filenames)
        return found

    def stop(self) -> None:
        subprocess.run(["lxc-stop", "-P", str(self.lxcpath), "-n", self.name, "--kill"], capture_output=True,
                       timeout=60)
        subprocess.run(["lxc-destroy", "-P", str(self.lxcpath), "-n", self.name], capture_output=True, timeout=60)
        shutil.rmtree(self.lxcpath, ignore_errors=True)


def _config(name: str, rootfs: Path, mounts: list[tuple[Path, bool]]) -> str:
    lines = [f"lxc.uts.name = {name}", f"lxc.rootfs.path = dir:{rootfs}", "lxc.net.0.type = empty",
             "lxc.init.cmd = /usr/bin/python3 -B /sleep.py", "lxc.mount.auto = proc:mixed sys:ro",
             "lxc.autodev = 1", "lxc.apparmor.profile = unconfined"]
    for path, read_only in mounts:
        flags = "bind,create=dir" + (",ro" if read_only else "")
        lines.append(f"lxc.mount.entry = {path} {str(path).lstrip('/')} none {flags} 0 0")
    return "\n".join(lines) + "\n"


def start(workdir: Path, shared: Path) -> LxcContainer:
    if LXC_START is None:
        raise Unavailable("LXC is not installed (scripts/setup installs it as root: apt-get install lxc)")
    if os.geteuid() != 0:
        raise Unavailable("a privileged LXC container needs root")
    name = f"introspect-test-{uuid.uuid4().hex[:8]}"
    lxcpath = Path(workdir) / "lxcpath"
    rootfs = Path(workdir) / "rootfs"
    lxcpath.mkdir(mode=0o755)
    rootfs.mkdir(mode=0o755)
    with tarfile.open(rootfs_tar(Path(workdir) / "rootfs.tar")) as tar:
        tar.extractall(rootfs)  # noqa: S202 - our own tar, built a line above
    (rootfs / "sleep.py").write_text("import time\ntime.sleep(86400)\n")
    for sub in ("proc", "sys", "dev"):
        (rootfs / sub).mkdir(exist_ok=True)
    mounts = [(shared, False)] + ([(OLD_PYTHON_TREE, True)] if OLD_PYTHON_TREE.is_dir() else [])
    config = Path(workdir) / "config"
    config.write_text(_config(name, rootfs, mounts))
    log = Path(workdir) / "lxc.log"
    proc = subprocess.run([LXC_START, "-P", str(lxcpath), "-n", name, "-f", str(config), "-d", "-l", "INFO",
                           "-o", str(log)], capture_output=True, text=True, timeout=60)
    container = LxcContainer(name, lxcpath, rootfs, ("/proc", "/sys", "/dev", str(shared),
                                                     str(OLD_PYTHON_TREE)))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        state = subprocess.run(["lxc-info", "-P", str(lxcpath), "-n", name, "-s", "-H"], capture_output=True,
                               text=True, timeout=30).stdout.strip()
        if state == "RUNNING":
            return container
        if proc.returncode != 0 or state == "STOPPED":
            break
        time.sleep(0.2)
    errors = [line for line in (log.read_text() if log.exists() else "").splitlines() if "ERROR" in line]
    container.stop()
    raise Unavailable(f"lxc-start could not start a container: {proc.stderr.strip() or ' / '.join(errors[-3:])}")
