"""The ``gpus`` section: what nvidia-smi said about the host's GPUs. Pure.

``interconnect`` sums up ``nvidia-smi topo -m``: "NVLink" when every GPU pair is
joined by NVLinks (``NV#``), "PCIe" when none is (``PIX``, ``PXB``, ``PHB``,
``NODE``, ``SYS``), else "mixed"; tensor parallelism over PCIe pairs is slow.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from introspect.analysis.findings import Finding, make
from introspect.analysis.serving.plan import GpuBudget
from introspect.documents.profile_serving import Gpus, Interconnect
from introspect.remote.contract import as_dict

MIB = 1024 * 1024



def interconnect(topology: Any) -> Interconnect | None:
    links = as_dict(as_dict(topology).get("links"))
    kinds = Counter(str(kind) for row in links.values() for kind in as_dict(row).values())
    if not kinds:
        return None
    nvlink = sum(n for kind, n in kinds.items() if kind.startswith("NV"))
    summary = "NVLink" if nvlink == sum(kinds.values()) else ("PCIe" if nvlink == 0 else "mixed")
    return Interconnect(summary=summary, links=dict(sorted(kinds.items())))


def analyze_gpus(raw: Any) -> tuple[Gpus, list[Finding]]:
    """(section, findings). ``raw`` is the model task's ``gpus`` facts (None: not probed)."""
    if not isinstance(raw, dict):
        return Gpus(probed=False, available=None, count=0, devices=[]), []
    devices = [d for d in raw.get("devices") or [] if isinstance(d, dict)]
    names = Counter(str(d.get("name")) for d in devices)
    memories = [d["memory_total_mib"] for d in devices if isinstance(d.get("memory_total_mib"), int)]
    inter = interconnect(raw.get("topology"))
    section = Gpus(probed=True, available=bool(raw.get("available")), reason=raw.get("reason"), count=len(devices),
                   models=dict(names), devices=devices, memory_total_mib_min=min(memories) if memories else None,
                   driver_version=raw.get("driver_version"), cuda_version=raw.get("cuda_version"), interconnect=inter)
    findings = []
    error = as_dict(raw.get("error"))
    if error:
        findings.append(make("warning", "gpus-nvidia-smi", f"nvidia-smi failed: {error.get('message')}",
                                "run `nvidia-smi` on the host; a driver/library mismatch needs a driver reload"))
    elif not section.available:
        findings.append(make("info", "gpus-none", f"no GPU facts: {raw.get('reason')}", None))
    if len(names) > 1:
        findings.append(make("warning", "gpus-mixed", "the host mixes GPU models: "
                                + ", ".join(f"{n} x {name}" for name, n in names.items()),
                                "pin the server to one model with CUDA_VISIBLE_DEVICES"))
    if inter and inter.summary != "NVLink" and len(devices) > 1:
        findings.append(make("info", "gpus-pcie", f"GPU pairs are not all NVLink-connected ({inter.links}): "
                                "tensor parallelism across them is slow", None))
    return section, findings


def budget_from(section: Gpus) -> GpuBudget | None:
    """The plan's budget from probed GPUs: the count, and the smallest memory among them."""
    mib = section.memory_total_mib_min
    if not section.available or not isinstance(mib, int):
        return None
    models = list(section.models or {})
    return GpuBudget(count=section.count, memory_bytes=mib * MIB,
                     name=models[0] if len(models) == 1 else None, source="nvidia-smi")
