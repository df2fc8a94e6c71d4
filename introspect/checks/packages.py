"""Package checks of `introspect health`: requirements and `pip check`, from installed metadata.

Pure: the health probe reports each distribution's version and Requires-Dist; these
checks evaluate them with ``packaging`` (markers against the venv's own marker
environment), never by running pip on the host.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from introspect.checks.result import CheckResult
from introspect.inventory import VenvEntry


def pip_of(venv: VenvEntry) -> str:
    return shlex.quote(venv.pip)


def python_of(venv: VenvEntry) -> str:
    return shlex.quote(venv.python)


def install_command(venv: VenvEntry, *requirements: str) -> str:
    return f"{pip_of(venv)} install " + " ".join(shlex.quote(r) for r in requirements)


def _marker_env(facts: Mapping[str, Any]) -> dict[str, str]:
    py = facts.get("python") or {}
    env = dict(py.get("marker_env") or {})
    if "python_version" not in env and py.get("version"):
        # Older probe replies: derive what we can; the rest falls back to packaging's defaults.
        env["python_full_version"] = str(py["version"])
        env["python_version"] = ".".join(str(py["version"]).split(".")[:2])
    return env


def _marker_applies(req: Requirement, env: Mapping[str, str], extra: str = "") -> bool:
    if req.marker is None:
        return True
    try:
        return bool(req.marker.evaluate({**env, "extra": extra}))
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
        return True  # cannot tell: judge it, which errs towards reporting


def _installed(facts: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    dists = facts.get("distributions") or {}
    return {canonicalize_name(name): info for name, info in dists.items() if isinstance(info, Mapping)}


def _satisfies(req: Requirement, version: str | None) -> bool | None:
    """True/False, or None when the installed version does not parse."""
    if not req.specifier:
        return True
    try:
        # pip check counts pre-releases as satisfying (an installed rc is what runs).
        return req.specifier.contains(Version(str(version)), prereleases=True)
    except InvalidVersion:
        return None


def _unmet(req: Requirement, installed: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    info = installed.get(canonicalize_name(req.name))
    if info is None:
        return {"package": req.name, "requirement": str(req), "installed": None, "problem": "missing"}
    ok = _satisfies(req, info.get("version"))
    if ok is False:
        return {"package": req.name, "requirement": str(req), "installed": info.get("version"),
                "problem": "conflict"}
    if ok is None:
        return {"package": req.name, "requirement": str(req), "installed": info.get("version"),
                "problem": "unparsable-version"}
    return None


def _extra_deps(dist: Mapping[str, Any], extras: Iterable[str], env: Mapping[str, str]) -> list[Requirement]:
    """Requires-Dist entries that an extra (``pkg[extra]``) pulls in."""
    out = []
    for raw in dist.get("requires") or []:
        try:
            dep = Requirement(raw)
        except InvalidRequirement:
            continue
        if dep.marker is not None and any(_marker_applies(dep, env, e) and not _marker_applies(dep, env)
                                          for e in extras):
            out.append(dep)
    return out


def check_package(venv: VenvEntry, requirement: str, facts: Mapping[str, Any]) -> CheckResult:
    req = Requirement(requirement)  # validated by the inventory loader
    name = canonicalize_name(req.name)
    check = f"package:{name}"
    env = _marker_env(facts)
    if not _marker_applies(req, env):
        return CheckResult(check, "info", f"{requirement}: not required here (marker {req.marker} is false)",
                           None, {"requirement": requirement})
    installed = _installed(facts)
    info = installed.get(name)
    if info is None:
        return CheckResult(check, "fail", f"{req.name} is not installed (required: {requirement})",
                           install_command(venv, requirement), {"requirement": requirement, "installed": None})
    version = info.get("version")
    evidence = {"requirement": requirement, "installed": version}
    ok = _satisfies(req, version)
    if ok is None:
        return CheckResult(check, "warn", f"{req.name} {version}: version does not parse; cannot compare with "
                           f"{req.specifier}", install_command(venv, requirement), evidence)
    if not ok:
        return CheckResult(check, "fail", f"{req.name} {version} does not satisfy {requirement}",
                           install_command(venv, requirement), evidence)
    if req.extras:
        missing = [u for dep in _extra_deps(info, sorted(req.extras), env)
                   if (u := _unmet(dep, installed)) is not None]
        if missing:
            evidence["extras_unmet"] = missing
            names = ", ".join(f"{m['requirement']} ({m['installed'] or 'missing'})" for m in missing)
            return CheckResult(check, "fail", f"{req.name} {version} is installed but its extras need: {names}",
                               install_command(venv, requirement), evidence)
    verdict = f"satisfies {requirement}" if req.specifier else "is installed"
    return CheckResult(check, "pass", f"{req.name} {version} {verdict}", None, evidence)


def check_dependency_conflicts(venv: VenvEntry, facts: Mapping[str, Any]) -> CheckResult:
    """`pip check` without running pip: every installed dist's Requires-Dist, base extras only."""
    env = _marker_env(facts)
    installed = _installed(facts)
    problems: list[dict[str, Any]] = []
    for dist_name, info in sorted(installed.items()):
        for raw in info.get("requires") or []:
            try:
                dep = Requirement(raw)
            except InvalidRequirement:
                continue  # pip check skips unparsable metadata too
            if not _marker_applies(dep, env):  # extra == "" drops optional (extra) deps
                continue
            unmet = _unmet(dep, installed)
            if unmet is not None and unmet["problem"] != "unparsable-version":
                unmet["required_by"] = f"{info.get('name', dist_name)} {info.get('version')}"
                problems.append(unmet)
    evidence = {
        "missing": [p for p in problems if p["problem"] == "missing"],
        "conflicts": [p for p in problems if p["problem"] == "conflict"],
        "checked": len(installed),
    }
    if not problems:
        return CheckResult("dependency-conflicts", "pass",
                           f"no broken requirements among {len(installed)} installed distributions", None, evidence)
    lines = [
        f"{p['required_by']} requires {p['requirement']}, "
        + ("which is not installed" if p["problem"] == "missing" else f"but {p['installed']} is installed")
        for p in problems
    ]
    shown = "; ".join(lines[:3]) + (f"; and {len(lines) - 3} more" if len(lines) > 3 else "")
    first = problems[0]
    fix = (f"{install_command(venv, first['requirement'])}   (then re-check with `{pip_of(venv)} check`; "
           "installing may move other packages)")
    return CheckResult("dependency-conflicts", "fail", f"{len(problems)} broken requirement(s): {shown}",
                       fix, evidence)
