"""Every descendant of an isolated task killed and reaped, detached or not.

Runs on the host (standard library only, Python 3.8+). A process-group kill cannot reach
a grandchild that called ``os.setsid()``: it left the group. So the supervisor makes
itself a *child subreaper* (Linux ``prctl(PR_SET_CHILD_SUBREAPER)``, since 3.4): an
orphaned descendant is re-parented to the supervisor instead of init, where
:func:`reap_descendants` finds it (``/proc/*/stat``: parent pid), kills and reaps it.

The task runs behind a small *shim* process (:data:`SHIM`): code that kills its parent
kills the shim, never the supervisor that must still answer the controller.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import time
from typing import List

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h

# argv: python -B -c SHIM WORKER_CODE. The worker is a child of the shim, so its getppid()
# is the shim; a worker killed by a signal makes the shim die of the same signal.
SHIM = (
    "import os, signal, sys\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.execv(sys.executable, [sys.executable, '-B', '-c', sys.argv[1]])\n"
    "status = os.waitpid(pid, 0)[1]\n"
    "if os.WIFSIGNALED(status):\n"
    "    sig = os.WTERMSIG(status)\n"
    "    if sig not in (signal.SIGKILL, signal.SIGSTOP):\n"
    "        signal.signal(sig, signal.SIG_DFL)\n"
    "    os.kill(os.getpid(), sig)\n"
    "os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)\n"
)


def become_subreaper() -> bool:
    """Adopt orphaned descendants (Linux); False where the kernel or libc does not offer it."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def children(parent: int) -> List[int]:
    """Pids whose parent is ``parent`` (from /proc; empty where there is no /proc)."""
    out = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # exited meanwhile
        if len(fields) > 1 and int(fields[1]) == parent:
            out.append(int(name))
    return out


def reap_descendants(rounds: int = 50) -> int:
    """Kill and reap every child of this process, and the orphans re-parented to it as
    their parents die, until none is left. Returns how many were found."""
    found = 0
    me = os.getpid()
    for _ in range(rounds):
        pids = children(me)
        if not pids:
            break
        found += len(pids)
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        _reap(pids, time.time() + 2.0)
        time.sleep(0.01)  # let the kernel re-parent the orphans of the ones just killed
    return found


def _reap(pids: List[int], deadline: float) -> None:
    """waitpid each killed pid without blocking: one stuck in the kernel (a dead NFS
    mount) must not hold the supervisor past ``deadline``."""
    left = list(pids)
    while left and time.time() < deadline:
        for pid in list(left):
            try:
                done, _status = os.waitpid(pid, os.WNOHANG)
            except (ChildProcessError, OSError):
                done = pid  # not our child (any more): nothing to reap
            if done:
                left.remove(pid)
        if left:
            time.sleep(0.01)
