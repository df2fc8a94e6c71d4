# -*- coding: utf-8 -*-
"""Run one of introspect's remote tasks on this host, as introspect's own controller would.

The task code is introspect's ``introspect/remote`` package, copied into
``introspect_payload`` when the collection is built (``integrations/ansible/build.py``):
it is started as ``<python> -B -c BOOT`` with the envelope (request + module sources)
on stdin, exactly as over SSH, so the venv's own interpreter runs it, isolated tasks
get their own process group and timeout, and stdin is held open until the reply is
in (closing it makes the remote watchdog kill the task group).

Standard library only, Python 3.8+ (this runs under the host's interpreter).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import signal
import subprocess
import threading
import time

from ansible_collections.introspect.models.plugins.module_utils.introspect_payload import (
    BEGIN,
    BOOT,
    DEFAULTS,
    END,
    PACKAGES,
    PROBE_VERSION,
    PROTOCOL,
    SOURCES,
)

# Extra seconds past a task's own timeout, so that the remote supervisor can report
# its timeout itself (with partial facts); introspect's controller waits as long.
GRACE_S = 10.0
TAIL = 2000


def defaults():
    return dict(DEFAULTS)


def venv_python(venv):
    # As introspect's contract.venv_python: the record's interpreter must match the controller's name.
    return os.path.join(venv.rstrip("/") or "/", "bin", "python")


def run_task(python, task, request, timeout, isolate=False):
    """One task's record: what was asked, the framed reply (or why none), stderr's tail.

    introspect rebuilds its native error classification from this record, so it keeps
    the exit status and whether the deadline passed rather than judging them here.
    """
    envelope = {"protocol": PROTOCOL, "probe_version": PROBE_VERSION, "task": task, "request": request,
                "isolate": isolate, "timeout": timeout, "sources": SOURCES, "packages": PACKAGES}
    record = {"task": task, "python": python, "request": request, "isolate": isolate, "timeout": timeout,
              "reply": None, "stdout_tail": "", "stderr_tail": "", "exit_status": None, "timed_out": False,
              "spawn_error": None, "seconds": 0.0}
    started = time.time()
    try:
        proc = subprocess.Popen([python, "-B", "-c", BOOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        record["spawn_error"] = {"errno": exc.errno, "message": "%s: %s" % (python, exc.strerror or exc)}
        return record
    out, err = [], []
    readers = [threading.Thread(target=_drain, args=(proc.stdout, out)),
               threading.Thread(target=_drain, args=(proc.stderr, err))]
    for reader in readers:
        reader.daemon = True
        reader.start()
    try:
        try:
            proc.stdin.write(json.dumps(envelope).encode("utf-8") + b"\n")
            proc.stdin.flush()
        except (OSError, ValueError):
            pass  # it died at once; its stderr says why
        deadline = started + timeout + GRACE_S
        for reader in readers:
            reader.join(max(0.0, deadline - time.time()))
        record["timed_out"] = any(reader.is_alive() for reader in readers)
        if not record["timed_out"]:
            try:
                record["exit_status"] = proc.wait(max(0.5, min(5.0, deadline - time.time())))
            except subprocess.TimeoutExpired:
                pass
    finally:
        _stop(proc)
    stdout = b"".join(out)
    record["reply"], rest = _frame(stdout)
    record["stdout_tail"] = rest[-TAIL:].decode("utf-8", "replace")
    record["stderr_tail"] = b"".join(err)[-TAIL:].decode("utf-8", "replace")
    record["seconds"] = round(time.time() - started, 3)
    return record


def _drain(stream, sink):
    try:
        while True:
            chunk = os.read(stream.fileno(), 65536)
            if not chunk:
                return
            sink.append(chunk)
    except (OSError, ValueError):
        return


def _stop(proc):
    try:
        proc.stdin.close()
    except OSError:
        pass
    try:
        proc.wait(0.5)  # closing stdin lets the task clean up first
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the task's whole group: nothing stays behind
        except OSError:
            pass
        proc.wait()


def _frame(stdout):
    """(the last complete frame as a dict, or None; stdout without it)."""
    start = stdout.rfind(BEGIN)
    end = stdout.find(END, start) if start >= 0 else -1
    if start < 0 or end < 0:
        return None, stdout
    try:
        reply = json.loads(stdout[start + len(BEGIN):end].decode("utf-8"))
    except ValueError:
        return None, stdout
    return (reply if isinstance(reply, dict) else None), stdout[:start] + stdout[end + len(END):]


def run_many(jobs, parallel):
    """Run ``(python, task, request, timeout, isolate)`` jobs, at most ``parallel`` at once;
    records in job order."""
    records = [None] * len(jobs)
    lock = threading.Lock()
    queue = list(enumerate(jobs))

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                index, job = queue.pop(0)
            records[index] = run_task(*job)

    threads = [threading.Thread(target=worker) for _ in range(max(1, min(parallel, len(jobs))))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return records


def facts_document(records, **extra):
    """What a module returns under ``ansible_facts``: the records plus what produced them."""
    doc = {"schema": "introspect.ansible-facts/v1", "probe_version": PROBE_VERSION, "protocol": PROTOCOL,
           "calls": records}
    doc.update(extra)
    return doc
