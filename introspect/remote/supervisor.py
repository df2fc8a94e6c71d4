"""Isolated tasks: run one in a child interpreter, in its own process group, with private caches.

Runs on the host (standard library only, Python 3.8+). The child gets a private
temp dir as HOME for every cache a tokenizer load may write; at the deadline, or
when the controller goes away, the whole process group is killed, then every other
descendant (a detached ``setsid`` grandchild too: the supervisor is a child
subreaper, see :mod:`introspect.remote.reaper`), and the temp dir is removed, so
nothing keeps running on the host and no trace is left. The task runs behind a shim
process, so code that kills its parent costs the task, never the supervisor's reply.
The child runs under the probe's own limits (:mod:`introspect.remote.limits`), its resident
memory is watched while it runs (:mod:`introspect.remote.memwatch`: past the task's memory limit
its group is killed), and what it writes back is capped: a task that floods its output is
killed, not buffered.
"""

from __future__ import annotations

import collections
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
from typing import IO, Any, Callable, Dict, List, Optional, Tuple, cast

from .contract import (
    BEGIN,
    DEFAULT_MEMORY_LIMIT,
    DEFAULT_TOKENIZER_TIMEOUT,
    END,
    Envelope,
    ErrorRecord,
    Reply,
    SupervisorFacts,
    error_record,
)
from .limits import MIB, size_text, task_limits
from .memwatch import MemoryWatch
from .reaper import SHIM, become_subreaper, reap_descendants

Frame = Callable[[Any, List[Any]], Reply]  # (facts, errors) -> the framed reply
# Bytes of a child's stdout kept: its one frame (a tokenizer reply is well under 1 MiB; the
# texts in it are capped on their own). Past this the child is killed as a runaway.
OUTPUT_CAP = 64 * MIB
# Bytes of a child's stderr kept: the last ones, for the error line.
STDERR_TAIL = 64 * 1024
# What a process that died of an allocation failure leaves on stderr: Rust's alloc error
# handler (https://github.com/rust-lang/rust/blob/master/library/std/src/alloc.rs,
# default_alloc_error_hook), C++'s std::bad_alloc, and Python's own MemoryError.
_OUT_OF_MEMORY = ("memory allocation of", "std::bad_alloc", "MemoryError", "Cannot allocate memory")


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
        self.tail: "collections.deque[bytes]" = collections.deque()
        self.kept = 0  # bytes of stdout in chunks["out"]
        self.overflow = False  # stdout passed OUTPUT_CAP: the child was killed
        self.memory_hit: Optional[Tuple[int, int]] = None  # (bytes resident, processes) past the limit: killed
        self.readers = [threading.Thread(target=self._drain, args=(proc.stdout, "out"), daemon=True),
                        threading.Thread(target=self._drain, args=(proc.stderr, "err"), daemon=True)]
        for reader in self.readers:
            reader.start()

    def _drain(self, stream: "Optional[IO[bytes]]", key: str) -> None:
        if stream is None:
            return
        for block in iter(lambda: stream.read(65536), b""):
            if key == "err":
                self._keep_tail(block)
            elif self.kept + len(block) <= OUTPUT_CAP:
                self.chunks["out"].append(block)
                self.kept += len(block)
            elif not self.overflow:
                self.overflow = True
                kill_group(self.proc)  # a runaway writer: stop it, keep draining until EOF

    def _keep_tail(self, block: bytes) -> None:
        """Only the last STDERR_TAIL bytes: a task printing in a loop costs nothing here."""
        self.tail.append(block)
        size = sum(map(len, self.tail))
        while len(self.tail) > 1 and size - len(self.tail[0]) >= STDERR_TAIL:
            size -= len(self.tail.popleft())
        self.chunks["err"] = [b"".join(self.tail)[-STDERR_TAIL:]]

    def send(self, envelope: Dict[str, Any]) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.write(json.dumps(envelope).encode("utf-8") + b"\n")
            self.proc.stdin.flush()

    def wait(self, timeout: float, watch: Optional[MemoryWatch] = None) -> bool:
        """True when the child finished in time (and, with a ``watch``, within its memory limit).
        Its process group is killed either way."""
        finished = self._wait(timeout, watch)
        if watch is not None:
            self.memory_hit = watch.hit
        kill_group(self.proc)  # the task's own children too, whether it finished or not
        self.proc.wait()
        reap_descendants()  # detached ones, re-parented to this subreaper
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        for reader in self.readers:
            reader.join(5)
        return finished

    def _wait(self, timeout: float, watch: Optional[MemoryWatch]) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            step = min(left, watch.interval()) if watch is not None and watch.on else left
            try:
                self.proc.wait(timeout=max(step, 0.0))
                return True
            except subprocess.TimeoutExpired:
                pass
            if watch is not None and watch.over():
                return False  # past its memory limit: killed by the caller, named in the reply
            if time.monotonic() >= deadline:
                return False

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
    memory = _memory_limit(envelope)
    limits = task_limits(task, memory)
    child.send(dict(envelope, isolate=False, limits=limits))
    # The same limit in resident memory, for every task: the only one where no address-space
    # limit is set (limits.NO_ADDRESS_LIMIT_TASKS); a tighter outer one stays the measure.
    finished = child.wait(timeout, MemoryWatch(limits.get("memory", memory)))
    done.set()
    shutil.rmtree(tmp, ignore_errors=True)
    stderr_tail = child.output("err")[-4000:].decode("utf-8", "replace")
    supervisor: SupervisorFacts = {
                  "seconds": round(time.time() - started, 3), "exit_status": proc.returncode, "timeout": timeout,
                  "stderr_tail": stderr_tail, "temp_dir_removed": not os.path.exists(tmp), "subreaper": subreaper,
                  "limits": limits, "peak_rss": _peak_rss(), "memory_limit": limits.get("memory", memory)}
    return _outcome(task, finished, child, supervisor, frame)


def _memory_limit(envelope: Envelope) -> int:
    """The request's ``memory_limit`` (bytes; 0 for none), else the default."""
    request = envelope.get("request")
    value = request.get("memory_limit") if isinstance(request, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else DEFAULT_MEMORY_LIMIT


def _peak_rss() -> Optional[int]:
    """Bytes of the largest resident set among the reaped children and theirs (the task behind
    its shim included: the kernel carries a reaped child's own peak up to its parent)."""
    try:
        import resource

        return int(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) * 1024  # KiB on Linux
    except (ImportError, OSError, ValueError):
        return None


def _outcome(task: str, finished: bool, child: _Child, supervisor: SupervisorFacts, frame: Frame) -> Reply:
    """The child's own reply with the supervisor's facts, or an error that says what happened."""
    if child.overflow:
        msg = "%s probe wrote more than its %s output limit; its process group was killed" % (
            task, size_text(OUTPUT_CAP))
        reply = frame(None, [error_record("output-limit", msg, probe=task)])
    elif child.memory_hit is not None:
        held, count = child.memory_hit
        msg = "%s probe passed its %s memory limit (resident memory: %s in %d process%s); its process " \
              "group was killed" % (task, size_text(supervisor["memory_limit"]), size_text(held), count,
                                    "" if count == 1 else "es")
        reply = frame(None, [error_record("memory-limit", msg, probe=task)])
    elif not finished:
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


def _no_reply(task: str, child: _Child, supervisor: SupervisorFacts) -> ErrorRecord:
    rc = child.proc.returncode
    memory = supervisor["limits"].get("memory")
    last = supervisor["stderr_tail"].strip().splitlines()[-1:]
    if memory and any(mark in supervisor["stderr_tail"] for mark in _OUT_OF_MEMORY):
        # Native code (the tokenizers library) aborts on a failed allocation instead of raising.
        msg = "%s probe exceeded its %s memory limit (address space) and died: %s" % (
            task, size_text(memory), last[0] if last else "status %s" % rc)
        return error_record("memory-limit", msg, probe=task)
    if rc is not None and rc < 0:
        name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
        return error_record("killed", "%s probe process was killed by signal %s" % (task, name), probe=task)
    msg = "%s probe exited with status %s without a reply; stderr: %s" % (task, rc, last or "")
    return error_record("no-reply", msg, probe=task)
