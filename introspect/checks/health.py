"""Verdicts of `introspect health` for one venv, from the health probe's facts.

Pure: no I/O, no imports of the checked packages. Input is the reply of
``introspect/remote/health_probe.py`` (plus the tokenizer probe's results, passed
in by the command); output is a list of :class:`CheckResult`, one per named check:

``reachable``, ``python``, ``package:<name>``, ``dependency-conflicts``,
``import:<module>``, ``tokenizer:<model dir>``, ``disk:<path>``, ``gpus`` (the package
checks live in :mod:`introspect.checks.packages`).

Every failing result names its fix as an exact command where one exists.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from introspect.checks.packages import check_dependency_conflicts, check_package, install_command, python_of
from introspect.checks.result import CheckResult, Status, exit_code
from introspect.inventory import HostEntry, VenvEntry
from introspect.remote.contract import distribution_for

if TYPE_CHECKING:  # a shape: contract imports the TypedDict modules on their first use only
    from introspect.remote.contract import HealthRequest

GIB = 2**30
DEFAULT_IMPORT_TIMEOUT = 60.0  # seconds for each listed import, inside the health probe
MESSAGE_SHOWN = 400  # characters of a tokenizer error in the check's message


def probe_request(venv: VenvEntry, *, import_timeout: float = DEFAULT_IMPORT_TIMEOUT, nvidia_smi: bool = True) -> HealthRequest:
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

# ----------------------------------------------------------------- reach / python


def check_reachable(reach_error: str | None, host: HostEntry | None = None) -> CheckResult:
    if reach_error is None:
        return CheckResult("reachable", "pass", "connected and authenticated")
    fix = _ssh_true(host) if host is not None else None
    return CheckResult("reachable", "fail", reach_error, fix, {"error": reach_error})


def _ssh_true(host: HostEntry) -> str | None:
    """The fix of an SSH host that cannot be reached: the one-line login that shows why."""
    address, port, user = host.address, host.port, host.user
    if host.url:
        from introspect.errors import UsageError
        from introspect.transport.hostspec import parse_host

        try:
            spec = parse_host(host.url)  # an ssh:// or openssh:// url names its own address, port, user
        except UsageError:
            return None
        if spec.scheme not in ("ssh", "openssh"):
            return None  # a container scheme: the transport's own hint names its client
        address, port, user = spec.host or address, spec.port or port, spec.user or user
    dest = f"{user}@{address}" if user else address
    flags = (f" -p {port}" if port else "") + (f" -J {shlex.quote(host.jump)}" if host.jump else "")
    return f"ssh{flags} {shlex.quote(dest)} true  # must work from this machine"


def check_python(venv: VenvEntry, facts: Mapping[str, Any] | None, probe_error: str | None) -> CheckResult:
    py = facts.get("python") if facts else None
    if probe_error is not None or not isinstance(py, Mapping):
        msg = probe_error or "the probe returned no interpreter facts"
        return CheckResult(
            "python", "fail", f"{venv.python}: {msg}",
            f"{python_of(venv)} -V  # on the host: recreate the venv if the interpreter is missing",
            {"error": msg},
        )
    evidence = {k: py.get(k) for k in ("version", "executable", "prefix", "in_venv")}
    note = "" if py.get("in_venv") else " (sys.prefix equals base_prefix: not a virtualenv, e.g. conda or system)"
    return CheckResult("python", "pass", f"Python {py.get('version')} at {py.get('executable')}{note}",
                       None, evidence)

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
        fix = install_command(venv, distribution_for(top))
    elif kind == "timeout":
        fix = (f"{python_of(venv)} -X importtime -c {shlex.quote('import ' + module)}  # on the host: raise the "
               "import timeout if it is just slow")
    else:
        fix = f"{python_of(venv)} -c {shlex.quote('import ' + module)}  # on the host: the full traceback"
    return CheckResult(check, "fail", f"import {module} failed: {kind}: {text}".rstrip(": "), fix, evidence)


# ---------------------------------------------------------------------- tokenizer


def check_tokenizer(venv: VenvEntry, model: str, result: Mapping[str, Any] | None) -> CheckResult:
    """Does ``AutoTokenizer.from_pretrained(model)`` load in this venv, as the pipeline calls it?

    A load by the layout's own library (tiktoken, sentencepiece, mistral-common: the tokenizer
    task's fallback, ``source``) is context in the message, never a pass: the pipeline calls
    AutoTokenizer, and ``preflight`` judges the same.
    """
    # Imported here: `health` loads the analysis package only once a reply is there.
    from introspect.analysis.tokenizer.autotokenizer_verdict import (
        autotokenizer_error,
        autotokenizer_loaded,
        stand_in_fix,
        stand_in_reason,
    )

    check = f"tokenizer:{model}"
    if not isinstance(result, Mapping):
        return CheckResult(check, "fail", f"{model}: no tokenizer result (the tokenizer probe did not run)",
                           None, {})
    # A stand-in "loads" and tokenizes every text to nothing or unk: it fails as preflight fails it.
    # The task reports no config vocab_size nor listing here: only the own-vocabulary test can judge.
    stand_in = stand_in_reason(result) if autotokenizer_loaded(result) else None
    if stand_in is not None:
        return CheckResult(check, "fail", f"AutoTokenizer builds a stand-in {result.get('class')} for {model} in "
                           f"{venv.path}, not the model's tokenizer: {stand_in}",
                           stand_in_fix(model, "run health again"),
                           {"autotokenizer_loaded": True, "stand_in": True, "stand_in_reason": stand_in,
                            **{k: result.get(k) for k in ("class", "len", "vocab_size", "added_tokens")}})
    if autotokenizer_loaded(result):
        cls = result.get("class")
        return CheckResult(check, "pass", f"AutoTokenizer loads the tokenizer of {model} in {venv.path}"
                           + (f" ({cls})" if cls else ""), None, dict(result))
    # The error shape of introspect/remote/facts/tokenizer/tokenizer_load.py: {type, message, cause,
    # missing_packages}. After a native load the task moved transformers' error to
    # "transformers_error" (introspect/remote/facts/tokenizer/tokenizer_native_load.py).
    native = result.get("source") if result.get("loaded") else None
    error = autotokenizer_error(result)
    kind, text, cause = error.get("type", "error"), _one_line(error.get("message")), error.get("cause")
    missing = [str(p) for p in error.get("missing_packages") or []]
    detail = f"{kind}: {text}".rstrip(": ") + "".join(
        [f" (cause: {cause})" if cause else "", f" (missing packages: {', '.join(missing)})" if missing else ""])
    lead = (f"{native} loads the files of {model}, but AutoTokenizer fails" if isinstance(native, str)
            else f"AutoTokenizer fails on the tokenizer of {model}")
    evidence: dict[str, Any] = {"autotokenizer_loaded": False, "error": dict(error), "missing_packages": missing}
    if isinstance(native, str):
        evidence["native"] = {"loaded_by": native, **{k: result.get(k) for k in ("class", "len", "vocab_size")}}
    return CheckResult(check, "fail", f"{lead} in {venv.path}: {detail}",
                       _tokenizer_fix(venv, model, error, result), evidence)


def _one_line(message: Any) -> str:
    # A finding is one line of the report; the whole message stays in the evidence's "error".
    text = " ".join(str(message or "").split())
    if len(text) <= MESSAGE_SHOWN:
        return text
    return f"{text[:MESSAGE_SHOWN]}... (+{len(text) - MESSAGE_SHOWN} more characters in the evidence)"


def _tokenizer_fix(venv: VenvEntry, model: str, error: Mapping[str, Any], result: Mapping[str, Any]) -> str:
    """A command to paste on the host; what it cannot say itself follows as a ``# comment``."""
    kind, cause = error.get("type"), error.get("cause")
    missing = [str(p) for p in error.get("missing_packages") or []]
    where = shlex.quote(model)
    if missing:
        return install_command(venv, *missing)
    if kind == "timeout" or cause in ("timeout", "time-limit"):
        return (f"{_load_command(venv, model)}  # if it loads, just slowly: raise probe_timeout in hosts.yaml "
                "(or health --timeout SECONDS); if it never returns, it hangs on the host")
    if cause == "remote-code-refused":
        return (f"ls {where}/*.py  # the tokenizer is the model's own code: review it, then set "
                "remote_code: true for this venv in hosts.yaml")
    if cause == "missing-files":
        return (f"ls -la {where}  # AutoTokenizer finds no tokenizer files it can read here: copy "
                "tokenizer_config.json and the vocabulary files of the model's repository next to config.json")
    if cause == "incompatible-code":
        major = str(result.get("transformers_version") or "").split(".")[0]
        if major.isdigit():
            return (install_command(venv, f"transformers<{major}") + f"  # the model's tokenizer code does not "
                    f"fit transformers {major}: pin the previous major, or update that code from the model's repository")
    if cause == "link-outside":  # the message names each link; its target is never read
        return (f"ls -l {where}  # replace each link named above with the model's own file: links out of "
                "the model directory are never followed")
    return f"{_load_command(venv, model)}  # the full traceback, on the host"


def _load_command(venv: VenvEntry, model: str) -> str:
    """The pipeline's own call, offline, in the venv's interpreter."""
    code = ("from transformers import AutoTokenizer; "
            f"print(AutoTokenizer.from_pretrained({model!r}, trust_remote_code={venv.remote_code}))")
    return f"HF_HUB_OFFLINE=1 {python_of(venv)} -c {shlex.quote(code)}"


# --------------------------------------------------------------------------- disk


def check_disk(venv: VenvEntry, path: str, facts: Mapping[str, Any]) -> CheckResult:
    check = f"disk:{path}"
    info = (facts.get("disk") or {}).get(path)
    if not isinstance(info, Mapping):
        return CheckResult(check, "fail", f"{path}: the probe reported no disk facts", None, {})
    if info.get("error"):
        err = info["error"]
        fix = f"ls -ld {shlex.quote(path)}  # on the host: it must exist" if err.get("type") == "not-found" else None
        return CheckResult(check, "fail", str(err.get("message") or err), fix, {"error": dict(err)})
    free, total = info.get("free_bytes") or 0, info.get("total_bytes") or 0
    evidence = {"free_bytes": free, "total_bytes": total, "min_free_gb": venv.min_free_gb}
    text = f"{free / GIB:.1f} GiB free of {total / GIB:.1f} GiB at {path}"
    if venv.min_free_gb is None:
        return CheckResult(check, "info", text + " (no min_free_gb set)", None, evidence)
    if free < venv.min_free_gb * GIB:
        return CheckResult(check, "fail", f"{text}, below min_free_gb {venv.min_free_gb:g}",
                           f"df -h {shlex.quote(path)}  # on the host: free space on that filesystem", evidence)
    return CheckResult(check, "pass", f"{text} (min_free_gb {venv.min_free_gb:g})", None, evidence)


# --------------------------------------------------------------------------- gpus


def check_gpus(facts: Mapping[str, Any]) -> CheckResult:
    gpus = facts.get("gpus")
    if gpus is None:
        return CheckResult("gpus", "info", "no nvidia-smi on PATH: no NVIDIA GPU visible", None, {"count": 0})
    if gpus.get("error"):
        err = gpus["error"]
        return CheckResult("gpus", "warn", f"nvidia-smi failed: {err.get('message')}",
                           "nvidia-smi  # on the host; a driver/library mismatch needs a driver reload or reboot",
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
