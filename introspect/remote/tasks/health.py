"""Remote task "health": the facts `introspect health` needs from one venv.

Runs on the host under the venv's own interpreter, shipped as source: standard
library only, Python 3.8+, self-contained (it imports nothing from introspect, so
it can be sent alone: ``python health.py < request.json`` prints the reply as JSON).
Request and reply: :class:`~introspect.remote.contract.HealthRequest` and
:class:`~introspect.remote.contract.HealthReply`; its one default is a copy of
contract's ``DEFAULT_IMPORT_TIMEOUT`` (a test checks they agree). ``run(request)``
never raises; every failure becomes an entry in ``errors`` or in the affected
section, and the other facts stand.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional, Tuple

PROBE_VERSION = "1"
DEFAULT_IMPORT_TIMEOUT = 60.0
NVIDIA_SMI_TIMEOUT = 15.0
MAX_IMPORT_WORKERS = 4  # heavy imports (torch) cost GPU-host RAM; a few at a time is plenty
_TAIL = 2000  # characters of a failed import's stderr kept as evidence

_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_MARKER = "@@introspect-import@@ "

# The child reports its own outcome as one marked line, so prints made by the imported
# module cannot be mistaken for the result. The module name arrives in argv: data,
# never spliced into code (no injection).
_IMPORT_CHILD = r"""
import importlib, json, sys, time
t0 = time.perf_counter()
try:
    importlib.import_module(sys.argv[1])
    out = {"ok": True, "error": None}
except BaseException as exc:
    out = {"ok": False, "error": {"type": type(exc).__name__, "message": str(exc)}}
out["seconds"] = time.perf_counter() - t0
sys.stdout.write("\n%s%s\n" % (sys.argv[2], json.dumps(out)))
sys.stdout.flush()
# End whatever the import started in this process group (it leads its own session),
# itself included: nothing keeps running after the probe, and no helper left
# holding the pipes can stall the parent.
try:
    import os, signal
    os.killpg(0, signal.SIGKILL)
except Exception:
    pass
"""


def _err(probe: str, kind: str, message: str, path: Optional[str] = None) -> Dict[str, Any]:
    out: Dict[str, Any] = {"probe": probe, "type": kind, "message": message}
    if path is not None:
        out["path"] = path
    return out


def _marker_env() -> Dict[str, str]:
    """PEP 508 marker environment of *this* interpreter (as packaging computes it).

    The controller evaluates requirement markers with it, so `; python_version < "3.10"`
    is judged for the remote Python, not the controller's.
    """
    impl = sys.implementation
    iv = impl.version
    impl_version = "%d.%d.%d" % (iv.major, iv.minor, iv.micro)
    if iv.releaselevel != "final":
        impl_version += iv.releaselevel[0] + str(iv.serial)
    return {
        "implementation_name": impl.name,
        "implementation_version": impl_version,
        "os_name": os.name,
        "platform_machine": platform.machine(),
        "platform_release": platform.release(),
        "platform_system": platform.system(),
        "platform_version": platform.version(),
        "python_full_version": platform.python_version(),
        "platform_python_implementation": platform.python_implementation(),
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "sys_platform": sys.platform,
    }


def python_facts() -> Dict[str, Any]:
    base = getattr(sys, "base_prefix", sys.prefix)
    return {
        "version": platform.python_version(),
        "version_info": list(sys.version_info[:3]),
        "executable": sys.executable,
        "prefix": sys.prefix,
        "base_prefix": base,
        # A venv's prefix differs from its base; conda envs do not, so this is evidence only.
        "in_venv": sys.prefix != base,
        "implementation": platform.python_implementation(),
        "marker_env": _marker_env(),
    }


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503


def distributions(errors: List[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    try:
        import importlib.metadata as metadata
    except ImportError as exc:  # Python < 3.8
        errors.append(_err("distributions", "unsupported", "importlib.metadata unavailable: %s" % exc))
        return {}
    out: Dict[str, Dict[str, Any]] = {}
    try:
        dists = list(metadata.distributions())
    except Exception as exc:
        errors.append(_err("distributions", type(exc).__name__, str(exc)))
        return out
    for dist in dists:
        try:
            meta: Any = dist.metadata  # an email.message.Message: .get() is None when absent
            name = meta.get("Name")
            if not name:
                # A half-removed package leaves a dist-info without metadata: report, go on.
                path = str(getattr(dist, "_path", "")) or None
                errors.append(_err("distributions", "broken-metadata", "a distribution has no Name", path))
                continue
            key = _normalize(name)
            if key in out:
                continue  # first on sys.path wins, as the import system sees it
            out[key] = {"name": name, "version": dist.version, "requires": list(dist.requires or [])}
        except Exception as exc:
            errors.append(_err("distributions", type(exc).__name__, str(exc)))
    return out


def _child_env(private_dir: str) -> Dict[str, str]:
    env = dict(os.environ)
    # No trace: an import must not write .pyc files into the venv, nor
    # caches into the user's home; send the usual cache locations to a private dir.
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for var in ("HF_HOME", "HF_MODULES_CACHE", "TIKTOKEN_CACHE_DIR", "XDG_CACHE_HOME",
                "MPLCONFIGDIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "NUMBA_CACHE_DIR"):
        env[var] = os.path.join(private_dir, var.lower())
    return env


def _kill_group(proc: subprocess.Popen) -> None:
    # The child leads its own session (start_new_session), so its pgid is its pid and
    # killing the group also ends anything the import spawned: nothing is left running.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    except OSError:
        with contextlib.suppress(OSError):
            proc.kill()


def _run_bounded(
    argv: List[str], timeout: float, cwd: Optional[str] = None, env: Optional[Dict[str, str]] = None
) -> Tuple[Optional[int], str, str, bool]:
    """Run argv in its own session; returns (returncode, stdout, stderr, timed_out)."""
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        cwd=cwd, env=env, start_new_session=True,
    )
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        try:
            # A grandchild that escaped the group could hold the pipes open; bound this too.
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
            proc.wait()
            out, err = b"", b""
    return (proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), timed_out)


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except (ValueError, AttributeError):
        return "signal %d" % -code


def import_one(module: str, timeout: float, private_dir: str, env: Dict[str, str]) -> Dict[str, Any]:
    if not isinstance(module, str) or not _MODULE.match(module):
        return {"ok": False, "seconds": 0.0,
                "error": {"type": "invalid-name", "message": "%r is not a module name" % (module,)}}
    start = time.monotonic()
    try:
        # cwd is the private empty dir: `python -c` puts cwd first on sys.path, and a
        # stray tiktoken.py in the login directory must not shadow the venv's package.
        code, out, err, timed_out = _run_bounded(
            [sys.executable, "-c", _IMPORT_CHILD, module, _MARKER], timeout, cwd=private_dir, env=env
        )
    except Exception as exc:
        return {"ok": False, "seconds": time.monotonic() - start,
                "error": {"type": type(exc).__name__, "message": str(exc)}}
    elapsed = time.monotonic() - start
    if timed_out:
        return {"ok": False, "seconds": elapsed,
                "error": {"type": "timeout",
                          "message": "import did not finish within %gs; its process group was killed" % timeout}}
    for line in reversed(out.split("\n")):  # not splitlines(): it also splits on \x1c-\x1e, \x85...
        if line.startswith(_MARKER):
            try:
                result = json.loads(line[len(_MARKER):])
            except ValueError:
                break
            # The child reports its own time; it also kills itself on the way out, so
            # its exit status (-SIGKILL) is expected and not a crash.
            if not result.get("ok"):
                result["stderr_tail"] = err[-_TAIL:]
            result["wall_seconds"] = elapsed  # interpreter start-up included
            return result
    # No verdict line: the interpreter died (segfault in a CUDA extension, os._exit, OOM kill).
    if code is not None and code < 0:
        message = "the interpreter was killed by %s during the import" % _signal_name(code)
    else:
        message = "the interpreter exited with status %s before reporting" % code
    return {"ok": False, "seconds": elapsed,
            "error": {"type": "crashed", "message": message}, "stderr_tail": err[-_TAIL:]}


def imports(modules: List[Any], timeout: float, errors: List[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    if not modules:
        return {}
    private_dir = tempfile.mkdtemp(prefix="introspect-health-")
    try:
        env = _child_env(private_dir)
        unique = list(dict.fromkeys(str(m) for m in modules))
        with ThreadPoolExecutor(max_workers=min(MAX_IMPORT_WORKERS, len(unique))) as pool:
            futures = {m: pool.submit(import_one, m, timeout, private_dir, env) for m in unique}
            return {m: f.result() for m, f in futures.items()}
    except Exception as exc:
        errors.append(_err("imports", type(exc).__name__, str(exc)))
        return {}
    finally:
        shutil.rmtree(private_dir, ignore_errors=True)


def disk(paths: List[Any]) -> Dict[str, Dict[str, Any]]:
    out: Dict[str, Dict[str, Any]] = {}
    for path in paths:
        path = str(path)
        try:
            st = os.statvfs(path)
            # f_bavail: blocks available to unprivileged users, which is what a job sees.
            out[path] = {"free_bytes": st.f_bavail * st.f_frsize,
                         "total_bytes": st.f_blocks * st.f_frsize, "error": None}
        except OSError as exc:
            kind = "not-found" if exc.errno == 2 else "os-error"
            out[path] = {"free_bytes": None, "total_bytes": None,
                         "error": {"type": kind, "message": "%s: %s" % (path, exc.strerror or exc)}}
        except Exception as exc:
            out[path] = {"free_bytes": None, "total_bytes": None,
                         "error": {"type": type(exc).__name__, "message": str(exc)}}
    return out


def _int_or_none(text: str) -> Optional[int]:
    try:
        return int(float(text))
    except ValueError:
        return None  # "[N/A]", "[Not Supported]"


def parse_gpu_csv(text: str) -> List[Dict[str, Any]]:
    """Rows of `--query-gpu=index,name,memory.used,memory.total,driver_version`."""
    devices = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 5:
            continue
        # A name with a comma would split in two; index is first, the last three are fixed.
        devices.append({
            "index": _int_or_none(parts[0]),
            "name": ", ".join(parts[1:-3]),
            "memory_used_mib": _int_or_none(parts[-3]),
            "memory_total_mib": _int_or_none(parts[-2]),
            "driver_version": parts[-1],
        })
    return devices


def gpus(errors: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    result: Dict[str, Any] = {"count": 0, "devices": [], "driver_version": None,
                              "cuda_version": None, "error": None}
    query = [exe, "--query-gpu=index,name,memory.used,memory.total,driver_version",
             "--format=csv,noheader,nounits"]
    try:
        code, out, err, timed_out = _run_bounded(query, NVIDIA_SMI_TIMEOUT)
    except Exception as exc:
        result["error"] = {"type": type(exc).__name__, "message": str(exc)}
        errors.append(_err("gpus", type(exc).__name__, str(exc)))
        return result
    if timed_out or code != 0:
        # Typical: "NVIDIA-SMI has failed because it couldn't communicate with the driver".
        msg = ("nvidia-smi did not answer within %gs" % NVIDIA_SMI_TIMEOUT if timed_out
               else (err.strip() or out.strip() or "nvidia-smi exited with status %s" % code)[-_TAIL:])
        result["error"] = {"type": "timeout" if timed_out else "nvidia-smi-failed", "message": msg}
        errors.append(_err("gpus", result["error"]["type"], msg))
        return result
    devices = parse_gpu_csv(out)
    result["devices"] = devices
    result["count"] = len(devices)
    result["driver_version"] = devices[0]["driver_version"] if devices else None
    # The CUDA version is only printed in the plain header ("CUDA Version: 12.4").
    try:
        code, out, err, timed_out = _run_bounded([exe], NVIDIA_SMI_TIMEOUT)
        found = re.search(r"CUDA Version:\s*([0-9][0-9.]*)", out)
        result["cuda_version"] = found.group(1) if found else None
    except Exception as exc:
        errors.append(_err("gpus", type(exc).__name__, "CUDA version: %s" % exc))
    return result


def _as_list(value: Any) -> List[Any]:
    if isinstance(value, (list, tuple)):
        return list(value)
    return []


def run(request: Any) -> Dict[str, Any]:
    errors: List[Dict[str, Any]] = []
    timings: Dict[str, float] = {}
    reply: Dict[str, Any] = {"probe_version": PROBE_VERSION, "python": None, "distributions": {},
                             "imports": {}, "disk": {}, "gpus": None, "errors": errors, "timings": timings}
    if not isinstance(request, dict):
        errors.append(_err("request", "bad-request", "the request is not a JSON object"))
        request = {}
    try:
        timeout = float(request.get("import_timeout") or DEFAULT_IMPORT_TIMEOUT)
    except (TypeError, ValueError):
        errors.append(_err("request", "bad-request", "import_timeout is not a number"))
        timeout = DEFAULT_IMPORT_TIMEOUT

    sections: List[Tuple[str, Callable[[], Any]]] = [
        ("python", python_facts),
        ("distributions", lambda: distributions(errors)),
        ("imports", lambda: imports(_as_list(request.get("imports")), timeout, errors)),
        ("disk", lambda: disk(_as_list(request.get("model_dirs")))),
    ]
    if request.get("nvidia_smi", True):
        sections.append(("gpus", lambda: gpus(errors)))
    for name, fn in sections:
        start = time.monotonic()
        try:
            reply[name] = fn()
        except Exception as exc:  # a bug in one section must not cost the others
            errors.append(_err(name, type(exc).__name__, str(exc)))
        timings[name] = round(time.monotonic() - start, 4)
    return reply


def main() -> int:
    try:
        request = json.loads(sys.stdin.read() or "{}")
    except ValueError as exc:
        request = None
        sys.stderr.write("bad request: %s\n" % exc)
    sys.stdout.write(json.dumps(run(request)))
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
