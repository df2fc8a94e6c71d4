"""Shard headers summarised in forked worker processes, for checkpoints with many shards.

Runs on the host: standard library only, Python 3.8+. Summarising a 1T
checkpoint's ~200k header entries is pure-Python work that threads cannot spread
over cores (the GIL); forked children can. None from any step means "use threads".
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any, Dict, List, Optional, Tuple

from ...contract import ShardSummary
from .shard_header import read_shard

CHILD_DEADLINE_S = 120


def fork_workers() -> int:
    """How many workers to fork here (0: do not fork)."""
    if not hasattr(os, "fork"):
        return 0
    try:
        cpus = len(os.sched_getaffinity(0))  # what this process may really use (cgroups, taskset)
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return min(cpus, 8) if cpus > 1 else 0


def read_in_processes(paths: List[str], max_header: int) -> Optional[List[ShardSummary]]:
    """Summarise the shards in forked workers (see :func:`start_workers`); None to fall back."""
    return finish_workers(start_workers(paths, max_header))


Workers = Tuple[List[str], List[List[str]], List[Tuple[int, int]]]  # paths, slices, (pid, pipe)


def start_workers(paths: List[str], max_header: int) -> Optional[Workers]:
    """Fork workers that summarise one slice of shards each; they run while the caller goes on.

    Summarising a 1T checkpoint's ~200k header entries is pure-Python work that
    threads cannot spread over cores (the GIL). Forked children inherit the shipped
    modules (the remote code is served from memory: a spawned interpreter could not
    import it), summarise their slice and send it back as JSON over a pipe. None when
    forking is unavailable or fails: the caller then uses threads.
    """
    workers = min(fork_workers(), len(paths))
    if workers < 2:
        return None
    slices = [paths[i::workers] for i in range(workers)]
    children: List[Tuple[int, int]] = []
    try:
        for chunk in slices:
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:  # child: summarise, reply, leave without running any parent cleanup
                status = 1
                try:
                    # Bounded even if it wedged: SIGALRM's default action ends the process.
                    signal.alarm(CHILD_DEADLINE_S)
                    os.close(read_end)
                    body = json.dumps([read_shard(p, max_header) for p in chunk]).encode("utf-8")
                    with os.fdopen(write_end, "wb") as out:
                        out.write(body)
                    status = 0
                finally:
                    os._exit(status)
            os.close(write_end)
            children.append((pid, read_end))
    except OSError:
        _reap(children, kill=True)
        return None
    return paths, slices, children


def finish_workers(handle: Optional[Workers]) -> Optional[List[ShardSummary]]:
    """The workers' summaries, in the order of the paths; None when any worker failed."""
    if handle is None:
        return None
    paths, slices, children = handle
    results: List[Any] = []
    try:
        for pid, read_end in children:
            with os.fdopen(read_end, "rb") as reply:
                data = reply.read()
            _, status = os.waitpid(pid, 0)
            if status != 0:
                raise ValueError("worker %d exited with status %d" % (pid, status))
            results.append(json.loads(data.decode("utf-8")))
    except (OSError, ValueError):
        _reap(children[len(results):], kill=True)
        return None
    by_path: Dict[str, ShardSummary] = {}
    for chunk, shards in zip(slices, results):
        by_path.update(zip(chunk, shards))
    return [by_path[p] for p in paths]


def _reap(children: List[Tuple[int, int]], kill: bool) -> None:
    for pid, read_end in children:
        try:
            os.close(read_end)
        except OSError:
            pass
        try:
            if kill:
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass

