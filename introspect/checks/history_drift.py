"""Drift: what changed for one host and venv since the previous `introspect health` run.

Compares two :class:`introspect.checks.history.Snapshot` objects of the same (host, venv):
the host newly unreachable or back, packages added, removed, upgraded or downgraded, and
whether ``AutoTokenizer.from_pretrained`` of each model stopped loading or loads again.
The tokenizer verdicts are AutoTokenizer's own (what a data-generation pipeline calls),
never the native fallback's: uninstalling transformers is drift even when tiktoken or
sentencepiece can still read the files.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict

from introspect.checks.result import CheckResult, Status
from introspect.inventory import venv_pip

if TYPE_CHECKING:  # history imports this module: the dataclass is only needed for annotations
    from introspect.checks.history import Snapshot


def tokenizer_verdicts(tokenizer_results: Mapping[str, Mapping[str, Any]]) -> dict[str, bool]:
    """Model dir -> did AutoTokenizer load it (the snapshot's ``tokenizer_ok``).

    A model whose probe did not report is left out (unknown, not failed), so the next run
    neither calls it failing nor recovered.
    """
    # Imported here: `health` loads the analysis package only once a reply is there (this module
    # imports no pydantic model: see its docstring).
    from introspect.analysis.tokenizer.autotokenizer_verdict import autotokenizer_loaded

    verdicts = {model: autotokenizer_loaded(result) for model, result in tokenizer_results.items()}
    return {model: ok for model, ok in verdicts.items() if ok is not None}


class Since(TypedDict):
    """Every drift finding's evidence names the run it compares with."""

    previous_run: int | None  # the run id (None: a snapshot not read from the store)


class PackageChange(TypedDict):
    name: str
    previous: str | None  # None: not installed then
    current: str | None  # None: not installed now


def drift(previous: Snapshot | None, current: Snapshot) -> list[CheckResult]:
    """What changed since ``previous`` for the same host and venv; nothing on a first run.

    Drift findings are ``warn`` (a loss: removed, downgraded, down, tokenizer stopped
    loading) or ``info`` (added, upgraded, recovered, loads again). They never fail a run
    by themselves: the underlying checks (package:, reachable, tokenizer:) already do when
    it matters.
    """
    if previous is None:
        return []
    since = Since(previous_run=previous.run_id)
    return [*_host_drift(previous, current, since), *_package_drift(previous, current, since),
            *_tokenizer_drift(previous, current, since)]


def _host_drift(previous: Snapshot, current: Snapshot, since: Since) -> list[CheckResult]:
    if previous.reachable and not current.reachable:
        return [CheckResult("drift:host-unreachable", "warn",
                            f"{current.host} was reachable on the previous run and is not now", None, dict(since))]
    if not previous.reachable and current.reachable:
        return [CheckResult("drift:host-recovered", "info", f"{current.host} is reachable again", None,
                            dict(since))]
    return []


def _compare(old: str, new: str) -> int | None:
    from packaging.version import InvalidVersion, Version

    try:
        a, b = Version(old), Version(new)
    except InvalidVersion:
        return None
    return (a > b) - (a < b)


def _pin(venv: str, items: list[PackageChange]) -> str | None:
    # Restoring the previous version is the exact undo; whether to do it is the user's call.
    pins = [shlex.quote(f"{i['name']}=={i['previous']}") for i in items if i.get("previous")]
    if not venv or not pins:
        return None
    return f"{shlex.quote(venv_pip(venv))} install {' '.join(pins)}"


_PACKAGE_TEXTS: dict[str, Callable[[PackageChange], str]] = {
    "added": lambda i: f"{i['name']} {i['current']} added",
    "removed": lambda i: f"{i['name']} {i['previous']} removed",
    "upgraded": lambda i: f"{i['name']} {i['previous']} -> {i['current']}",
    "downgraded": lambda i: f"{i['name']} {i['previous']} -> {i['current']}",
    "changed": lambda i: f"{i['name']} {i['previous']} -> {i['current']}",
}


def _package_groups(old: Mapping[str, str], new: Mapping[str, str]) -> dict[str, list[PackageChange]]:
    groups: dict[str, list[PackageChange]] = {kind: [] for kind in _PACKAGE_TEXTS}
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if a == b:
            continue
        item = PackageChange(name=name, previous=a, current=b)
        if a is None:
            groups["added"].append(item)
        elif b is None:
            groups["removed"].append(item)
        else:
            order = _compare(a, b)
            if order == 0:  # '1.0' vs '1.0.0': equal versions spelled differently
                continue
            # None: a version packaging cannot parse; say "changed" rather than guess.
            groups[{1: "downgraded", -1: "upgraded", None: "changed"}[order]].append(item)
    return groups


def _package_drift(previous: Snapshot, current: Snapshot, since: Since) -> list[CheckResult]:
    if previous.packages is None or current.packages is None:
        return []
    groups = _package_groups(previous.packages, current.packages)
    out: list[CheckResult] = []
    for kind in ("removed", "downgraded", "changed", "upgraded", "added"):
        items = groups[kind]
        if not items:
            continue
        status: Status = "warn" if kind in ("removed", "downgraded") else "info"
        fix = _pin(current.venv, items) if status == "warn" else None
        message = f"{len(items)} package(s) {kind} since the previous run: " + "; ".join(
            map(_PACKAGE_TEXTS[kind], items))
        out.append(CheckResult(f"drift:package-{kind}", status, message, fix, {**since, "packages": items}))
    return out


def _tokenizer_drift(previous: Snapshot, current: Snapshot, since: Since) -> list[CheckResult]:
    if not previous.tokenizer_ok or not current.tokenizer_ok:
        return []
    before, now = previous.tokenizer_ok, current.tokenizer_ok
    # `is True` / `is False`: a model the previous run did not check is new, not changed.
    stopped = sorted(m for m, ok in now.items() if not ok and before.get(m) is True)
    again = sorted(m for m, ok in now.items() if ok and before.get(m) is False)
    where = f"{current.host}:{current.venv}" if current.venv else current.host
    out: list[CheckResult] = []
    if stopped:
        out.append(CheckResult(
            "drift:tokenizer-failing", "warn",
            f"AutoTokenizer of {', '.join(stopped)} stopped loading on {where} since the previous run",
            None, {**since, "models": stopped}))
    if again:
        out.append(CheckResult(
            "drift:tokenizer-recovered", "info",
            f"AutoTokenizer of {', '.join(again)} loads again on {where} since the previous run",
            None, {**since, "models": again}))
    return out


__all__ = ["drift", "tokenizer_verdicts"]
