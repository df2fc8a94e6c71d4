"""Remote entry point: run one task, answer with one framed JSON document.

Runs on the host under the target interpreter (standard library only, Python
3.8+). The controller starts ``python -B -c <boot>`` and writes one JSON line
(the envelope: protocol, task, request, module sources) on stdin, then keeps
stdin open. stdin reaching EOF means the controller is gone (returned, was
interrupted, lost the connection): the task and everything it started are
killed at once, so nothing keeps running on the host.

Isolated tasks (``"isolate": true``, e.g. the tokenizer load that imports
transformers and runs the model's own code) run in a child interpreter, see
:mod:`introspect.remote.supervisor`.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from typing import IO, TYPE_CHECKING, Any, Callable, Dict, List

from .contract import BEGIN, END, PROTOCOL, ErrorRecord, error_record

if TYPE_CHECKING:  # annotations only: the shapes are not imported on the host unless a task needs them
    from .contract import Envelope, Reply

# task name -> (module, function); the function takes the request dict and returns
# the task's reply (which may include an "errors" list of error records).
TASKS = {
    "model": ("introspect.remote.tasks.model", "run"),
    "tokenizer": ("introspect.remote.tasks.tokenizer", "run"),
    "model_code": ("introspect.remote.tasks.model_code", "run"),
    "health": ("introspect.remote.tasks.health", "run"),
    "preflight": ("introspect.remote.tasks.preflight", "run"),
    "discover": ("introspect.remote.tasks.discover", "run"),
    "resolve": ("introspect.remote.tasks.resolve", "run"),
    "fingerprint": ("introspect.remote.tasks.fingerprint", "run"),
    "gpus": ("introspect.remote.tasks.gpus", "run"),
    "echo": ("introspect.remote.tasks.echo", "run"),
}
# Isolated tasks whose module can tell, without importing anything heavy, that the child
# interpreter would fail at once (e.g. no torch for the code witness): the function returns
# that task's reply, or None to go on and isolate. It saves a child interpreter and its shim.
PRECHECKS = {
    "model_code": ("introspect.remote.tasks.model_code", "precheck"),
}

_emit_lock = threading.Lock()
_emitted = False


def _claim_stdout() -> "IO[bytes]":
    """Keep fd 1 for the frame only: anything the task or a library prints goes to stderr."""
    frame_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(frame_fd, "wb")


# Characters of one error message shipped back (an exception can carry a whole file in its text).
MAX_ERROR_MESSAGE = 4000


def cap_messages(errors: Any) -> None:
    """Cut each error record's message to MAX_ERROR_MESSAGE, keeping its true size."""
    for record in errors if isinstance(errors, list) else []:
        message = record.get("message") if isinstance(record, dict) else None
        if isinstance(message, str) and len(message) > MAX_ERROR_MESSAGE:
            record.update(message=message[:MAX_ERROR_MESSAGE] + "...", message_size=len(message), truncated=True)


def _emit(out: "IO[bytes]", reply: Reply) -> None:
    """The one frame of a single task: written once, whoever calls first."""
    global _emitted
    with _emit_lock:
        if _emitted:
            return
        _emitted = True
        _write_frame(out, reply)


def _write_frame(out: "IO[bytes]", reply: Reply) -> None:
    """One framed reply on ``out``, its error messages capped (the caller holds ``_emit_lock``)."""
    cap_messages(reply.get("errors"))
    body = json.dumps(reply, default=repr, allow_nan=False).encode("utf-8")
    out.write(BEGIN + body + END)
    out.flush()


def frame(facts: Any, errors: List[Any]) -> Reply:
    """The reply around a task's facts (``seconds``, ``python`` ... are added by the caller)."""
    reply: Reply = {"protocol": PROTOCOL, "pid": os.getpid(), "facts": facts, "errors": errors}
    return reply


def watch_stdin(on_eof: Callable[[], None]) -> None:
    """Call ``on_eof`` when the controller closes our stdin (it is gone)."""

    def loop() -> None:
        try:
            while sys.stdin.buffer.read(1):
                pass
        except Exception:
            pass
        on_eof()

    threading.Thread(target=loop, name="stdin-watchdog", daemon=True).start()


def _run_task(task: str, request: Dict[str, Any], table: Dict[str, Any] = TASKS) -> Reply:
    from .readers import json_safe

    if task not in table:
        return frame(None, [error_record("unknown-task", "no such remote task: %r" % task, probe=task)])
    module_name, func_name = table[task]
    started = time.time()
    try:
        module = __import__(module_name, fromlist=[func_name])
        facts = getattr(module, func_name)(request)
    except MemoryError:  # under the probe's own limit: name it (the limit, not a bare MemoryError)
        from .limits import memory_message

        reply = frame(None, [error_record("memory-limit", memory_message("%s probe" % task), probe=task)])
    except Exception as exc:  # a crashing probe is a reported error, not a lost run
        record = error_record(type(exc).__name__, str(exc), probe=task)
        record["traceback"] = traceback.format_exc().strip().splitlines()[-6:]
        reply = frame(None, [record])
    else:
        errors: List[ErrorRecord] = []
        if isinstance(facts, dict) and isinstance(facts.get("errors"), list):
            errors = facts["errors"]
        reply = frame(json_safe(facts), json_safe(errors))
    reply["seconds"] = round(time.time() - started, 3)
    return reply


def _answer(task: str, envelope: Envelope, boot: str) -> Reply:
    request = envelope.get("request") or {}
    if not envelope.get("isolate"):
        if envelope.get("limits") is not None:  # a supervisor's child: its limits, before the task runs
            from .limits import apply

            apply(envelope.get("limits"))
        watch_stdin(lambda: os._exit(70))
        return _run_task(task, request)
    if task in PRECHECKS:
        early = _run_task(task, request, PRECHECKS)
        # None from the check (or a check that failed itself): isolate as usual.
        if early.get("facts") is not None:
            return early
    from .supervisor import supervise

    return supervise(envelope, boot, frame, watch_stdin)


def _finish(reply: Reply, envelope: Envelope) -> Reply:
    """What every reply carries besides the task's own: the interpreter, the probe's version."""
    reply["python"] = {"version": list(sys.version_info[:3]), "executable": sys.executable}
    reply["probe_version"] = envelope.get("probe_version")
    return reply


def main(envelope: Envelope, boot: str) -> None:
    out = _claim_stdout()
    task = str(envelope.get("task"))
    if envelope.get("protocol") != PROTOCOL:
        msg = "controller speaks protocol %r, this probe %d" % (envelope.get("protocol"), PROTOCOL)
        _emit(out, frame(None, [error_record("protocol-mismatch", msg, probe=task)]))
        return
    if envelope.get("batch") is not None:
        from .batch import run_batch

        def emit(reply: Reply) -> None:
            with _emit_lock:
                _write_frame(out, _finish(reply, envelope))

        run_batch(envelope, boot, _run_task, frame, watch_stdin, emit)
    else:
        _emit(out, _finish(_answer(task, envelope, boot), envelope))
    sys.stderr.flush()
    # Leave now: a collector thread stuck on a dead NFS mount must not hold the exit.
    os._exit(0)
