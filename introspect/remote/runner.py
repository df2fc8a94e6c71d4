"""Remote entry point: run one task, answer with one framed JSON document.

Runs on the host under the target interpreter (standard library only, Python
3.8+). The controller starts ``python -B -c <boot>`` and writes one JSON line
(the envelope: protocol, task, request, module sources) on stdin, then keeps
stdin open. stdin reaching EOF means the controller is gone (returned, was
interrupted, lost the connection): the task and everything it started are
killed at once, so nothing keeps running on the host.

Isolated tasks (``"isolate": true``, e.g. the tokenizer load that imports
transformers and runs the model's own code) run in a child interpreter in its
own process group with a private temp dir as HOME for every cache; the
supervisor kills the whole group at the deadline and removes the temp dir.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from typing import Any, Dict, List, Optional

PROTOCOL = 1
BEGIN = b"\n<<<INTROSPECT:BEGIN>>>\n"
END = b"\n<<<INTROSPECT:END>>>\n"

# task name -> (module, function); the function takes the request dict and
# returns a dict of facts (it may include an "errors" list of error records).
TASKS = {
    "model": ("introspect.remote.model_probe", "run"),
    "tokenizer": ("introspect.remote.tokenizer_probe", "run"),
    "health": ("introspect.remote.health_probe", "run"),
    "preflight": ("introspect.remote.preflight_probe", "run"),
    "discover": ("introspect.remote.discover_probe", "run"),
    "resolve": ("introspect.remote.hf_cache", "resolve"),
    "fingerprint": ("introspect.remote.fingerprint", "run"),
    "echo": ("introspect.remote.runner", "echo"),
}

_emit_lock = threading.Lock()
_emitted = False


def echo(request: Dict[str, Any]) -> Dict[str, Any]:
    """Test task: returns its request; ``pad`` bytes of output on both streams; ``sleep`` seconds."""
    pad = int(request.get("pad", 0))
    if pad:
        sys.stderr.write("e" * pad)
        sys.stderr.flush()
    if request.get("sleep"):
        time.sleep(float(request["sleep"]))
    return {"request": request, "pad": "x" * pad, "pid": os.getpid(), "pgid": os.getpgid(0)}


def _claim_stdout():
    """Keep fd 1 for the frame only: anything the task or a library prints goes to stderr."""
    frame_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(frame_fd, "wb")


def _emit(out, reply: Dict[str, Any]) -> None:
    global _emitted
    with _emit_lock:
        if _emitted:
            return
        _emitted = True
        body = json.dumps(reply, default=repr, allow_nan=False).encode("utf-8")
        out.write(BEGIN + body + END)
        out.flush()


def _reply(facts: Any, errors: List[Dict[str, Any]], **extra: Any) -> Dict[str, Any]:
    reply = {"protocol": PROTOCOL, "pid": os.getpid(), "facts": facts, "errors": errors}
    reply.update(extra)
    return reply


def _error(task: str, kind: str, message: str) -> Dict[str, Any]:
    return {"probe": task, "type": kind, "message": message}


def _watch_stdin(on_eof) -> None:
    """Call ``on_eof`` when the controller closes our stdin (it is gone)."""

    def loop() -> None:
        try:
            while sys.stdin.buffer.read(1):
                pass
        except Exception:
            pass
        on_eof()

    threading.Thread(target=loop, name="stdin-watchdog", daemon=True).start()


def _run_task(task: str, request: Dict[str, Any]) -> Dict[str, Any]:
    from introspect.remote.common import json_safe

    if task not in TASKS:
        return _reply(None, [_error(task, "unknown-task", "no such remote task: %r" % task)])
    module_name, func_name = TASKS[task]
    started = time.time()
    try:
        module = __import__(module_name, fromlist=[func_name])
        facts = getattr(module, func_name)(request)
    except Exception as exc:  # a crashing probe is a reported error, not a lost run
        tail = traceback.format_exc().strip().splitlines()[-6:]
        return _reply(None, [dict(_error(task, type(exc).__name__, str(exc)), traceback=tail)],
                      seconds=round(time.time() - started, 3))
    errors = []
    if isinstance(facts, dict) and isinstance(facts.get("errors"), list):
        errors = facts["errors"]
    return _reply(json_safe(facts), json_safe(errors), seconds=round(time.time() - started, 3))


def _private_env(tmp: str) -> Dict[str, str]:
    """Point every cache a tokenizer load may write at the private temp dir (issue 6: no trace)."""
    env = dict(os.environ)
    dirs = {
        "HF_HOME": "hf",
        "HF_MODULES_CACHE": os.path.join("hf", "modules"),
        # Suffixed names: the child's cwd must never hold a dir that imports as a
        # namespace package (an empty "tiktoken/" would shadow a missing tiktoken).
        "TIKTOKEN_CACHE_DIR": "tiktoken-cache",
        "XDG_CACHE_HOME": "xdg-cache",
        "TMPDIR": "tmp",
        "MPLCONFIGDIR": "mpl-cache",
        "TRITON_CACHE_DIR": "triton-cache",
    }
    for name, sub in dirs.items():
        path = os.path.join(tmp, sub)
        os.makedirs(path, exist_ok=True)
        env[name] = path
    env.pop("HF_HUB_CACHE", None)
    env.pop("TRANSFORMERS_CACHE", None)
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
                "PYTHONDONTWRITEBYTECODE": "1", "TOKENIZERS_PARALLELISM": "false"})
    return env


def _empty_dir(tmp: str) -> str:
    """An empty working dir for the child: ``python -c`` puts the cwd on sys.path."""
    path = os.path.join(tmp, "cwd")
    os.makedirs(path, exist_ok=True)
    return path


def _kill_group(proc: "subprocess.Popen") -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        os.killpg(proc.pid, signal.SIGKILL)


def _parse_frame(data: bytes) -> Optional[Dict[str, Any]]:
    start = data.rfind(BEGIN)
    if start < 0:
        return None
    end = data.find(END, start)
    if end < 0:
        return None
    try:
        return json.loads(data[start + len(BEGIN):end].decode("utf-8"))
    except ValueError:
        return None


def _supervise(envelope: Dict[str, Any], boot: str) -> Dict[str, Any]:
    task = envelope.get("task", "?")
    timeout = float(envelope.get("timeout") or 120)
    tmp = tempfile.mkdtemp(prefix="introspect-")  # mode 0700 by construction
    state = {"proc": None}
    done = threading.Event()

    def cleanup() -> None:
        if state["proc"] is not None:
            _kill_group(state["proc"])
        shutil.rmtree(tmp, ignore_errors=True)

    def controller_gone() -> None:
        if not done.is_set():
            cleanup()
            os._exit(70)

    def on_signal(signum, _frame) -> None:
        cleanup()
        os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, on_signal)
    _watch_stdin(controller_gone)

    child_envelope = dict(envelope, isolate=False)
    started = time.time()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-B", "-c", "_BOOT = %r\n%s" % (boot, boot)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=_private_env(tmp), cwd=_empty_dir(tmp), start_new_session=True,
        )
    except OSError as exc:
        cleanup()
        return _reply(None, [_error(task, "spawn-failed", str(exc))])
    state["proc"] = proc
    chunks = {"out": [], "err": []}

    def drain(stream, key: str) -> None:
        for block in iter(lambda: stream.read(65536), b""):
            chunks[key].append(block)

    readers = [threading.Thread(target=drain, args=(proc.stdout, "out"), daemon=True),
               threading.Thread(target=drain, args=(proc.stderr, "err"), daemon=True)]
    for reader in readers:
        reader.start()
    proc.stdin.write(json.dumps(child_envelope).encode("utf-8") + b"\n")
    proc.stdin.flush()
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    _kill_group(proc)  # the task's own children too, whether it finished or not
    proc.wait()
    with contextlib.suppress(OSError):
        proc.stdin.close()
    for reader in readers:
        reader.join(5)
    done.set()
    shutil.rmtree(tmp, ignore_errors=True)
    seconds = round(time.time() - started, 3)
    stderr_tail = b"".join(chunks["err"])[-4000:].decode("utf-8", "replace")
    supervisor = {"seconds": seconds, "exit_status": proc.returncode, "timeout": timeout,
                  "stderr_tail": stderr_tail, "temp_dir_removed": not os.path.exists(tmp)}
    if timed_out:
        msg = "%s probe ran past its %.0f s timeout; its process group was killed" % (task, timeout)
        return _reply(None, [_error(task, "timeout", msg)], supervisor=supervisor)
    child = _parse_frame(b"".join(chunks["out"]))
    if child is None:
        rc = proc.returncode
        if rc is not None and rc < 0:
            name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
            msg = "%s probe process was killed by signal %s" % (task, name)
            return _reply(None, [_error(task, "killed", msg)], supervisor=supervisor)
        msg = "%s probe exited with status %s without a reply; stderr: %s" % (
            task, rc, stderr_tail.strip().splitlines()[-1:] or "")
        return _reply(None, [_error(task, "no-reply", msg)], supervisor=supervisor)
    child["supervisor"] = supervisor
    return child


def main(envelope: Dict[str, Any], boot: str) -> None:
    out = _claim_stdout()
    task = str(envelope.get("task"))
    if envelope.get("protocol") != PROTOCOL:
        msg = "controller speaks protocol %r, this probe %d" % (envelope.get("protocol"), PROTOCOL)
        _emit(out, _reply(None, [_error(task, "protocol-mismatch", msg)]))
        return
    if envelope.get("isolate"):
        reply = _supervise(envelope, boot)
    else:
        _watch_stdin(lambda: os._exit(70))
        reply = _run_task(task, envelope.get("request") or {})
    reply["python"] = {"version": list(sys.version_info[:3]), "executable": sys.executable}
    reply["probe_version"] = envelope.get("probe_version")
    _emit(out, reply)
    sys.stderr.flush()
    # Leave now: a collector thread stuck on a dead NFS mount must not hold the exit.
    os._exit(0)
