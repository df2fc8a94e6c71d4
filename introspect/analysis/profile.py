"""Raw facts in, profile out (``introspect.profile/v1``). Pure: no I/O.

A profile can be rebuilt at any time from saved raw facts
(``introspect profile RAW.json``), so everything here is tested without SSH.
"""

from __future__ import annotations

from typing import Any

from introspect.analysis.architecture import analyze_architecture
from introspect.analysis.findings import finding, pip_fix
from introspect.analysis.serving import serving_sections
from introspect.analysis.tokenizer import analyze_tokenizer

PROFILE_SCHEMA = "introspect.profile/v1"
TARGET_KEYS = ("host", "port", "user", "python", "venv", "model_path")

# Model-directory states that mean "wrong path", not "broken model" (exit 2).
BAD_PATH_STATES = {"not-found", "not-a-directory", "not-a-model-dir", "permission-denied", "symlink-loop"}

# Error types the remote reports that are only worth a warning.
WARNING_ERROR_TYPES = {"data-truncated", "listing-truncated", "dangling", "dangling-symlink", "symlink-loop",
                       "scan-truncated", "missing-custom-code", "remote-repo"}

# Fixes for remote error types that have an obvious one.
ERROR_FIXES = {
    "missing-custom-code": "copy the missing .py file from the model's repository into the model dir",
    "too-large": "raise --max-json-bytes if the file is legitimately that large",
    "malformed-json": "re-download or repair the file",
    "not-utf8": "re-download the file; it is not UTF-8 text",
    "header-too-large": "the shard is corrupt or not safetensors: re-download it",
    "truncated-header": "the shard is truncated: re-download it",
    "malformed-header": "the shard is corrupt: re-download it",
    "missing-shard": "a shard named in model.safetensors.index.json is missing: finish the download",
}


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def environment_section(raw: dict[str, Any]) -> dict[str, Any]:
    env = _dict(raw.get("environment"))
    python = _dict(raw.get("python"))
    version = env.get("python_version")
    if version is None and python.get("version"):
        version = ".".join(str(part) for part in python["version"])
    return {
        "python_version": version,
        "python_executable": env.get("python_executable") or python.get("executable"),
        "venv": _dict(raw.get("target")).get("venv"),
        "in_venv": env.get("in_venv"),
        "packages": dict(_dict(env.get("packages"))),
        "missing_modules": list(env.get("missing_modules") or []),
        "custom_code_modules": _dict(env.get("modules")),
    }


def _custom_code(files: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for module in files.get("custom_code") or []:
        if isinstance(module, dict):
            out.append({key: module.get(key) for key in
                        ("file", "module", "sha256", "size", "imports", "relative_imports",
                         "referenced_by", "error")})
    return out


def _missing_module_findings(env: dict[str, Any], target: dict[str, Any],
                             already: set[str]) -> list[dict[str, Any]]:
    out = []
    modules = _dict(env.get("custom_code_modules"))
    for name in env.get("missing_modules") or []:
        dist = _dict(modules.get(name)).get("distribution") or name
        if dist.lower() in already:
            continue
        out.append(finding(
            "error", "missing-package",
            f"the model's own code imports {name!r}, but package {dist!r} is not installed in "
            f"{target.get('venv') or target.get('python') or 'the target Python'}",
            pip_fix(target, dist)))
    return out


def _error_findings(errors: list[Any]) -> list[dict[str, Any]]:
    out = []
    for err in errors:
        if not isinstance(err, dict):
            continue
        kind = str(err.get("type") or "error")
        probe = err.get("probe") or "probe"
        severity = "warning" if kind in WARNING_ERROR_TYPES else "error"
        code = "probe-timeout" if kind in ("timeout", "ProbeTimeout") else f"{probe}-{kind}".lower()
        out.append(finding(severity, code, f"{probe}: {err.get('message')}",
                           err.get("hint") or ERROR_FIXES.get(kind)))
    return out


def build_profile(raw: dict[str, Any]) -> dict[str, Any]:
    """The full profile. Never raises on malformed raw facts."""
    raw = _dict(raw)
    target = {key: _dict(raw.get("target")).get(key) for key in TARGET_KEYS}
    files = _dict(raw.get("files"))
    options = _dict(raw.get("options"))
    environment = environment_section(raw)

    config = files.get("config")
    architecture, arch_findings = analyze_architecture(
        config, config_path=(files.get("model_path") or "") + "/config.json" if config is not None else None,
        safetensors=raw.get("safetensors") if isinstance(raw.get("safetensors"), dict) else None,
        drafters=raw.get("drafters") if isinstance(raw.get("drafters"), list) else None)
    tokenizer, tok_findings = analyze_tokenizer(
        _dict(raw.get("tokenizer_files")),
        raw.get("tokenizer_probe") if isinstance(raw.get("tokenizer_probe"), dict) else None,
        config=config if isinstance(config, dict) else None, target=target,
        remote_code_allowed=bool(options.get("remote_code", True)))

    timings = dict(_dict(raw.get("timings")))
    if isinstance(tokenizer, dict) and "load_seconds" in tokenizer:
        # Keep run-to-run noise out of the sections so that profiles diff cleanly.
        timings["tokenizer.load"] = tokenizer.pop("load_seconds")

    findings: list[dict[str, Any]] = []
    status = files.get("status")
    if status and status != "ok":
        findings.append(finding("error", "model-path", f"{target.get('model_path')}: {status}",
                                "pass --model the directory that holds config.json"))
    findings += _error_findings(list(raw.get("errors") or []))
    findings += tok_findings
    already = {str(f.get("package", "")).lower() for f in tok_findings if f.get("code") == "missing-package"}
    already |= {pkg.lower() for f in tok_findings for pkg in f.get("packages", [])}
    findings += _missing_module_findings(environment, target, already)
    findings += arch_findings
    serving, serving_findings = serving_sections(raw, architecture, tokenizer)  # also adds the drafter plan
    findings += serving_findings
    if raw.get("fatal"):
        fatal = raw["fatal"]
        findings.append(finding("error", "connection", str(fatal.get("message")), fatal.get("hint")))

    return {
        "schema": PROFILE_SCHEMA,
        "target": target,
        "environment": environment,
        "architecture": architecture,
        "tokenizer": tokenizer,
        "files": {
            "model_path": files.get("model_path"),
            "real_path": files.get("real_path"),
            "status": status,
            "listing": files.get("listing") or [],
            "total_size": files.get("total_size"),
            "custom_code": _custom_code(files),
            "safetensors_bytes_read": _dict(raw.get("safetensors")).get("bytes_read"),
            "hashes": raw.get("hashes") if isinstance(raw.get("hashes"), dict) else None,
        },
        **serving,
        "findings": _dedupe(findings),
        "timings": timings,
        "cache": _dict(raw.get("cache")) or None,
    }


def _dedupe(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[tuple[Any, ...]] = set()
    out = []
    for item in findings:
        key = (item.get("severity"), item.get("code"), item.get("message"))
        if key not in seen:
            seen.add(key)
            out.append(item)
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(out, key=lambda f: order.get(str(f.get("severity")), 3))


def exit_code(profile: dict[str, Any], raw: dict[str, Any]) -> int:
    """0 clean, 1 error findings, 2 bad model path, fatal connection errors their own code."""
    fatal = _dict(raw.get("fatal"))
    if fatal.get("exit_code"):
        return int(fatal["exit_code"])
    if _dict(raw.get("files")).get("status") in BAD_PATH_STATES:
        return 2
    if any(f.get("severity") == "error" for f in profile.get("findings", [])):
        return 1
    return 0
