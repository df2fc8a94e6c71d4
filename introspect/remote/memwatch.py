"""The resident memory of an isolated task, watched while its supervisor waits for it.

Runs on the host (standard library only, Python 3.8+). The address-space limit
(:mod:`introspect.remote.limits`) is every isolated task's first bound, but the meta-device
code witness runs without one (CUDA's driver reserves address space when it starts), so this
watch is the only bound there, and a second one everywhere else: the resident sets of every
process under the supervisor (the task's process group and anything that left it with
``setsid``: the supervisor is their subreaper) are summed from ``/proc`` a few times a second,
and past the task's memory limit the caller kills the group.

Resident memory, not address space: what the host runs out of. Pages shared between the
task's processes (a forked worker) count once per process, so the sum errs on the safe side.
A host without ``/proc`` (macOS) is not watched; the output caps and the timeout still hold.
"""

from __future__ import annotations

import os
import time
from typing import Dict, List, Optional, Tuple

# Seconds between two looks; closer to the limit, a fifth of it: a task that allocates a few
# GB/s then passes its limit by a fraction of a second's growth, not by a whole interval's.
POLL = 0.25
CLOSE = 0.5  # share of the limit from which the watch looks at the faster rate
# A look reads the stat file of the task's own processes only; the whole of /proc (to find new
# ones) is read every POLL, or less often where it is slow (thousands of processes): at most
# this share of one core goes to it.
SCAN_SHARE = 0.05
# /proc/<pid>/stat after the ")" that ends the command name: 0 state, 1 ppid, 21 rss (pages).
_PPID, _RSS = 1, 21
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _stat(pid: int) -> Optional[Tuple[int, int]]:
    """(parent pid, resident pages) of ``pid``, or None when it is gone (or no /proc)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return int(fields[_PPID]), int(fields[_RSS])
    except (OSError, IndexError, ValueError):
        return None


def _tree(root: int) -> Optional[Dict[int, Tuple[int, int]]]:
    """{pid: (parent pid, resident pages)} of every descendant of ``root``, itself excluded; None
    without /proc."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    table = {}
    for name in names:
        if name.isdigit():
            seen = _stat(int(name))
            if seen is not None:
                table[int(name)] = seen
    if not table:
        return None
    below: Dict[int, List[int]] = {}
    for pid, (ppid, _pages) in table.items():
        below.setdefault(ppid, []).append(pid)
    out, todo = {}, list(below.get(root, []))
    while todo:
        pid = todo.pop()
        out[pid] = table[pid]
        todo.extend(below.get(pid, []))
    return out


def tree_rss(root: int) -> Optional[Tuple[int, int]]:
    """(bytes resident, processes) of every descendant of ``root``; None where ``/proc`` cannot say."""
    tree = _tree(root)
    return None if tree is None else (sum(pages for _ppid, pages in tree.values()) * _PAGE, len(tree))


class MemoryWatch:
    """Looks at the resident memory under ``root`` while the caller waits; ``over()`` says when
    the limit was passed (with what the look saw, kept in ``hit``)."""

    def __init__(self, limit: int, root: Optional[int] = None) -> None:
        self.limit = limit
        self.root = os.getpid() if root is None else root
        self.hit: Optional[Tuple[int, int]] = None  # (bytes, processes) of the look past the limit
        self.peak = 0
        self.known: Dict[int, Tuple[int, int]] = {}  # what the last scan found under root
        self.on = limit > 0 and _tree(self.root) is not None
        self.next_look = self.next_scan = time.monotonic()

    def interval(self) -> float:
        return POLL / 5 if self.peak > CLOSE * self.limit else POLL

    def over(self) -> bool:
        """Look now (if a look is due): True once the processes under ``root`` hold more than
        the limit."""
        if not self.on or self.hit is not None:
            return self.hit is not None
        now = time.monotonic()
        if now < self.next_look:
            return False
        found = self._look(now)
        if found is None:
            self.on = False
            return False
        held = sum(pages for _ppid, pages in found.values()) * _PAGE
        self.peak = max(self.peak, held)
        if held > self.limit:
            self.hit = (held, len(found))
            return True
        self.next_look = now + self.interval()
        return False

    def _look(self, now: float) -> Optional[Dict[int, Tuple[int, int]]]:
        """The processes under root: those of the last scan, re-read (a pid whose parent changed
        was reused by another process: not counted), or a new scan when one is due."""
        if now < self.next_scan and self.known:
            found = {}
            for pid, (ppid, _pages) in self.known.items():
                seen = _stat(pid)
                if seen is not None and seen[0] in (ppid, self.root):  # orphans come to root, its subreaper
                    found[pid] = seen
            if found:
                return found
        tree = _tree(self.root)
        cost = time.monotonic() - now
        self.next_scan = now + max(POLL, cost / SCAN_SHARE)
        self.known = tree or {}
        return tree
