"""GPU facts for ``probe``: ``nvidia-smi`` queries, each bounded by a timeout.

Standard library only, Python 3.8+. The basic CSV parser (and the field parsing)
is remote/tasks/health.py's (``introspect health`` asks the same tool); this module adds
the PCI bus id and compute capability, the CUDA version and ``topo -m``.

``collect_gpus()`` returns ``(facts, [])``: a host without ``nvidia-smi`` is a fact,
and so is a failing one (``error``, which the profile turns into a warning, not
an error of the model probe)::

    {"available": false, "reason": "nvidia-smi is not on PATH"}
    {"available": true, "count": 8, "driver_version": "550.54.15", "cuda_version": "12.4",
     "devices": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559,
                  "memory_used_mib": 0, "driver_version": "550.54.15",
                  "pci_bus_id": "00000000:18:00.0", "compute_cap": "9.0"}],
     "query": "index,name,...", "topology": null | {"gpus": ["GPU0", ...],
                                                  "links": {"GPU0": {"GPU1": "NV18", ...}}},
     "error": null | {"type", "message"}}
"""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any, Dict, List, Optional, Tuple

from ...contract import ErrorRecord
from ...tasks import health as health_probe

PROBE = "gpus"
TIMEOUT = 10.0  # per call; at most four calls (query, older-driver query, header, topo)
FIELDS = ("index", "name", "memory.total", "memory.used", "driver_version", "pci.bus_id", "compute_cap")
BASIC_FIELDS = ("index", "name", "memory.used", "memory.total", "driver_version")  # tasks/health.py's query
_KEYS = {"memory.total": "memory_total_mib", "memory.used": "memory_used_mib", "pci.bus_id": "pci_bus_id"}
_INTS = ("index", "memory.total", "memory.used")
_CUDA = re.compile(r"CUDA Version\s*:\s*([0-9][0-9.]*)")
_GPU_ROW = re.compile(r"^GPU\d+$")


def _value(field: str, text: str) -> Any:
    text = text.strip()
    if field in _INTS:
        return health_probe._int_or_none(text)
    return None if text.startswith("[") else text  # "[N/A]", "[Not Supported]"


def parse_query_csv(text: str, fields: Tuple[str, ...] = FIELDS) -> List[Dict[str, Any]]:
    """Rows of ``--query-gpu=<fields> --format=csv,noheader,nounits``.

    ``name`` (the second field) is the only free text: a row with extra commas gives
    them back to it.
    """
    devices = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < len(fields) or not line.strip():
            continue
        extra = len(parts) - len(fields)
        parts = parts[:1] + [", ".join(parts[1:2 + extra])] + parts[2 + extra:]
        devices.append(dict((_KEYS.get(f, f), _value(f, v)) for f, v in zip(fields, parts)))
    return devices


def parse_topology(text: str) -> Optional[Dict[str, Any]]:
    """The GPU-to-GPU block of ``nvidia-smi topo -m``: {"gpus": [...], "links": {a: {b: kind}}}.

    The header row names the columns (tab-separated; "CPU Affinity" holds a space);
    each ``GPUn`` row starts with the link kinds to those columns ("X" on itself).
    """
    lines = [line for line in text.splitlines() if line.strip()]
    header = None  # type: Optional[List[str]]
    links = {}  # type: Dict[str, Dict[str, str]]
    for line in lines:
        cells = [c.strip() for c in re.split(r"\t+| {2,}", line.strip()) if c.strip()]
        if header is None:
            if cells and cells[0].startswith("GPU"):
                header = cells
            continue
        if not cells or not _GPU_ROW.match(cells[0]):
            if links:
                break  # the legend follows the matrix
            continue
        gpus = [h for h in header if _GPU_ROW.match(h)]
        links[cells[0]] = dict((col, kind) for col, kind in zip(gpus, cells[1:1 + len(gpus)]) if col != cells[0])
    if not links:
        return None
    return {"gpus": sorted(links, key=lambda g: int(g[3:])), "links": links}


def _run(argv: List[str]) -> Tuple[Optional[str], Optional[Dict[str, str]]]:
    # Not tasks/health.py's _run_bounded: that one starts its own session (for imports), which
    # the model task's group kill at its deadline would miss. Here nvidia-smi stays in the
    # task's process group, and subprocess.run kills it at its own timeout.
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        return None, {"type": "timeout", "message": "%s did not answer within %gs" % (" ".join(argv[1:]), TIMEOUT)}
    except Exception as exc:
        return None, {"type": type(exc).__name__, "message": str(exc)}
    code = proc.returncode
    out = proc.stdout.decode("utf-8", "replace")
    err = proc.stderr.decode("utf-8", "replace")
    if code != 0:
        # Typical: "NVIDIA-SMI has failed because it couldn't communicate with the driver".
        text = (err.strip() or out.strip() or "exited with status %s" % code)[-2000:]
        return None, {"type": "nvidia-smi-failed", "message": text}
    return out, None


def _query(exe: str) -> Tuple[List[Dict[str, Any]], str, Optional[Dict[str, str]]]:
    out, problem = _run([exe, "--query-gpu=" + ",".join(FIELDS), "--format=csv,noheader,nounits"])
    if out is not None:
        return parse_query_csv(out, FIELDS), ",".join(FIELDS), None
    # Drivers before compute_cap existed reject the whole query: ask what health asks.
    out, basic_problem = _run([exe, "--query-gpu=" + ",".join(BASIC_FIELDS), "--format=csv,noheader,nounits"])
    if out is not None:
        return health_probe.parse_gpu_csv(out), ",".join(BASIC_FIELDS), None
    return [], ",".join(FIELDS), basic_problem or problem


def collect_gpus(exe: Optional[str] = None) -> Tuple[Dict[str, Any], List[ErrorRecord]]:
    """GPU facts of this host. Never raises."""
    exe = exe or shutil.which("nvidia-smi")
    if exe is None:
        return {"available": False, "reason": "nvidia-smi is not on PATH"}, []
    errors = []  # type: List[ErrorRecord]
    devices, query, problem = _query(exe)
    facts = {"available": bool(devices), "count": len(devices), "devices": devices, "query": query,
             "driver_version": devices[0].get("driver_version") if devices else None,
             "cuda_version": None, "topology": None, "error": problem}  # type: Dict[str, Any]
    if problem is not None:
        facts["reason"] = "nvidia-smi failed: %s" % problem["message"]
        return facts, errors
    if not devices:
        facts["reason"] = "nvidia-smi lists no GPU"
        return facts, errors
    header, _ = _run([exe])  # the CUDA version is printed in the plain header only
    found = _CUDA.search(header or "")
    facts["cuda_version"] = found.group(1) if found else None
    topo, _ = _run([exe, "topo", "-m"])  # optional: absent on some drivers and in containers
    facts["topology"] = parse_topology(topo) if topo else None
    return facts, errors
