"""Prometheus textfile output for node_exporter."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from introspect.checks.health import CheckResult
from introspect.checks.prom import write_prom


def test_prom_file_parses_and_carries_every_check(tmp_path: Path) -> None:
    path = tmp_path / "introspect_health.prom"
    path.write_text("stale\n")  # replaced, not appended to
    results = [
        ("gpu-a", "/opt/venvs/serve", CheckResult("package:tiktoken", "fail", "missing")),
        ("gpu-a", "/opt/venvs/serve", CheckResult("import:torch", "pass", "ok")),
        ("gpu-a", "/opt/venvs/serve", CheckResult("drift:package-removed", "warn", "tiktoken removed")),
        ("gpu-b", None, CheckResult("reachable", "fail", 'connect "timed" out\nafter 5s')),
    ]
    write_prom(path, results, {"gpu-a": True, "gpu-b": False}, started_at=1000.0, finished_at=1012.5)

    families = {f.name: f for f in text_string_to_metric_families(path.read_text())}
    checks = {(s.labels["host"], s.labels["venv"], s.labels["check"], s.labels["status"]): s.value
              for s in families["introspect_health_check"].samples}
    assert checks == {
        ("gpu-a", "/opt/venvs/serve", "package:tiktoken", "fail"): 0.0,
        ("gpu-a", "/opt/venvs/serve", "import:torch", "pass"): 1.0,
        ("gpu-a", "/opt/venvs/serve", "drift:package-removed", "warn"): 1.0,
        ("gpu-b", "", "reachable", "fail"): 0.0,
    }
    up = {s.labels["host"]: s.value for s in families["introspect_health_host_up"].samples}
    assert up == {"gpu-a": 1.0, "gpu-b": 0.0}
    assert families["introspect_health_last_run_timestamp_seconds"].samples[0].value == 1012.5
    assert families["introspect_health_run_duration_seconds"].samples[0].value == 12.5
    assert "python_gc" not in path.read_text()  # own registry: no process metrics
    assert [p.name for p in tmp_path.iterdir()] == ["introspect_health.prom"]  # no temp file left


def test_same_results_give_identical_files(tmp_path: Path) -> None:
    results = [("b", "v", CheckResult("x", "pass", "")), ("a", "v", CheckResult("y", "fail", ""))]
    write_prom(tmp_path / "1.prom", results, {"a": True, "b": True}, 1.0, 2.0)
    write_prom(tmp_path / "2.prom", list(reversed(results)), {"b": True, "a": True}, 1.0, 2.0)
    assert (tmp_path / "1.prom").read_bytes() == (tmp_path / "2.prom").read_bytes()
