"""Isolated tasks: run one in a child interpreter, in its own process group, with private caches.

Runs on the host (standard library only, Python 3.8+). The child gets a private
temp dir as HOME for every cache a tokenizer load may write; at the deadline, or
when the controller goes away, the whole process group is killed, then every other
descendant (a detached ``setsid`` grandchild too: the supervisor is a child
subreaper, see :mod:`introspect.remote.reaper`), and the temp dir is removed, so
nothing keeps running on the host and no trace is left. The task runs behind a shim
process, so code that kills its parent costs the task, never the supervisor's reply.
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
from typing import IO, Any, Callable, Dict, List, Optional, cast

from .contract import BEGIN, DEFAULT_TOKENIZER_TIMEOUT, END, Envelope, ErrorRecord, Reply, error_record
from .reaper import SHIM, become_subreaper, reap_descendants

Frame = Callable[[Any, List[Any]], Reply]  # (facts, errors) -> the framed reply


def private_env(tmp: str) -> Dict[str, str]:
    """Point every cache a tokenizer load may write at the private temp dir: no trace on the host."""
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


def kill_group(proc: "subprocess.Popen[bytes]") -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        os.killpg(proc.pid, signal.SIGKILL)


def parse_frame(data: bytes) -> Optional[Dict[str, Any]]:
    """The last complete frame in ``data``, or None."""
    start = data.rfind(BEGIN)
    if start < 0:
        return None
    end = data.find(END, start)
    if end < 0:
        return None
    try:
        value = json.loads(data[start + len(BEGIN):end].decode("utf-8"))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class _Child:
    """The child interpreter and its two drained streams."""

    def __init__(self, proc: "subprocess.Popen[bytes]") -> None:
        self.proc = proc
        self.chunks: Dict[str, List[bytes]] = {"out": [], "err": []}
        self.readers = [threading.Thread(target=self._drain, args=(proc.stdout, "out"), daemon=True),
                        threading.Thread(target=self._drain, args=(proc.stderr, "err"), daemon=True)]
        for reader in self.readers:
            reader.start()

    def _drain(self, stream: "Optional[IO[bytes]]", key: str) -> None:
        if stream is None:
            return
        for block in iter(lambda: stream.read(65536), b""):
            self.chunks[key].append(block)

    def send(self, envelope: Dict[str, Any]) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.write(json.dumps(envelope).encode("utf-8") + b"\n")
            self.proc.stdin.flush()

    def wait(self, timeout: float) -> bool:
        """True when the child finished in time. Its process group is killed either way."""
        try:
            self.proc.wait(timeout=timeout)
            finished = True
        except subprocess.TimeoutExpired:
            finished = False
        kill_group(self.proc)  # the task's own children too, whether it finished or not
        self.proc.wait()
        reap_descendants()  # detached ones, re-parented to this subreaper
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        for reader in self.readers:
            reader.join(5)
        return finished

    def output(self, key: str) -> bytes:
        return b"".join(self.chunks[key])


def _install_cleanup(cleanup: Callable[[], None], done: threading.Event,
                     watch_stdin: Callable[[Callable[[], None]], None]) -> None:
    """On a signal, or when the controller closes stdin, clean up and leave at once."""

    def controller_gone() -> None:
        if not done.is_set():
            cleanup()
            os._exit(70)

    def on_signal(signum: int, _frame: Any) -> None:
        cleanup()
        os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, on_signal)
    watch_stdin(controller_gone)


def supervise(envelope: Envelope, boot: str, frame: Frame,
              watch_stdin: Callable[[Callable[[], None]], None]) -> Reply:
    """Run the envelope's task in a child (re-running ``boot``) and return its reply."""
    task = str(envelope.get("task", "?"))
    timeout = float(envelope.get("timeout") or DEFAULT_TOKENIZER_TIMEOUT)
    tmp = tempfile.mkdtemp(prefix="introspect-")  # mode 0700 by construction
    state: Dict[str, Optional[_Child]] = {"child": None}
    done = threading.Event()

    def cleanup() -> None:
        child = state["child"]
        if child is not None:
            kill_group(child.proc)
        reap_descendants()
        shutil.rmtree(tmp, ignore_errors=True)

    _install_cleanup(cleanup, done, watch_stdin)
    subreaper = become_subreaper()
    started = time.time()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-B", "-c", SHIM, "_BOOT = %r\n%s" % (boot, boot)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=private_env(tmp), cwd=_empty_dir(tmp), start_new_session=True,
        )
    except OSError as exc:
        cleanup()
        return frame(None, [error_record("spawn-failed", str(exc), probe=task)])
    child = state["child"] = _Child(proc)
    child.send(dict(envelope, isolate=False))
    finished = child.wait(timeout)
    done.set()
    shutil.rmtree(tmp, ignore_errors=True)
    stderr_tail = child.output("err")[-4000:].decode("utf-8", "replace")
    supervisor = {"seconds": round(time.time() - started, 3), "exit_status": proc.returncode, "timeout": timeout,
                  "stderr_tail": stderr_tail, "temp_dir_removed": not os.path.exists(tmp), "subreaper": subreaper}
    return _outcome(task, finished, child, supervisor, frame)


def _outcome(task: str, finished: bool, child: _Child, supervisor: Dict[str, Any], frame: Frame) -> Reply:
    """The child's own reply with the supervisor's facts, or an error that says what happened."""
    if not finished:
        msg = "%s probe ran past its %.0f s timeout; its process group was killed" % (task, supervisor["timeout"])
        reply = frame(None, [error_record("timeout", msg, probe=task)])
    else:
        parsed = parse_frame(child.output("out"))
        reply = cast(Reply, parsed) if parsed is not None else frame(None, [_no_reply(task, child, supervisor)])
        if parsed is not None and (child.proc.returncode or 0) < 0:
            # The task's code killed the shim (its parent) and still answered: keep the facts, but
            # a task that kills processes is a failed probe, not a clean one.
            errors = reply.get("errors")
            reply["errors"] = (errors if isinstance(errors, list) else []) + [_no_reply(task, child, supervisor)]
    reply["supervisor"] = supervisor
    return reply


def _no_reply(task: str, child: _Child, supervisor: Dict[str, Any]) -> ErrorRecord:
    rc = child.proc.returncode
    if rc is not None and rc < 0:
        name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
        return error_record("killed", "%s probe process was killed by signal %s" % (task, name), probe=task)
    msg = "%s probe exited with status %s without a reply; stderr: %s" % (
        task, rc, supervisor["stderr_tail"].strip().splitlines()[-1:] or "")
    return error_record("no-reply", msg, probe=task)
