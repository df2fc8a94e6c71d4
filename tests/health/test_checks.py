"""Verdicts of `introspect health` from probe facts: pure, no SSH, nothing imported."""

from __future__ import annotations

import sys
from typing import Any

from introspect.checks.health import (
    CheckResult,
    check_gpus,
    evaluate_venv,
    exit_code,
    probe_request,
)
from introspect.inventory import HostEntry, VenvEntry
from introspect.remote.tasks import health as health_probe

VENV = VenvEntry(
    path="/opt/venvs/serve",
    requires=("transformers>=4.57", "tiktoken", "numpy<2; python_version < '3.9'", "huggingface-hub[cli]"),
    imports=("tiktoken", "torch"),
    models=("/models/qwen",),
    min_free_gb=10,
)


def facts(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "python": {"version": "3.11.7", "executable": "/opt/venvs/serve/bin/python", "prefix": "/opt/venvs/serve",
                   "in_venv": True, "marker_env": {"python_version": "3.11", "python_full_version": "3.11.7",
                                                   "sys_platform": "linux"}},
        "distributions": {
            "transformers": {"name": "transformers", "version": "4.57.1",
                             "requires": ["tokenizers<0.23,>=0.22", "numpy>=1.17",
                                          "torch>=2.2; extra == 'torch'"]},
            "tokenizers": {"name": "tokenizers", "version": "0.22.1", "requires": []},
            "numpy": {"name": "numpy", "version": "2.1.0", "requires": []},
            "tiktoken": {"name": "tiktoken", "version": "0.9.0", "requires": ["regex>=2022.1.18"]},
            "regex": {"name": "regex", "version": "2024.11.6", "requires": []},
            "huggingface-hub": {"name": "huggingface_hub", "version": "0.35.0",
                                "requires": ["InquirerPy==0.3.4; extra == 'cli'"]},
            "inquirerpy": {"name": "InquirerPy", "version": "0.3.4", "requires": []},
        },
        "imports": {"tiktoken": {"ok": True, "error": None, "seconds": 0.12},
                    "torch": {"ok": True, "error": None, "seconds": 1.5}},
        "disk": {"/models/qwen": {"free_bytes": 200 * 2**30, "total_bytes": 1000 * 2**30, "error": None}},
        "gpus": {"count": 1, "devices": [{"index": 0, "name": "NVIDIA H100", "memory_used_mib": 1024,
                                          "memory_total_mib": 81559, "driver_version": "550.54.15"}],
                 "driver_version": "550.54.15", "cuda_version": "12.4", "error": None},
        "errors": [],
    }
    base.update(over)
    return base


TOKENIZERS_OK = {"/models/qwen": {"loaded": True, "error": None}}


def by_check(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.check: r for r in results}


def test_healthy_venv_passes_every_check() -> None:
    results = evaluate_venv(VENV, facts(), None, TOKENIZERS_OK)
    checks = by_check(results)
    assert list(checks) == [
        "reachable", "python", "package:transformers", "package:tiktoken", "package:numpy",
        "package:huggingface-hub", "dependency-conflicts", "import:tiktoken", "import:torch",
        "tokenizer:/models/qwen", "disk:/models/qwen", "gpus",
    ]
    assert checks["package:numpy"].status == "info"  # marker false for Python 3.11
    assert all(r.status == "pass" for c, r in checks.items() if c != "package:numpy"), results
    assert "1 x NVIDIA H100" in checks["gpus"].message and "CUDA 12.4" in checks["gpus"].message
    assert exit_code(results) == 0


def test_missing_package_and_violated_specifier_fail_with_exact_fix() -> None:
    dists = dict(facts()["distributions"])
    del dists["tiktoken"]
    dists["transformers"] = {**dists["transformers"], "version": "4.46.0"}
    results = by_check(evaluate_venv(VENV, facts(distributions=dists), None))
    missing, old = results["package:tiktoken"], results["package:transformers"]
    assert missing.status == "fail" and "not installed" in missing.message
    assert missing.fix == "/opt/venvs/serve/bin/pip install tiktoken"
    assert old.status == "fail" and old.message == "transformers 4.46.0 does not satisfy transformers>=4.57"
    assert old.fix == "/opt/venvs/serve/bin/pip install 'transformers>=4.57'"
    assert old.evidence == {"requirement": "transformers>=4.57", "installed": "4.46.0"}
    assert "tokenizer:/models/qwen" not in results  # no tokenizer results passed: not checked
    assert exit_code(results.values()) == 1


def test_extras_of_a_requirement_are_checked() -> None:
    dists = dict(facts()["distributions"])
    del dists["inquirerpy"]
    result = by_check(evaluate_venv(VENV, facts(distributions=dists), None))["package:huggingface-hub"]
    assert result.status == "fail" and "InquirerPy==0.3.4" in result.message
    assert result.fix == "/opt/venvs/serve/bin/pip install 'huggingface-hub[cli]'"


def test_dependency_conflicts_like_pip_check() -> None:
    dists = dict(facts()["distributions"])
    dists["tokenizers"] = {**dists["tokenizers"], "version": "0.23.0"}
    del dists["regex"]
    result = by_check(evaluate_venv(VENV, facts(distributions=dists), None))["dependency-conflicts"]
    assert result.status == "fail"
    assert result.evidence["missing"][0]["requirement"] == "regex>=2022.1.18"
    assert result.evidence["missing"][0]["required_by"] == "tiktoken 0.9.0"
    assert result.evidence["conflicts"][0]["installed"] == "0.23.0"
    assert "transformers 4.57.1 requires tokenizers<0.23,>=0.22, but 0.23.0 is installed" in result.message
    # extras (torch for transformers[torch]) are optional: not reported
    assert not any(p["package"] == "torch" for p in result.evidence["missing"])


def test_markers_are_judged_for_the_remote_python() -> None:
    old_py = facts()
    old_py["python"] = {**old_py["python"], "version": "3.8.18",
                        "marker_env": {"python_version": "3.8", "python_full_version": "3.8.18"}}
    result = by_check(evaluate_venv(VENV, old_py, None))["package:numpy"]
    assert result.status == "fail" and result.message == "numpy 2.1.0 does not satisfy numpy<2; python_version < '3.9'"


def test_failed_imports_keep_their_error_and_name_a_fix() -> None:
    imports = {
        "tiktoken": {"ok": False, "error": {"type": "ModuleNotFoundError", "message": "No module named 'regex'"},
                     "seconds": 0.1},
        "torch": {"ok": False, "error": {"type": "timeout", "message": "import did not finish within 60s"},
                  "seconds": 60.0},
    }
    results = by_check(evaluate_venv(VENV, facts(imports=imports), None))
    assert results["import:tiktoken"].status == "fail"
    assert "ModuleNotFoundError: No module named 'regex'" in results["import:tiktoken"].message
    assert results["import:tiktoken"].fix == "/opt/venvs/serve/bin/pip install regex"
    assert results["import:torch"].status == "fail" and "-X importtime" in results["import:torch"].fix


def test_tokenizer_failures() -> None:
    venv = VenvEntry(path="/opt/v", models=("/models/a", "/models/b", "/models/c", "/models/d"))
    tok = {
        "/models/a": {"loaded": False, "error": {"type": "ImportError", "message": "requires tiktoken",
                                                 "missing_packages": ["tiktoken", "blobfile"]}},
        "/models/b": {"loaded": False, "error": {"type": "timeout", "message": "killed after 120s"}},
        "/models/d": {"loaded": False, "error": {"type": "ValueError", "message": "needs custom code",
                                                 "cause": "remote-code-refused", "missing_packages": []}},
    }
    results = by_check(evaluate_venv(venv, facts(disk={}), None, tok))
    assert results["tokenizer:/models/a"].fix == "/opt/v/bin/pip install tiktoken blobfile"
    assert results["tokenizer:/models/b"].status == "fail" and "probe_timeout" in results["tokenizer:/models/b"].fix
    assert "did not run" in results["tokenizer:/models/c"].message
    assert "remote_code: true" in results["tokenizer:/models/d"].fix


def test_disk_below_minimum_and_missing_dir() -> None:
    disk = {"/models/qwen": {"free_bytes": 5 * 2**30, "total_bytes": 100 * 2**30, "error": None}}
    result = by_check(evaluate_venv(VENV, facts(disk=disk), None))["disk:/models/qwen"]
    assert result.status == "fail" and "5.0 GiB free" in result.message and "min_free_gb 10" in result.message
    disk = {"/models/qwen": {"free_bytes": None, "total_bytes": None,
                             "error": {"type": "not-found", "message": "/models/qwen: No such file or directory"}}}
    result = by_check(evaluate_venv(VENV, facts(disk=disk), None))["disk:/models/qwen"]
    assert result.status == "fail" and "No such file" in result.message
    # no min_free_gb, no models: the venv's own filesystem, as info
    bare = VenvEntry(path="/opt/v")
    assert probe_request(bare)["model_dirs"] == ["/opt/v"]
    disk = {"/opt/v": {"free_bytes": 2**30, "total_bytes": 2**31, "error": None}}
    assert by_check(evaluate_venv(bare, facts(disk=disk), None))["disk:/opt/v"].status == "info"


def test_gpus_none_is_info_and_failure_is_warn() -> None:
    assert check_gpus(facts(gpus=None)).status == "info"
    broken = {"count": 0, "devices": [], "error": {"type": "nvidia-smi-failed", "message": "driver mismatch"}}
    assert check_gpus(facts(gpus=broken)).status == "warn"
    assert "gpus" not in by_check(evaluate_venv(VENV, facts(), None, include_gpus=False))


def test_unreachable_host_reports_only_reachable() -> None:
    host = HostEntry(name="gpu-a", address="10.1.2.200", port=2222, user="ops", jump="bastion")
    results = evaluate_venv(VENV, None, "connect timed out after 5s", host=host)
    assert [(r.check, r.status) for r in results] == [("reachable", "fail")]
    assert results[0].fix == "ssh -p 2222 -J bastion ops@10.1.2.200 true  # must work from this machine"
    assert exit_code(results) == 1


def test_broken_venv_fails_python_and_stops() -> None:
    results = evaluate_venv(VENV, None, None, probe_error="no such file: /opt/venvs/serve/bin/python")
    assert [(r.check, r.status) for r in results] == [("reachable", "pass"), ("python", "fail")]
    assert "-V" in results[1].fix


def test_facts_from_the_real_probe_evaluate_cleanly() -> None:
    venv = VenvEntry(path=sys.prefix, requires=("pyyaml>=6", "packaging", "not-installed-xyz"),
                     imports=("json",))
    reply = health_probe.run(probe_request(venv, import_timeout=30, nvidia_smi=False))
    results = by_check(evaluate_venv(venv, reply, None))
    assert results["python"].status == "pass"
    assert results["package:pyyaml"].status == "pass"
    assert results["package:not-installed-xyz"].status == "fail"
    assert results["import:json"].status == "pass"
    assert results[f"disk:{sys.prefix}"].status == "info"
