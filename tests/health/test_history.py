"""Run history in SQLite and drift between runs."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from introspect.checks.health import CheckResult
from introspect.checks.history import HistoryStore, Snapshot, default_path, drift, snapshot_from

VENV = "/opt/venvs/serve"


def facts(packages: dict[str, str]) -> dict:
    return {"distributions": {n: {"name": n, "version": v, "requires": []} for n, v in packages.items()}}


BEFORE = {"transformers": "4.56.2", "tiktoken": "0.9.0", "numpy": "2.1.0", "torch": "2.8.0"}
AFTER = {"transformers": "4.57.1", "numpy": "2.1.0", "torch": "2.7.1", "regex": "2024.11.6"}


def checks(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.check: r for r in results}


def test_drift_after_a_package_is_removed_and_one_upgraded(tmp_path: Path) -> None:
    with HistoryStore(tmp_path / "h.sqlite3") as store:
        first = snapshot_from("gpu-a", VENV, facts(BEFORE), None, {"/models/q": {"loaded": True}})
        assert store.previous_snapshot("gpu-a", VENV) is None
        assert drift(None, first) == []
        run1 = store.record_run(argv=["health"], started_at=100.0, finished_at=101.0,
                                results=[("gpu-a", VENV, CheckResult("package:tiktoken", "pass", "ok"))],
                                snapshots=[first])

        second = snapshot_from("gpu-a", VENV, facts(AFTER), None, {"/models/q": {"loaded": False}})
        previous = store.previous_snapshot("gpu-a", VENV)
        assert previous == Snapshot("gpu-a", VENV, True, {n: v for n, v in BEFORE.items()},
                                    {"/models/q": True}, run1)
        found = checks(drift(previous, second))

    assert set(found) == {"drift:package-removed", "drift:package-upgraded", "drift:package-downgraded",
                          "drift:package-added", "drift:tokenizer-failing"}
    removed = found["drift:package-removed"]
    assert removed.status == "warn" and "tiktoken 0.9.0 removed" in removed.message
    assert removed.evidence["packages"] == [{"name": "tiktoken", "previous": "0.9.0", "current": None}]
    assert removed.fix == "/opt/venvs/serve/bin/pip install tiktoken==0.9.0"
    assert found["drift:package-upgraded"].status == "info"
    assert "transformers 4.56.2 -> 4.57.1" in found["drift:package-upgraded"].message
    assert found["drift:package-downgraded"].status == "warn"
    assert "torch 2.8.0 -> 2.7.1" in found["drift:package-downgraded"].message
    assert "regex" in found["drift:package-added"].message
    assert found["drift:tokenizer-failing"].evidence["models"] == ["/models/q"]
    assert all(r.status != "fail" for r in found.values())  # drift alone never fails a run


def test_unreachable_then_recovered_compares_with_last_known_state(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.sqlite3")
    up = snapshot_from("gpu-a", VENV, facts(BEFORE), None)
    store.record_run(argv=[], started_at=1, finished_at=2, results=[], snapshots=[up])

    down = snapshot_from("gpu-a", VENV, None, "connect timed out")
    assert down.packages is None
    found = checks(drift(store.previous_snapshot("gpu-a", VENV), down))
    assert list(found) == ["drift:host-unreachable"]  # packages unknown: no package drift
    store.record_run(argv=[], started_at=3, finished_at=4, results=[], snapshots=[down])

    back = snapshot_from("gpu-a", VENV, facts({**BEFORE, "tiktoken": "0.9.0"}), None)
    previous = store.previous_snapshot("gpu-a", VENV)
    assert previous is not None and previous.reachable is False and previous.packages == BEFORE
    assert [r.check for r in drift(previous, back)] == ["drift:host-recovered"]
    # still down twice in a row: nothing new to say
    assert drift(previous, down) == []
    store.close()


def test_unparsable_and_equal_versions() -> None:
    prev = Snapshot("h", "", True, {"a": "1.0", "b": "weird-1"})
    cur = Snapshot("h", "", True, {"a": "1.0.0", "b": "weird-2"})
    assert [r.check for r in drift(prev, cur)] == ["drift:package-changed"]


def test_runs_and_results_round_trip(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "sub" / "h.sqlite3")
    fail = CheckResult("package:tiktoken", "fail", "tiktoken is not installed",
                       "/opt/v/bin/pip install tiktoken", {"installed": None})
    r1 = store.record_run(argv=["introspect", "health"], started_at=10, finished_at=12, results=[
        ("a", VENV, CheckResult("reachable", "pass", "ok")),
        ("a", VENV, fail),
        ("b", None, CheckResult("reachable", "fail", "refused")),
    ])
    r2 = store.record_run(argv=["introspect", "health", "--only", "b"], started_at=20, finished_at=21,
                          results=[("b", None, CheckResult("reachable", "pass", "ok"))])
    runs = store.runs()
    assert [r.id for r in runs] == [r2, r1]
    assert (runs[1].hosts, runs[1].passed, runs[1].failed, runs[1].argv) == (2, 1, 2, ["introspect", "health"])
    only_a = store.runs(host="a")
    assert [(r.id, r.hosts, r.passed, r.failed) for r in only_a] == [(r1, 1, 1, 1)]
    assert len(store.runs(limit=1)) == 1
    stored = store.run_results(r1, host="a")
    assert [s.result for s in stored] == [CheckResult("reachable", "pass", "ok"), fail]
    assert stored[1].result.fix == fail.fix and stored[1].result.evidence == {"installed": None}
    assert store.run_results(r1, host="b")[0].venv == ""
    store.close()


def test_schema_and_constraints(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    HistoryStore(path).close()
    conn = sqlite3.connect(path)
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"runs", "results", "snapshots"} <= tables
    cols = [row[1] for row in conn.execute("PRAGMA table_info(results)")]
    assert cols == ["run_id", "host", "venv", "check", "status", "message", "evidence_json"]
    conn.close()
    store = HistoryStore(path)  # reopening an existing database is fine
    with pytest.raises(sqlite3.IntegrityError):
        store.record_run(argv=[], started_at=1, finished_at=2,
                         results=[("a", None, CheckResult("x", "bogus", "m"))])  # type: ignore[arg-type]
    assert store.runs() == []  # the failed run left nothing behind
    store.close()


def test_default_path_is_in_the_user_state_dir() -> None:
    import platformdirs

    assert default_path().parent == Path(platformdirs.user_state_dir("introspect"))
