"""A container root file system made of this machine's own Python, without any registry.

This machine's ``/usr/bin/python3`` and its standard library, the shared
libraries ``ldd`` says it and its extension modules need (plus libgcc_s, which
glibc loads by itself), ``dash`` as /bin/sh, and an /etc/passwd with root and
nobody, as one tar file: podman imports it, LXC runs it unpacked.
"""

from __future__ import annotations

import glob
import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

SYSTEM_PYTHON = os.path.realpath("/usr/bin/python3")
OLD_PYTHON_TREE = Path(os.path.expanduser("~/.pyenv/versions/3.8.18"))


class Unavailable(Exception):
    """A container runtime cannot run a container here; the message is what it printed."""


def _needed_libraries(binaries: list[str]) -> set[str]:
    libs: set[str] = set()
    for binary in binaries:
        out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
        libs.update(word for line in out.splitlines() for word in line.split() if word.startswith("/"))
    return libs


def rootfs_tar(tar_path: Path) -> Path:
    stdlib = Path(SYSTEM_PYTHON.replace("/bin/", "/lib/"))
    if not stdlib.is_dir():
        raise Unavailable(f"no standard library next to {SYSTEM_PYTHON} (looked for {stdlib})")
    dash = shutil.which("dash") or "/bin/sh"
    extensions = glob.glob(str(stdlib / "lib-dynload" / "*.so"))
    # glibc dlopen()s libgcc_s for thread exit and cancellation; ldd cannot see that.
    dlopened = glob.glob("/lib/*/libgcc_s.so.1") + glob.glob("/usr/lib/*/libgcc_s.so.1")
    skip = {"dist-packages", "site-packages", "test", "__pycache__", "idlelib", "tkinter", "ensurepip",
            "lib2to3", "pydoc_data", "turtledemo"}
    with tarfile.open(tar_path, "w") as tar:
        for path in sorted({SYSTEM_PYTHON, dash, *dlopened,
                            *_needed_libraries([SYSTEM_PYTHON, dash, *extensions])}):
            tar.add(os.path.realpath(path), arcname=path.lstrip("/"))
        tar.add(str(stdlib), arcname=str(stdlib).lstrip("/"),
                filter=lambda info: None if skip & set(Path(info.name).parts) else info)
        for name, target in (("bin", "usr/bin"), ("usr/bin/python3", os.path.basename(SYSTEM_PYTHON)),
                             ("usr/bin/sh", os.path.basename(dash))):
            link = tarfile.TarInfo(name)
            link.type, link.linkname = tarfile.SYMTYPE, target
            tar.addfile(link)
        for directory, mode in (("tmp", 0o1777), ("root", 0o700), ("etc", 0o755)):
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)
        _add_text(tar, "etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n")
        _add_text(tar, "etc/group", "root:x:0:\nnogroup:x:65534:\n")
    return tar_path


def _add_text(tar: tarfile.TarFile, name: str, text: str) -> None:
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))
