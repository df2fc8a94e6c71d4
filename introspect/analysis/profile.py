"""Raw facts in, profile out (``introspect.profile/v1``). Pure: no I/O.

A profile can be rebuilt at any time from saved raw facts
(``introspect profile RAW.json``), so everything here is tested without SSH.
:func:`analyze` returns the typed :class:`Profile`; :func:`build_profile` is its
JSON form, the entry point of the callers (cli, checks, diff, tests). Every
finding of a profile is made here, from the raw facts alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from introspect.analysis.architecture.config_witness import (
    class_config,
    settle_with_class,
    with_class_defaults,
)
from introspect.analysis.architecture.layout_unknown import still_unknown
from introspect.analysis.architecture.section import architecture_section
from introspect.analysis.architecture.witnesses import apply_witnesses
from introspect.analysis.findings import Finding, Severity
from introspect.analysis.list_caps import list_totals
from introspect.analysis.raw_findings import error_findings, missing_module_findings
from introspect.analysis.raw_guard import guarded, repair_raw
from introspect.analysis.result import (
    PROFILE_SCHEMA,
    EnvironmentSection,
    FilesSection,
    Profile,
    TargetSection,
)
from introspect.analysis.serving.section import serving_sections
from introspect.analysis.snapshot import snapshot_remote_code_finding
from introspect.analysis.tokenizer.section import tokenizer_section
from introspect.remote.contract import RawFacts, as_dict

__all__ = ["BAD_PATH_STATES", "PROFILE_SCHEMA", "Profile", "analyze", "build_profile", "environment_section",
           "exit_code"]

# Model-directory states that mean "wrong path", not "broken model" (exit 2).
BAD_PATH_STATES = {"not-found", "not-a-directory", "not-a-model-dir", "permission-denied", "symlink-loop"}


def environment_section(raw: RawFacts | dict[str, Any]) -> EnvironmentSection:
    env = as_dict(raw.get("environment"))
    python = as_dict(raw.get("python"))
    version = env.get("python_version")
    if version is None and python.get("version"):
        version = ".".join(str(part) for part in python["version"])
    return {
        "python_version": version,
        "python_executable": env.get("python_executable") or python.get("executable"),
        "venv": as_dict(raw.get("target")).get("venv"),
        "in_venv": env.get("in_venv"),
        "packages": dict(as_dict(env.get("packages"))),
        "missing_modules": list(env.get("missing_modules") or []),
        "custom_code_modules": as_dict(env.get("modules")),
    }


def config_error(errors: Any) -> dict[str, Any] | None:
    """The probe's record of a config.json that is there but unusable (missing is not one)."""
    for err in errors if isinstance(errors, list) else []:
        if (isinstance(err, dict) and isinstance(err.get("path"), str) and err["path"].endswith("/config.json")
                and err.get("type") not in ("missing-config", "not-found", "encoding")):
            return err
    return None


def _target_section(block: dict[str, Any]) -> TargetSection:
    """The raw target block with every key present, in the profile's order."""
    section = TargetSection(scheme=block.get("scheme"), host=block.get("host"), port=block.get("port"),
                            user=block.get("user"), python=block.get("python"), venv=block.get("venv"),
                            model_path=block.get("model_path"))
    if block.get("container"):
        section["container"] = block["container"]
    return section


def _custom_code(files: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for module in files.get("custom_code") or []:
        if isinstance(module, dict):
            out.append({key: module.get(key) for key in
                        ("file", "module", "sha256", "size", "imports", "relative_imports",
                         "referenced_by", "error")})
    return out


def _files_section(raw: RawFacts | dict[str, Any], files: dict[str, Any]) -> FilesSection:
    totals = list_totals(files, "listing")  # the listing's true length, and whether it was cut (MAX_LISTING)
    return {
        "model_path": files.get("model_path"),
        "real_path": files.get("real_path"),
        "status": files.get("status"),
        "listing": files.get("listing") or [],
        "listing_total": totals["listing_total"],
        "listing_truncated": totals["listing_truncated"],
        "total_size": files.get("total_size"),  # of the listed entries only
        "custom_code": _custom_code(files),
        "safetensors_bytes_read": as_dict(raw.get("safetensors")).get("bytes_read"),
        "hashes": dict(hashes) if isinstance(hashes := raw.get("hashes"), dict) else None,
    }


def analyze(raw: RawFacts | dict[str, Any]) -> Profile:
    """The full typed profile. Never raises on malformed raw facts: damage is a finding."""
    raw, damage = repair_raw(as_dict(raw))
    target = _target_section(as_dict(raw.get("target")))
    files = as_dict(raw.get("files"))
    options = as_dict(raw.get("options"))
    no_findings: Callable[[], list[Finding]] = list
    environment = guarded("environment", lambda: environment_section(raw), lambda: environment_section({}), damage)

    config = files.get("config")
    architecture, arch_findings = _architecture(raw, files, config)
    if files.get("status") != "ok":  # the files were never read: "no config.json" would name the wrong cause
        arch_findings = [f for f in arch_findings if f.code != "config-missing"]
    arch_findings += guarded("witnesses", lambda: apply_witnesses(architecture, raw), no_findings, damage)
    arch_findings = still_unknown(architecture, arch_findings)
    tokenizer, tok_findings = guarded("tokenizer", lambda: tokenizer_section(
        as_dict(raw.get("tokenizer_files")),
        raw.get("tokenizer_probe") if isinstance(raw.get("tokenizer_probe"), dict) else None,
        config=config if isinstance(config, dict) else None, target=dict(target),
        remote_code_allowed=bool(options.get("remote_code", True)), model_files=files),
        lambda: tokenizer_section({}, None, config=None, target={}, remote_code_allowed=True), damage)

    timings = dict(as_dict(raw.get("timings")))
    if isinstance(tokenizer, dict) and "load_seconds" in tokenizer:
        # Keep run-to-run noise out of the sections so that profiles diff cleanly.
        timings["tokenizer.load"] = tokenizer.pop("load_seconds")

    serving, serving_findings = guarded(  # also adds the drafter plan
        "engines, GPUs and plan", lambda: serving_sections(raw, architecture, tokenizer),
        lambda: serving_sections({}, {}, {}), damage)
    findings = guarded("errors", lambda: _findings(raw, files, target, environment, tok_findings,
                                                    arch_findings + serving_findings), no_findings, damage)
    files_section = guarded("files", lambda: _files_section(raw, files), lambda: _files_section({}, {}), damage)
    return Profile(
        target=target, environment=environment, architecture=architecture, tokenizer=tokenizer,
        files=files_section, serving=serving, findings=_dedupe(damage + findings), timings=timings,
        cache=as_dict(raw.get("cache")) or None, settings=as_dict(raw.get("settings")) or None)


def _architecture(raw: dict[str, Any], files: dict[str, Any], config: Any) -> tuple[dict[str, Any], list[Finding]]:
    """The config rules on config.json, then on the config class's own view of it when the host gave one."""
    path = (files.get("model_path") or "") + "/config.json" if config is not None else None
    safetensors = raw.get("safetensors") if isinstance(raw.get("safetensors"), dict) else None
    drafters = raw.get("drafters") if isinstance(raw.get("drafters"), list) else None
    derived = class_config(raw)
    if derived is None or not isinstance(config, dict):
        return architecture_section(config, config_path=path, safetensors=safetensors, drafters=drafters,
                                    config_error=config_error(raw.get("errors")))
    read = architecture_section(with_class_defaults(config, derived), config_path=path, safetensors=safetensors,
                                drafters=drafters)
    by_class = architecture_section(derived, config_path=path, safetensors=safetensors, drafters=drafters)
    return settle_with_class(read, by_class, raw)


def _findings(
    raw: dict[str, Any], files: dict[str, Any], target: TargetSection, environment: EnvironmentSection,
    tok_findings: list[Finding], arch_findings: list[Finding],
) -> list[Finding]:
    """Every finding of the profile, in the order the dedupe keeps the first of equals."""
    findings: list[Finding] = []
    status = files.get("status")
    if status and status != "ok":
        findings.append(Finding(Severity.ERROR, "model-path", f"{target.get('model_path')}: {status}",
                                "pass --model the directory that holds config.json"))
    findings += error_findings(list(raw.get("errors") or []))
    findings += tok_findings
    already = {str(f.extra.get("package", "")).lower() for f in tok_findings if f.code == "missing-package"}
    already |= {pkg.lower() for f in tok_findings for pkg in f.extra.get("packages", [])}
    findings += missing_module_findings(environment, dict(target), already)
    findings += arch_findings
    if raw.get("fatal"):
        fatal = raw["fatal"]
        # A run stopped by a signal (client/model.py keeps what finished) is not a connection failure.
        code = "interrupted" if fatal.get("type") in ("Interrupted", "Terminated") else "connection"
        findings.append(Finding(Severity.ERROR, code, str(fatal.get("message")), fatal.get("hint")))
    snapshot = snapshot_remote_code_finding(raw)
    if snapshot is not None:
        findings.append(snapshot)
    return findings


def build_profile(raw: RawFacts | dict[str, Any]) -> dict[str, Any]:
    """The full profile as ``introspect.profile/v1`` JSON. Never raises on malformed raw facts."""
    return analyze(raw).to_json()


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple[str, str, str]] = set()
    out = []
    for item in findings:
        if item.key not in seen:
            seen.add(item.key)
            out.append(item)
    return sorted(out, key=lambda f: f.severity.rank)


def exit_code(profile: dict[str, Any], raw: RawFacts | dict[str, Any]) -> int:
    """0 clean, 1 error findings, 2 bad model path, fatal connection errors their own code."""
    fatal = as_dict(raw.get("fatal"))
    if fatal.get("exit_code"):
        return int(fatal["exit_code"])
    if as_dict(raw.get("files")).get("status") in BAD_PATH_STATES:
        return 2
    if any(f.get("severity") == "error" for f in profile.get("findings", [])):
        return 1
    return 0
