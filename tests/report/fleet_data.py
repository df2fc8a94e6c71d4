"""A 4-host fleet for the report's fleet page: saved profiles for ``introspect compare`` and a
history database of five ``introspect health`` runs.

The health runs go through the health code itself: the real health task's facts of this
interpreter (``remote/tasks/health.py``), judged by ``checks.health.evaluate_venv``, drift attached
by ``client.health.attach_drift`` against the stored snapshots, stored by ``client.health.record_run``.
Only the hosts' histories are made up, one event each:

- gpu1: healthy throughout;
- gpu2: transformers upgraded before run 3 (drift: package-upgraded);
- gpu3: unreachable from run 4 on (the reachable check fails; drift: host-unreachable);
- gpu4: tiktoken uninstalled before run 2 (package:tiktoken fails; drift: package-removed).

The profiles are the Kimi-K2.6 fixture's golden profile, four times: gpu2 with another
transformers, gpu4 with another chat template, gpu3 unreachable (a fleet document's error item).
"""

from __future__ import annotations

import copy
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from introspect.checks.health import check_reachable, evaluate_venv, probe_request
from introspect.checks.history import HistoryStore, snapshot_from
from introspect.checks.result import CheckResult
from introspect.client.health import HostReport, VenvReport, attach_drift, record_run, report_dict
from introspect.inventory import HostEntry, VenvEntry
from introspect.remote.tasks import health as health_probe

REPO = Path(__file__).resolve().parents[2]
KIMI_PROFILE = REPO / "tests/data/golden/profiles/raw-kimi-k2.6-loaded.json"
HOSTS = ("gpu1", "gpu2", "gpu3", "gpu4")
RUNS = 5
START = 1_767_225_600.0  # 2026-01-01 00:00 UTC
DAY = 86_400.0
UPGRADED = "99.0.0"  # gpu2's transformers from run 3 on: newer than any installed one
UNREACHABLE = "TCP connect to 127.0.0.9:22 timed out after 5 s"


@dataclass(frozen=True)
class Scenario:
    """What each run recorded, for the tests to compare the page with: (host, run) -> results."""

    results: dict[tuple[str, int], list[CheckResult]]
    run_ids: list[int]


def venv() -> VenvEntry:
    return VenvEntry(path=sys.prefix, requires=("tiktoken", "jinja2"))


def _facts(base: dict[str, Any], host: str, run: int) -> dict[str, Any]:
    facts = copy.deepcopy(base)
    packages = facts["distributions"]
    if host == "gpu2" and run >= 3:
        packages["transformers"] = {**packages["transformers"], "version": UPGRADED}
    if host == "gpu4" and run >= 2:
        packages.pop("tiktoken", None)
    return facts


def _report(entry: HostEntry, run: int, base: dict[str, Any]) -> HostReport:
    """One host's report of one run, built as client.health builds it (_reachable_report, _unreachable)."""
    target = venv()
    if entry.name == "gpu3" and run >= 4:
        return HostReport(entry.name, entry.address, [check_reachable(UNREACHABLE, entry)], [VenvReport(target.path, [])],
                          [snapshot_from(entry.name, target.path, None, UNREACHABLE)], 5.0, 0)
    facts = _facts(base, entry.name, run)
    results = evaluate_venv(target, facts, None, None, host=entry, include_gpus=False)
    return HostReport(entry.name, entry.address, [check_reachable(None, entry)],
                      [VenvReport(target.path, [r for r in results if r.check != "reachable"])],
                      [snapshot_from(entry.name, target.path, facts, None)], 1.0, 1)


def health_facts() -> dict[str, Any]:
    """The health task's facts of this interpreter, as a host would send them."""
    base = health_probe.run(probe_request(venv(), nvidia_smi=False))
    assert "transformers" in base["distributions"] and "tiktoken" in base["distributions"], "the test venv changed"
    return base


def run_reports(run: int, base: dict[str, Any]) -> list[HostReport]:
    """The four hosts' reports of run ``run`` (1-based), before any drift is attached."""
    return [_report(HostEntry(name=name, address=f"127.0.0.{n + 10}"), run, base) for n, name in enumerate(HOSTS)]


def health_document(run: int) -> dict[str, Any]:
    """Run ``run`` as ``introspect health --json`` prints it (its hosts by client.health.report_dict)."""
    reports = run_reports(run, health_facts())
    started = START + (run - 1) * DAY
    results = [result for report in reports for _, _, result in report.rows()]
    counts = {status: sum(r.status == status for r in results) for status in ("pass", "fail", "warn", "info")}
    return {"schema": "introspect.health/v1", "run_id": None, "started_at": started, "finished_at": started + 30,
            "seconds": 30.0, "exit_code": 3 if any(not r.reachable for r in reports) else 1, "fleet": {},
            "summary": {"hosts": len(reports), "unreachable": sum(not r.reachable for r in reports), **counts},
            "hosts": [report_dict(r).to_dict() for r in reports], "history": {"stored": False}}


def history_db(path: Path) -> Scenario:
    base = health_facts()
    recorded: dict[tuple[str, int], list[CheckResult]] = {}
    run_ids = []
    with HistoryStore(path) as store:
        for run in range(1, RUNS + 1):
            reports = run_reports(run, base)
            attach_drift(reports, store)
            started = START + (run - 1) * DAY
            run_id = record_run(store, reports, argv=["health", "--hosts", "fleet.yaml"], started_at=started,
                                finished_at=started + 30)
            assert run_id is not None
            run_ids.append(run_id)
            for report in reports:
                recorded[(report.name, run)] = [result for _, _, result in report.rows()]
    return Scenario(recorded, run_ids)


def profiles(folder: Path) -> list[Path]:
    """gpu1, gpu2 and gpu4 as saved profiles, gpu3 as a fleet document whose probe could not connect."""
    base = json.loads(KIMI_PROFILE.read_text())
    written = []
    for host in ("gpu1", "gpu2", "gpu4"):
        profile = copy.deepcopy(base)
        profile["target"]["host"] = host
        if host == "gpu2":
            profile["environment"]["packages"]["transformers"] = "4.57.1"
        if host == "gpu4":
            profile["tokenizer"]["chat_template"]["sha256"] = "0" * 64
        path = folder / f"{host}.json"
        path.write_text(json.dumps(profile))
        written.append(path)
    fleet = {"schema": "introspect.fleet-profiles/v1", "model": base["target"]["model_path"], "fleet": {},
             "hosts": [{"host": "gpu3", "exit_code": 3, "profile": None,
                        "error": {"type": "HostUnreachable", "message": UNREACHABLE,
                                  "hint": "ssh -p 22 127.0.0.12 true  # shows why"}}]}
    path = folder / "gpu3-fleet.json"
    path.write_text(json.dumps(fleet))
    return [*written, path]
