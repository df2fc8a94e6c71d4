"""Verdicts of `introspect health` for one venv, from the health probe's facts (issue 4).

Pure: no I/O, no imports of the checked packages. Input is the reply of
``introspect/remote/health_probe.py`` (plus the tokenizer probe's results, passed
in by the command); output is a list of :class:`CheckResult`, one per named check:

``reachable``, ``python``, ``package:<name>``, ``dependency-conflicts``,
``import:<module>``, ``tokenizer:<model dir>``, ``disk:<path>``, ``gpus``.

Every failing result names its fix as an exact command where one exists.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from introspect.inventory import HostEntry, VenvEntry

Status = Literal["pass", "fail", "warn", "info"]
GIB = 2**30

# Modules whose distribution has another name: the fix must name what pip installs.
_MODULE_TO_DIST = {
    "yaml": "pyyaml",
    "cv2": "opencv-python",
    "PIL": "pillow",
    "sklearn": "scikit-learn",
    "google.protobuf": "protobuf",
    "google": "protobuf",
    "bs4": "beautifulsoup4",
    "dateutil": "python-dateutil",
    "jwt": "pyjwt",
    "attr": "attrs",
    "Crypto": "pycryptodome",
    "flash_attn": "flash-attn",
    "vllm_flash_attn": "vllm-flash-attn",
}


@dataclass(frozen=True)
class CheckResult:
    check: str
    status: Status
    message: str
    fix: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def failed(self) -> bool:
        return self.status == "fail"


def exit_code(results: Iterable[CheckResult]) -> int:
    """Issue 4: 0 all healthy, 1 at least one check failed (2 is for inventory errors)."""
    return 1 if any(r.status == "fail" for r in results) else 0


def probe_request(venv: VenvEntry, *, import_timeout: float = 60.0, nvidia_smi: bool = True) -> dict[str, Any]:
    """The request for health_probe.run() that these checks expect the facts of."""
    return {
        "imports": list(venv.imports),
        "model_dirs": disk_paths(venv),
        "import_timeout": import_timeout,
        "nvidia_smi": nvidia_smi,
    }


def disk_paths(venv: VenvEntry) -> list[str]:
    # The model dirs are what fills up; with none listed, the venv's own filesystem
    # (where pip writes) is still worth watching.
    return list(dict.fromkeys(venv.models or (venv.path,)))


def _pip(venv: VenvEntry) -> str:
    return shlex.quote(venv.pip)


def _python(venv: VenvEntry) -> str:
    return shlex.quote(venv.python)


def _install(venv: VenvEntry, *requirements: str) -> str:
    return f"{_pip(venv)} install " + " ".join(shlex.quote(r) for r in requirements)


# ----------------------------------------------------------------- reach / python


def check_reachable(reach_error: str | None, host: HostEntry | None = None) -> CheckResult:
    if reach_error is None:
        return CheckResult("reachable", "pass", "connected and authenticated")
    fix = None
    if host is not None:
        dest = f"{host.user}@{host.address}" if host.user else host.address
        port = f" -p {host.port}" if host.port else ""
        jump = f" -J {shlex.quote(host.jump)}" if host.jump else ""
        fix = f"check that `ssh{port}{jump} {shlex.quote(dest)} true` works from this machine"
    return CheckResult("reachable", "fail", reach_error, fix, {"error": reach_error})


def check_python(venv: VenvEntry, facts: Mapping[str, Any] | None, probe_error: str | None) -> CheckResult:
    py = facts.get("python") if facts else None
    if probe_error is not None or not isinstance(py, Mapping):
        msg = probe_error or "the probe returned no interpreter facts"
        return CheckResult(
            "python", "fail", f"{venv.python}: {msg}",
            f"check the venv on the host: `{_python(venv)} -V` (recreate it if the interpreter is missing)",
            {"error": msg},
        )
    evidence = {k: py.get(k) for k in ("version", "executable", "prefix", "in_venv")}
    note = "" if py.get("in_venv") else " (sys.prefix equals base_prefix: not a virtualenv, e.g. conda or system)"
    return CheckResult("python", "pass", f"Python {py.get('version')} at {py.get('executable')}{note}",
                       None, evidence)


# ----------------------------------------------------------------------- packages


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
                           _install(venv, requirement), {"requirement": requirement, "installed": None})
    version = info.get("version")
    evidence = {"requirement": requirement, "installed": version}
    ok = _satisfies(req, version)
    if ok is None:
        return CheckResult(check, "warn", f"{req.name} {version}: version does not parse; cannot compare with "
                           f"{req.specifier}", _install(venv, requirement), evidence)
    if not ok:
        return CheckResult(check, "fail", f"{req.name} {version} does not satisfy {requirement}",
                           _install(venv, requirement), evidence)
    if req.extras:
        missing = [u for dep in _extra_deps(info, sorted(req.extras), env)
                   if (u := _unmet(dep, installed)) is not None]
        if missing:
            evidence["extras_unmet"] = missing
            names = ", ".join(f"{m['requirement']} ({m['installed'] or 'missing'})" for m in missing)
            return CheckResult(check, "fail", f"{req.name} {version} is installed but its extras need: {names}",
                               _install(venv, requirement), evidence)
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
    fix = (f"{_install(venv, first['requirement'])}   (then re-check with `{_pip(venv)} check`; "
           "installing may move other packages)")
    return CheckResult("dependency-conflicts", "fail", f"{len(problems)} broken requirement(s): {shown}",
                       fix, evidence)


# ------------------------------------------------------------------------ imports


def check_import(venv: VenvEntry, module: str, facts: Mapping[str, Any]) -> CheckResult:
    check = f"import:{module}"
    result = (facts.get("imports") or {}).get(module)
    if not isinstance(result, Mapping):
        return CheckResult(check, "fail", f"import {module}: the probe reported no result", None, {})
    evidence = {k: result.get(k) for k in ("ok", "error", "seconds") if k in result}
    if result.get("ok"):
        secs = result.get("seconds")
        timing = f" in {secs:.2f}s" if isinstance(secs, (int, float)) else ""
        return CheckResult(check, "pass", f"import {module} succeeded{timing}", None, evidence)
    error = result.get("error") or {}
    kind, text = error.get("type", "error"), error.get("message", "")
    if result.get("stderr_tail"):
        evidence["stderr_tail"] = result["stderr_tail"]
    missing = re.match(r"No module named '([^']+)'", text or "")
    if kind == "ModuleNotFoundError" and missing:
        top = missing.group(1)
        dist = _MODULE_TO_DIST.get(top) or _MODULE_TO_DIST.get(top.split(".")[0]) or top.split(".")[0]
        fix = _install(venv, dist)
    elif kind == "timeout":
        fix = (f"time it on the host: `{_python(venv)} -X importtime -c {shlex.quote('import ' + module)}`; "
               "raise the import timeout if it is just slow")
    else:
        fix = f"see the full traceback on the host: `{_python(venv)} -c {shlex.quote('import ' + module)}`"
    return CheckResult(check, "fail", f"import {module} failed: {kind}: {text}".rstrip(": "), fix, evidence)


# ---------------------------------------------------------------------- tokenizer


def check_tokenizer(venv: VenvEntry, model: str, result: Mapping[str, Any] | None) -> CheckResult:
    check = f"tokenizer:{model}"
    if not isinstance(result, Mapping):
        return CheckResult(check, "fail", f"{model}: no tokenizer result (the tokenizer probe did not run)",
                           None, {})
    if result.get("loaded"):
        return CheckResult(check, "pass", f"tokenizer of {model} loads in {venv.path}", None, dict(result))
    # The error shape of introspect/remote/tokenizer_probe.py: {type, message, cause,
    # missing_packages}; "cause" classifies it (missing-package, remote-code-refused, ...).
    error = result.get("error") or {}
    kind, text, cause = error.get("type", "error"), error.get("message", ""), error.get("cause")
    missing = [str(p) for p in error.get("missing_packages") or []]
    if missing:
        fix = _install(venv, *missing)
    elif kind == "timeout" or cause == "timeout":
        fix = "raise `probe_timeout` in hosts.yaml if loading is just slow, else look for a hang on the host"
    elif cause == "remote-code-refused":
        fix = ("the tokenizer needs trust_remote_code: review the model's custom code files, then set "
               "`remote_code: true` for this venv in hosts.yaml")
    elif cause == "missing-files":
        fix = f"the model directory {model} is incomplete on the host: re-download or re-sync it"
    else:
        fix = f"inspect the model directory on the host ({model}) and the error above"
    return CheckResult(check, "fail", f"tokenizer of {model} does not load: {kind}: {text}".rstrip(": "), fix,
                       {"error": dict(error), "missing_packages": missing})


# --------------------------------------------------------------------------- disk


def check_disk(venv: VenvEntry, path: str, facts: Mapping[str, Any]) -> CheckResult:
    check = f"disk:{path}"
    info = (facts.get("disk") or {}).get(path)
    if not isinstance(info, Mapping):
        return CheckResult(check, "fail", f"{path}: the probe reported no disk facts", None, {})
    if info.get("error"):
        err = info["error"]
        fix = f"check that {path} exists on the host" if err.get("type") == "not-found" else None
        return CheckResult(check, "fail", str(err.get("message") or err), fix, {"error": dict(err)})
    free, total = info.get("free_bytes") or 0, info.get("total_bytes") or 0
    evidence = {"free_bytes": free, "total_bytes": total, "min_free_gb": venv.min_free_gb}
    text = f"{free / GIB:.1f} GiB free of {total / GIB:.1f} GiB at {path}"
    if venv.min_free_gb is None:
        return CheckResult(check, "info", text + " (no min_free_gb set)", None, evidence)
    if free < venv.min_free_gb * GIB:
        return CheckResult(check, "fail", f"{text}, below min_free_gb {venv.min_free_gb:g}",
                           f"free space on that filesystem (see `df -h {shlex.quote(path)}` on the host)", evidence)
    return CheckResult(check, "pass", f"{text} (min_free_gb {venv.min_free_gb:g})", None, evidence)


# --------------------------------------------------------------------------- gpus


def check_gpus(facts: Mapping[str, Any]) -> CheckResult:
    gpus = facts.get("gpus")
    if gpus is None:
        return CheckResult("gpus", "info", "no nvidia-smi on PATH: no NVIDIA GPU visible", None, {"count": 0})
    if gpus.get("error"):
        err = gpus["error"]
        return CheckResult("gpus", "warn", f"nvidia-smi failed: {err.get('message')}",
                           "run `nvidia-smi` on the host; a driver/library mismatch needs a driver reload or reboot",
                           {"error": dict(err)})
    devices = list(gpus.get("devices") or [])
    if not devices:
        return CheckResult("gpus", "info", "nvidia-smi found no GPUs", None, {"count": 0})
    names = sorted({d.get("name") for d in devices})
    used = sum(d.get("memory_used_mib") or 0 for d in devices)
    total = sum(d.get("memory_total_mib") or 0 for d in devices)
    msg = (f"{len(devices)} x {', '.join(map(str, names))}; memory used {used / 1024:.1f}/{total / 1024:.1f} GiB; "
           f"driver {gpus.get('driver_version')}, CUDA {gpus.get('cuda_version') or 'unknown'}")
    evidence = {"count": len(devices), "devices": devices, "driver_version": gpus.get("driver_version"),
                "cuda_version": gpus.get("cuda_version"), "memory_used_mib": used, "memory_total_mib": total}
    return CheckResult("gpus", "pass", msg, None, evidence)


# ------------------------------------------------------------------------ the lot


def evaluate_venv(
    venv: VenvEntry,
    facts: Mapping[str, Any] | None,
    reach_error: str | None,
    tokenizer_results: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    host: HostEntry | None = None,
    probe_error: str | None = None,
    include_gpus: bool = True,
) -> list[CheckResult]:
    """All checks of one venv.

    ``reach_error``: why connect/auth failed (then only ``reachable`` is reported: the
    rest is unknown, not failed). ``probe_error``: the host answered but the venv's
    probe did not run (missing venv, dangling python link, Python < 3.8).
    ``tokenizer_results``: model dir -> tokenizer-probe result; ``None`` skips the
    tokenizer checks. ``include_gpus``: GPUs are per host; pass False for a host's
    second and later venvs to report them once.
    """
    results = [check_reachable(reach_error, host)]
    if reach_error is not None:
        return results
    python = check_python(venv, facts, probe_error)
    results.append(python)
    if python.status == "fail" or facts is None:
        return results
    results.extend(check_package(venv, r, facts) for r in venv.requires)
    results.append(check_dependency_conflicts(venv, facts))
    results.extend(check_import(venv, m, facts) for m in venv.imports)
    if tokenizer_results is not None:
        results.extend(check_tokenizer(venv, m, tokenizer_results.get(m)) for m in venv.models)
    results.extend(check_disk(venv, p, facts) for p in disk_paths(venv))
    if include_gpus:
        results.append(check_gpus(facts))
    return results


__all__ = [
    "CheckResult",
    "Status",
    "check_dependency_conflicts",
    "check_disk",
    "check_gpus",
    "check_import",
    "check_package",
    "check_python",
    "check_reachable",
    "check_tokenizer",
    "disk_paths",
    "evaluate_venv",
    "exit_code",
    "probe_request",
]
