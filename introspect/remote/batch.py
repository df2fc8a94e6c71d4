"""Several tasks over one session: one exec, one interpreter start, one framed reply per task.

Runs on the host (standard library only, Python 3.8+). Every exec over SSH runs the
user's login shell with its rc files (``conda init``, ``pyenv init``: tens to hundreds
of milliseconds and dozens of processes per session), so the controller sends the tasks
that share an interpreter in one envelope::

    {"protocol", "probe_version", "batch": [{"key", "task", "request", "isolate", "timeout",
                                             "stop_if_digest"}], "sources", "packages"}

An item with ``stop_if_digest`` (the probe cache's check) runs first; when its facts carry
that digest its reply says ``"stopped": true`` and nothing else runs.

Plain tasks run in threads of this process. An isolated task runs exactly as it would
in its own session: in a child interpreter that re-runs BOOT with ``isolate: true``
(its own supervisor, process group, private temp dir and timeout), so the supervisors
never share a subreaper and one task's cleanup cannot touch another's processes. Each
reply is framed with its ``key`` and written as soon as its task ends. When the
controller goes away (stdin EOF) every child's stdin is closed, which makes their
watchdogs kill their task groups, and this process leaves.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, List, cast

from .contract import error_record

if TYPE_CHECKING:  # annotations only: the shapes are imported on the host only by tasks that need them
    from .contract import Envelope, Reply

RunTask = Callable[[str, Dict[str, Any]], "Reply"]
Frame = Callable[[Any, List[Any]], "Reply"]
# How long past its own timeout an isolated child may take to clean up and answer.
CHILD_GRACE_S = 30.0


class _Children:
    """The isolated children alive now, so that the controller going away ends them all."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.procs: List["subprocess.Popen[bytes]"] = []

    def add(self, proc: "subprocess.Popen[bytes]") -> None:
        with self.lock:
            self.procs.append(proc)

    def release(self) -> None:
        """Close every child's stdin: its watchdog then kills its task group and leaves."""
        with self.lock:
            for proc in self.procs:
                try:
                    if proc.stdin is not None:
                        proc.stdin.close()
                except OSError:
                    pass


def run_batch(envelope: Envelope, boot: str, run_task: RunTask, frame: Frame,
              watch_stdin: Callable[[Callable[[], None]], None], emit: Callable[[Reply], None]) -> None:
    """Run every task of the batch at once; ``emit`` frames each reply as its task ends."""
    items = [item for item in envelope.get("batch") or [] if isinstance(item, dict)]
    children = _Children()

    def gone() -> None:
        children.release()
        os._exit(70)

    watch_stdin(gone)

    def one(item: Dict[str, Any]) -> Reply:
        task, request = str(item.get("task")), item.get("request") or {}
        try:
            if item.get("isolate"):
                reply = _isolated(envelope, boot, item, children, frame)
            else:
                reply = run_task(task, request)
        except Exception as exc:  # noqa: BLE001 - one task's failure is its own reply
            reply = frame(None, [error_record(type(exc).__name__, str(exc), probe=task)])
        reply["key"] = item.get("key")
        return reply

    # Checks first, one by one: a cache check whose digest matches ends the batch (the
    # controller already holds those facts), so nothing else runs on the host.
    for check in [item for item in items if item.get("stop_if_digest")]:
        reply = one(check)
        facts = reply.get("facts")
        reply["stopped"] = isinstance(facts, dict) and facts.get("digest") == check["stop_if_digest"]
        emit(reply)
        if reply["stopped"]:
            return
    rest = [item for item in items if not item.get("stop_if_digest")]
    threads = [threading.Thread(target=lambda item=item: emit(one(item)), name="batch-%s" % item.get("key"),
                                daemon=True) for item in rest]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _isolated(envelope: Envelope, boot: str, item: Dict[str, Any], children: _Children, frame: Frame) -> Reply:
    """The reply of one isolated task, run by a child interpreter as its own session would run it."""
    # The supervisor's own child plumbing (drained streams, the envelope line) and frame reader;
    # not its wait, which kills every process of this one (the other tasks' too).
    from .supervisor import _Child, parse_frame

    task = str(item.get("task"))
    single = {"protocol": envelope.get("protocol"), "probe_version": envelope.get("probe_version"), "task": task,
              "request": item.get("request") or {}, "isolate": True, "timeout": item.get("timeout"),
              "sources": envelope.get("sources"), "packages": envelope.get("packages")}
    proc = subprocess.Popen([sys.executable, "-B", "-c", "_BOOT = %r\n%s" % (boot, boot)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    children.add(proc)
    child = _Child(proc)
    child.send(single)  # stdin stays open: its EOF would tell the child the controller is gone
    limit = float(item.get("timeout") or 0) + CHILD_GRACE_S
    for reader in child.readers:
        reader.join(limit)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()  # its supervisor could not clean up in time: the session's exit is the last resort
        proc.wait()
    try:
        if proc.stdin is not None:
            proc.stdin.close()
    except OSError:
        pass
    reply = parse_frame(child.output("out"))
    if reply is not None:
        return cast("Reply", reply)
    tail = child.output("err").decode("utf-8", "replace").strip().splitlines()[-1:]
    return frame(None, [error_record("no-reply", "%s probe's interpreter exited with status %s without a reply%s"
                                     % (task, proc.returncode, ": " + tail[0] if tail else ""), probe=task)])
