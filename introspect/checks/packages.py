"""Package checks of `introspect health`: requirements and `pip check`, from installed metadata.

Pure: the health probe reports each distribution's version and Requires-Dist; these
checks evaluate them with ``packaging`` (markers against the venv's own marker
environment), never by running pip on the host.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from introspect.checks.result import CheckResult

if TYPE_CHECKING:  # packaging loads when a requirement is judged, not with the health command
    from packaging.requirements import Requirement

    from introspect.inventory import VenvEntry

# A fleet's venvs share most of their ~650 Requires-Dist strings: each distinct string is
# parsed once per run (and each marker and specifier judged once per environment and
# version), not once per host. The parsed objects are shared, so callers never change them.
MEMO_SIZE = 1 << 15
# A Requires-Dist whose whole marker is one ``extra == "name"`` (PEP 508; either quote): ``pip check``
# judges the base install, extra "", where that marker is False, so it is skipped without being
# parsed. A dist lists most of its requirements so (of a serving venv's ~880, about 770).
ONLY_AN_EXTRA = re.compile(r""";\s*extra\s*==\s*(['"])[^'"]+\1\s*$""")


@functools.lru_cache(maxsize=MEMO_SIZE)
def parse_requirement(raw: str) -> Requirement | None:
    """``Requirement(raw)``, or None when it does not parse; memoised."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(raw)
    except InvalidRequirement:
        return None


@functools.lru_cache(maxsize=MEMO_SIZE)
def _marker_verdict(raw: str, env: tuple[tuple[str, str], ...], extra: str) -> bool:
    """Whether ``raw``'s marker holds in ``env`` with ``extra``; memoised."""
    from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName

    req = parse_requirement(raw)
    assert req is not None and req.marker is not None
    try:
        return bool(req.marker.evaluate({**dict(env), "extra": extra}))
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
        return True  # cannot tell: judge it, which errs towards reporting


@functools.lru_cache(maxsize=MEMO_SIZE)
def _contains(raw: str, version: str) -> bool | None:
    """Whether ``version`` satisfies ``raw``'s specifier (None: it does not parse); memoised."""
    from packaging.version import InvalidVersion, Version

    req = parse_requirement(raw)
    assert req is not None
    try:
        # pip check counts pre-releases as satisfying (an installed rc is what runs).
        return req.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return None


@functools.lru_cache(maxsize=MEMO_SIZE)
def canonical_name(name: str) -> str:
    """PEP 503's normalised name (``canonicalize_name``); memoised like the requirements."""
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))


def pip_of(venv: VenvEntry) -> str:
    return shlex.quote(venv.pip)


def python_of(venv: VenvEntry) -> str:
    return shlex.quote(venv.python)


def install_command(venv: VenvEntry, *requirements: str) -> str:
    return f"{pip_of(venv)} install " + " ".join(shlex.quote(r) for r in requirements)


Env = tuple[tuple[str, str], ...]  # a marker environment, hashable (the memo key)


def _marker_env(facts: Mapping[str, Any]) -> Env:
    py = facts.get("python") or {}
    env = dict(py.get("marker_env") or {})
    if "python_version" not in env and py.get("version"):
        # Older probe replies: derive what we can; the rest falls back to packaging's defaults.
        env["python_full_version"] = str(py["version"])
        env["python_version"] = ".".join(str(py["version"]).split(".")[:2])
    return tuple(sorted((str(k), str(v)) for k, v in env.items()))


def _marker_applies(raw: str, req: Requirement, env: Env, extra: str = "") -> bool:
    return req.marker is None or _marker_verdict(raw, env, extra)


def _installed(facts: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    dists = facts.get("distributions") or {}
    return {canonical_name(name): info for name, info in dists.items() if isinstance(info, Mapping)}


def _satisfies(raw: str, req: Requirement, version: str | None) -> bool | None:
    """True/False, or None when the installed version does not parse."""
    return True if not req.specifier else _contains(raw, str(version))


class _UnmetKeys(TypedDict):
    package: str
    requirement: str
    installed: str | None  # the installed version; None: not installed
    problem: Literal["missing", "conflict", "unparsable-version"]


class Unmet(_UnmetKeys, total=False):
    """A requirement the installed distributions do not meet (a check's evidence lists them)."""

    required_by: str  # "<dist> <version>" whose Requires-Dist it is (dependency-conflicts only)


def _unmet(raw: str, req: Requirement, installed: Mapping[str, Mapping[str, Any]]) -> Unmet | None:
    info = installed.get(canonical_name(req.name))
    if info is None:
        return Unmet(package=req.name, requirement=str(req), installed=None, problem="missing")
    version = info.get("version")
    ok = _satisfies(raw, req, version)
    if ok is False:
        return Unmet(package=req.name, requirement=str(req), installed=version, problem="conflict")
    if ok is None:
        return Unmet(package=req.name, requirement=str(req), installed=version, problem="unparsable-version")
    return None


def _extra_deps(dist: Mapping[str, Any], extras: Iterable[str], env: Env) -> list[tuple[str, Requirement]]:
    """Requires-Dist entries that an extra (``pkg[extra]``) pulls in, with their raw strings."""
    out = []
    for raw in dist.get("requires") or []:
        dep = parse_requirement(raw) if isinstance(raw, str) else None
        if dep is None:
            continue
        if dep.marker is not None and any(_marker_applies(raw, dep, env, e) and not _marker_applies(raw, dep, env)
                                          for e in extras):
            out.append((raw, dep))
    return out


def _requirement(raw: str) -> Requirement:
    from packaging.requirements import Requirement

    return Requirement(raw)  # raises InvalidRequirement, naming what is wrong


def check_package(venv: VenvEntry, requirement: str, facts: Mapping[str, Any]) -> CheckResult:
    req = parse_requirement(requirement) or _requirement(requirement)  # validated by the inventory loader
    name = canonical_name(req.name)
    check = f"package:{name}"
    env = _marker_env(facts)
    if not _marker_applies(requirement, req, env):
        return CheckResult(check, "info", f"{requirement}: not required here (marker {req.marker} is false)",
                           None, {"requirement": requirement})
    installed = _installed(facts)
    info = installed.get(name)
    if info is None:
        return CheckResult(check, "fail", f"{req.name} is not installed (required: {requirement})",
                           install_command(venv, requirement), {"requirement": requirement, "installed": None})
    version = info.get("version")
    evidence = {"requirement": requirement, "installed": version}
    ok = _satisfies(requirement, req, version)
    if ok is None:
        return CheckResult(check, "warn", f"{req.name} {version}: version does not parse; cannot compare with "
                           f"{req.specifier}", install_command(venv, requirement), evidence)
    if not ok:
        return CheckResult(check, "fail", f"{req.name} {version} does not satisfy {requirement}",
                           install_command(venv, requirement), evidence)
    if req.extras:
        missing = [u for raw, dep in _extra_deps(info, sorted(req.extras), env)
                   if (u := _unmet(raw, dep, installed)) is not None]
        if missing:
            evidence["extras_unmet"] = missing
            names = ", ".join(f"{m['requirement']} ({m['installed'] or 'missing'})" for m in missing)
            return CheckResult(check, "fail", f"{req.name} {version} is installed but its extras need: {names}",
                               install_command(venv, requirement), evidence)
    verdict = f"satisfies {requirement}" if req.specifier else "is installed"
    return CheckResult(check, "pass", f"{req.name} {version} {verdict}", None, evidence)


def _base_requirement(raw: str, env: Env) -> Requirement | None:
    """``raw`` parsed when ``pip check`` judges it in ``env`` (base install, extra ""), else None:
    an optional (extra) dependency, unparsable metadata (pip check skips it too), or a marker
    that is false here."""
    if ONLY_AN_EXTRA.search(raw):
        return None  # its marker is False for extra "" (saves parsing ~85% of them)
    dep = parse_requirement(raw)
    if dep is None or not _marker_applies(raw, dep, env):
        return None
    return dep


# _base_requirement's verdicts per marker environment, then per string: a fleet's venvs repeat the
# same ~900 strings host after host, and a dict keyed by the string alone is looked up far faster
# than a memo keyed by (string, environment), which hashes the dozen pairs of the environment
# each time. Whole environments are dropped past MAX_ENVS (a fleet has a handful).
MAX_ENVS = 64
_judged: dict[Env, dict[str, Requirement | None]] = {}


def _judged_in(env: Env) -> dict[str, Requirement | None]:
    found = _judged.get(env)
    if found is None:
        if len(_judged) >= MAX_ENVS:
            _judged.clear()
        found = _judged.setdefault(env, {})
    return found


def check_dependency_conflicts(venv: VenvEntry, facts: Mapping[str, Any]) -> CheckResult:
    """`pip check` without running pip: every installed dist's Requires-Dist, base extras only."""
    env = _marker_env(facts)
    installed = _installed(facts)
    problems: list[Unmet] = []
    judged = _judged_in(env)
    for dist_name, info in sorted(installed.items()):
        for raw in info.get("requires") or []:
            if not isinstance(raw, str):
                continue
            if raw in judged:
                dep = judged[raw]
            else:
                dep = judged[raw] = _base_requirement(raw, env)
            if dep is None:
                continue
            unmet = _unmet(raw, dep, installed)
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
