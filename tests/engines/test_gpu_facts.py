"""GPU facts: nvidia-smi outputs parsed, the host summary, and a host without nvidia-smi."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from introspect.analysis.serving.gpus import analyze_gpus, budget_from
from introspect.remote.facts.host.gpus import collect_gpus, parse_query_csv, parse_topology
from tests.conftest import REPO, run_cli
from tests.engines import nvidia_smi_outputs as smi


def test_query_csv_of_eight_h100() -> None:
    devices = parse_query_csv(smi.H100_CSV)
    assert len(devices) == 8
    assert devices[0] == {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559,
                          "memory_used_mib": 0, "driver_version": "550.54.15",
                          "pci_bus_id": "00000000:18:00.0", "compute_cap": "9.0"}
    assert [d["index"] for d in devices] == list(range(8))


def test_a_name_with_a_comma_and_not_available_fields() -> None:
    row = "3, NVIDIA A100-SXM4-80GB, rev. B, 81920, [N/A], 535.104.05, 00000000:07:00.0, [Not Supported]\n"
    (device,) = parse_query_csv(row)
    assert device["name"] == "NVIDIA A100-SXM4-80GB, rev. B"
    assert device["memory_used_mib"] is None and device["compute_cap"] is None
    assert device["memory_total_mib"] == 81920


def test_topology_all_nvlink() -> None:
    topo = parse_topology(smi.H100_TOPO)
    assert topo is not None and topo["gpus"] == [f"GPU{i}" for i in range(8)]
    assert topo["links"]["GPU0"]["GPU7"] == "NV18" and "GPU0" not in topo["links"]["GPU0"]
    assert len(topo["links"]["GPU3"]) == 7  # NIC and affinity columns are not GPU links


def test_topology_pcie_only() -> None:
    topo = parse_topology(smi.L40S_TOPO)
    assert topo is not None
    assert topo["links"]["GPU0"] == {"GPU1": "NODE", "GPU2": "SYS", "GPU3": "SYS"}
    model, findings = analyze_gpus({"available": True, "devices": parse_query_csv(smi.H100_CSV)[:4],
                                      "topology": topo})
    assert model.to_dict()["interconnect"] == {"summary": "PCIe", "links": {"NODE": 4, "SYS": 8}}
    assert any(f.code == "gpus-pcie" for f in findings)


def _fake_nvidia_smi(tmp_path: Path, csv: str, header: str, topo: str, reject_compute_cap: bool = False) -> Path:
    """An executable answering like nvidia-smi with the outputs above, by its argv."""
    data = tmp_path / "smi.json"
    data.write_text(json.dumps({"csv": csv, "header": header, "topo": topo, "reject": reject_compute_cap}))
    exe = tmp_path / "nvidia-smi"
    exe.write_text(f"""#!{sys.executable}
import json, sys
d = json.load(open({str(data)!r}))
args = sys.argv[1:]
if args[:1] == ["topo"]:
    sys.stdout.write(d["topo"])
elif args and args[0].startswith("--query-gpu="):
    if d["reject"] and "compute_cap" in args[0]:
        sys.stdout.write('Field "compute_cap" is not a valid field to query.\\n')
        sys.exit(2)
    sys.stdout.write(d["csv"])
else:
    sys.stdout.write(d["header"])
""")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def test_collect_runs_the_three_queries(tmp_path: Path) -> None:
    exe = _fake_nvidia_smi(tmp_path, smi.H200_CSV, smi.HEADER_560, smi.H100_TOPO)
    facts, errors = collect_gpus(str(exe))
    assert errors == [] and facts["available"] is True and facts["count"] == 8
    assert (facts["driver_version"], facts["cuda_version"]) == ("560.35.03", "12.6")
    model, findings = analyze_gpus(facts)
    section = model.to_dict()
    assert section["models"] == {"NVIDIA H200": 8} and section["memory_total_mib_min"] == 143771
    assert section["interconnect"] == {"summary": "NVLink", "links": {"NV18": 56}}
    assert findings == []
    budget = budget_from(model)
    assert budget is not None
    assert (budget.count, budget.memory_bytes, budget.name) == (8, 143771 * 2**20, "NVIDIA H200")


def test_old_driver_falls_back_to_the_basic_query(tmp_path: Path) -> None:
    exe = _fake_nvidia_smi(tmp_path, smi.H100_BASIC_CSV, smi.HEADER_550, "", reject_compute_cap=True)
    facts, errors = collect_gpus(str(exe))
    assert errors == [] and facts["count"] == 8
    assert facts["query"] == "index,name,memory.used,memory.total,driver_version"
    assert facts["devices"][0]["memory_total_mib"] == 81559 and facts["topology"] is None


def test_failing_nvidia_smi_is_a_warning(tmp_path: Path) -> None:
    exe = tmp_path / "nvidia-smi"
    exe.write_text("#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                   "driver.\" >&2\nexit 9\n")
    exe.chmod(0o755)
    facts, errors = collect_gpus(str(exe))
    assert facts["available"] is False and "couldn't communicate" in facts["reason"]
    assert facts["error"]["type"] == "nvidia-smi-failed"
    assert errors == []  # a host fact: a warning below, not an error of the model probe
    _, findings = analyze_gpus(facts)
    assert [(f.code, f.severity.value) for f in findings] == [("gpus-nvidia-smi", "warning")]


def test_hung_nvidia_smi_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from introspect.remote.facts.host import gpus as gpu_facts

    monkeypatch.setattr(gpu_facts, "TIMEOUT", 0.5)
    exe = tmp_path / "nvidia-smi"
    exe.write_text("#!/bin/sh\nexec sleep 30\n")
    exe.chmod(0o755)
    facts, errors = collect_gpus(str(exe))
    assert facts["available"] is False and facts["error"]["type"] == "timeout" and errors == []


def test_missing_nvidia_smi_through_the_real_probe(kimi_model: Path, tmp_path: Path) -> None:
    """PATH holds only an empty dir, so no nvidia-smi is found on any host (the probe's
    interpreter is named by its absolute path)."""
    bare = tmp_path / "bin"
    bare.mkdir()
    result = run_cli("probe", "--model", str(kimi_model), "--python", sys.executable, "--no-tokenizer",
                     "--no-model-code", "--json", env={"PATH": str(bare)})  # the GPU facts are the files task's
    profile = result.json()
    assert profile["gpus"] == {"probed": True, "available": False, "reason": "nvidia-smi is not on PATH",
                               "count": 0, "models": {}, "devices": [], "memory_total_mib_min": None,
                               "driver_version": None, "cuda_version": None, "interconnect": None}
    assert any(f["code"] == "gpus-none" and f["severity"] == "info" for f in profile["findings"])
    # This fixture has no shards, so the plan says why it has no layouts.
    assert profile["plan"]["layouts"] == [] and "weight bytes are unknown" in profile["plan"]["reason"]


def test_gpus_section_of_the_report(tmp_path: Path) -> None:
    from rich.console import Console

    from introspect.cli.render_serving import gpus_section

    exe = _fake_nvidia_smi(tmp_path, smi.H100_CSV, smi.HEADER_550, smi.H100_TOPO)
    section, _ = analyze_gpus(collect_gpus(str(exe))[0])
    console = Console(width=120, record=True, highlight=False)
    console.print(gpus_section(section))
    text = console.export_text()
    assert "8 x NVIDIA H100 80GB HBM3" in text and "79.6 GiB each (smallest)" in text
    assert "550.54.15 / 12.4" in text and "NVLink (NV18 x56)" in text


def test_same_gpu_facts_under_python38(tmp_path: Path) -> None:
    from tests.remote.test_files_probe import _python38

    exe = _python38()
    if exe is None:
        pytest.skip("no Python 3.8 interpreter here (set INTROSPECT_PY38)")
    smi_exe = _fake_nvidia_smi(tmp_path, smi.H200_CSV, smi.HEADER_560, smi.H100_TOPO)
    script = ("import json, sys\nfrom introspect.remote.facts.host.gpus import collect_gpus\n"
              "print(json.dumps(collect_gpus(sys.argv[1])))\n")
    proc = subprocess.run([exe, "-B", "-c", script, str(smi_exe)], capture_output=True, text=True, timeout=60,
                          check=False, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == json.loads(json.dumps(collect_gpus(str(smi_exe))))
