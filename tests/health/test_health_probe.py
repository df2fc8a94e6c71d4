"""The remote health probe, run as the host runs it: its own source, a fresh interpreter."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from introspect.remote.tasks import health as health_probe

PROBE = Path(health_probe.__file__).resolve()

FAKE_NVIDIA_SMI = r"""#!/bin/sh
case "$*" in
  *--query-gpu=*)
    echo "0, NVIDIA H100 80GB HBM3, 1024, 81559, 550.54.15"
    echo "1, NVIDIA H100 80GB HBM3, [N/A], 81559, 550.54.15"
    ;;
  *)
    echo "+-----------------------------------------------------------------------------------------+"
    echo "| NVIDIA-SMI 550.54.15             Driver Version: 550.54.15     CUDA Version: 12.4     |"
    ;;
esac
"""

BROKEN_NVIDIA_SMI = """#!/bin/sh
echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver." >&2
exit 9
"""

# Sleeps forever at import, after starting a grandchild that sleeps too: both must be
# gone once the probe returns (issue 6: killed with the whole process group).
HANG_MODULE = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(os.environ["HANG_PIDFILE"], "w") as fh:
    fh.write("%d %d" % (os.getpid(), child.pid))
time.sleep(600)
"""


def _exe(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


def run_probe(request: Any, path_dirs: list[Path], env_extra: dict[str, str] | None = None,
              python: str = sys.executable, timeout: float = 60) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = os.pathsep.join(str(d) for d in path_dirs)
    env.update(env_extra or {})
    proc = subprocess.run([python, str(PROBE)], input=json.dumps(request), capture_output=True, text=True,
                          env=env, timeout=timeout, cwd="/")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie waiting for a reaper is dead too
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


@pytest.fixture
def modules(tmp_path: Path) -> Path:
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "broken_mod.py").write_text("raise ImportError('libfoo.so.1: cannot open shared object file')\n")
    (mods / "noisy_mod.py").write_text("print('hello from import')\n")
    (mods / "hang_mod.py").write_text(HANG_MODULE)
    (mods / "dies_mod.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    return mods


def test_probe_reports_python_dists_imports_disk_and_gpus(tmp_path: Path, modules: Path) -> None:
    fakebin = tmp_path / "bin"
    fakebin.mkdir()
    _exe(fakebin / "nvidia-smi", FAKE_NVIDIA_SMI)
    request = {"imports": ["json", "broken_mod", "noisy_mod", "not_a_module_xyz", "dies_mod", "os; rm -rf ~"],
               "model_dirs": [str(tmp_path), str(tmp_path / "missing")], "import_timeout": 30, "nvidia_smi": True}
    reply = run_probe(request, [fakebin, Path("/usr/bin"), Path("/bin")], {"PYTHONPATH": str(modules)})

    py = reply["python"]
    assert py["executable"] == sys.executable and py["version"] == ".".join(map(str, sys.version_info[:3]))
    assert py["marker_env"]["python_version"] == f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert reply["distributions"]["pyyaml"]["version"]
    assert reply["distributions"]["prometheus-client"]["name"].lower().replace("_", "-") == "prometheus-client"

    imports = reply["imports"]
    assert imports["json"]["ok"] is True and imports["json"]["error"] is None
    assert imports["noisy_mod"]["ok"] is True  # its print is not taken for the verdict
    assert imports["broken_mod"]["error"] == {"type": "ImportError",
                                              "message": "libfoo.so.1: cannot open shared object file"}
    assert imports["not_a_module_xyz"]["error"]["type"] == "ModuleNotFoundError"
    assert imports["dies_mod"]["error"]["type"] == "crashed" and "SIGSEGV" in imports["dies_mod"]["error"]["message"]
    assert imports["os; rm -rf ~"]["error"]["type"] == "invalid-name"
    assert all(isinstance(r["seconds"], float) for r in imports.values())

    assert reply["disk"][str(tmp_path)]["free_bytes"] > 0
    assert reply["disk"][str(tmp_path)]["total_bytes"] >= reply["disk"][str(tmp_path)]["free_bytes"]
    assert reply["disk"][str(tmp_path / "missing")]["error"]["type"] == "not-found"

    gpus = reply["gpus"]
    assert gpus["count"] == 2 and gpus["driver_version"] == "550.54.15" and gpus["cuda_version"] == "12.4"
    assert gpus["devices"][0] == {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_used_mib": 1024,
                                  "memory_total_mib": 81559, "driver_version": "550.54.15"}
    assert gpus["devices"][1]["memory_used_mib"] is None  # [N/A]
    assert reply["errors"] == []


def test_import_that_hangs_is_killed_with_its_process_group(tmp_path: Path, modules: Path) -> None:
    pidfile = tmp_path / "pids"
    start = time.monotonic()
    reply = run_probe({"imports": ["hang_mod", "json"], "model_dirs": [], "import_timeout": 2},
                      [Path("/usr/bin"), Path("/bin")],
                      {"PYTHONPATH": str(modules), "HANG_PIDFILE": str(pidfile)}, timeout=30)
    elapsed = time.monotonic() - start
    result = reply["imports"]["hang_mod"]
    assert result["ok"] is False and result["error"]["type"] == "timeout", result
    assert 2 <= result["seconds"] < 10
    assert elapsed < 15
    assert reply["imports"]["json"]["ok"] is True  # the hang did not cost the other import
    pids = [int(p) for p in pidfile.read_text().split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 5
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_gone(p) for p in pids), f"left running: {[p for p in pids if not _gone(p)]}"


def test_no_nvidia_smi_means_gpus_null(tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    reply = run_probe({"imports": [], "model_dirs": []}, [empty])
    assert reply["gpus"] is None and reply["errors"] == []


def test_failing_nvidia_smi_is_an_error_not_a_crash(tmp_path: Path) -> None:
    fakebin = tmp_path / "bin"
    fakebin.mkdir()
    _exe(fakebin / "nvidia-smi", BROKEN_NVIDIA_SMI)
    reply = run_probe({}, [fakebin])
    assert reply["gpus"]["error"]["type"] == "nvidia-smi-failed"
    assert "couldn't communicate" in reply["gpus"]["error"]["message"]
    assert reply["errors"][0]["probe"] == "gpus"
    assert reply["python"]["version"]


def test_run_never_raises_on_bad_requests() -> None:
    for bad in (None, [], "x", {"imports": "json", "model_dirs": 5, "import_timeout": "soon", "nvidia_smi": False}):
        reply = health_probe.run(bad)
        assert reply["python"]["version"] and isinstance(reply["errors"], list)
    assert health_probe.run({"import_timeout": "soon", "nvidia_smi": False})["errors"][0]["type"] == "bad-request"


def test_gpu_csv_parser_tolerates_commas_and_blanks() -> None:
    rows = health_probe.parse_gpu_csv("0, Weird, GPU, 1, 2, 535.1\n\n garbage\n")
    assert rows == [{"index": 0, "name": "Weird, GPU", "memory_used_mib": 1, "memory_total_mib": 2,
                     "driver_version": "535.1"}]


def test_probe_is_stdlib_only_and_python38_syntax() -> None:
    source = PROBE.read_text()
    tree = ast.parse(source, feature_version=(3, 8))
    top = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            top.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            top.add(node.module.split(".")[0])
    assert top - {"__future__"} <= set(sys.stdlib_module_names), top - set(sys.stdlib_module_names)
    assert "removeprefix" not in source and "match " not in source.replace("re.match", "")


def _python38() -> str | None:
    """A working 3.8 interpreter's real path (pyenv shims exist without one)."""
    candidates = [shutil.which("python3.8")]
    candidates += sorted(str(p / "bin/python") for p in (Path.home() / ".pyenv/versions").glob("3.8*"))
    for exe in filter(None, candidates):
        try:
            out = subprocess.run([exe, "-c", "import sys; print(sys.executable, sys.version_info[:2] == (3, 8))"],
                                 capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            continue
        parts = out.stdout.split()
        if out.returncode == 0 and parts[-1:] == ["True"]:
            return parts[0]
    return None


PY38 = _python38()


@pytest.mark.skipif(PY38 is None, reason="no Python 3.8 interpreter here")
def test_probe_runs_under_python38(tmp_path: Path) -> None:
    assert PY38 is not None
    reply = run_probe({"imports": ["json", "nope_xyz"], "model_dirs": [str(tmp_path)]}, [Path("/usr/bin")],
                      python=PY38)
    assert reply["python"]["version"].startswith("3.8")
    assert reply["imports"]["json"]["ok"] and not reply["imports"]["nope_xyz"]["ok"]
    assert reply["errors"] == []


def test_default_import_timeout_is_the_contracts() -> None:
    """The health task is self-contained, so it holds a copy of contract's default."""
    from introspect.remote import contract

    assert health_probe.DEFAULT_IMPORT_TIMEOUT == contract.DEFAULT_IMPORT_TIMEOUT
