"""Raw facts in, profile out (``introspect.profile/v1``). Pure: no I/O.

A profile can be rebuilt at any time from saved raw facts
(``introspect profile RAW.json``), so everything here is tested without SSH.
:func:`analyze` returns the typed :class:`Profile`, :func:`build_profile_document`
its document (the Python API), :func:`build_profile` its JSON (the callers: cli,
checks, diff, tests). Every finding of a profile is made here, from the raw facts alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from introspect.analysis.architecture.config_witness import (
    class_config,
    settle_with_class,
    with_class_defaults,
)
from introspect.analysis.architecture.layout_unknown import still_unknown
from introspect.analysis.architecture.section import architecture_section
from introspect.analysis.architecture.witnesses import apply_witnesses
from introspect.analysis.findings import Finding, Severity
from introspect.analysis.profile_sections import (
    config_error,
    environment_section,
    files_section,
    target_section,
)
from introspect.analysis.raw_findings import error_findings, missing_module_findings
from introspect.analysis.raw_guard import guarded, repair_raw
from introspect.analysis.result import PROFILE_SCHEMA, Profile, Serving, TargetSection
from introspect.analysis.serving.section import serving_sections
from introspect.analysis.snapshot import snapshot_remote_code_finding
from introspect.analysis.tokenizer.section import load_seconds, tokenizer_section
from introspect.documents.base import Number, Record
from introspect.documents.profile import CacheHit, ProfileDocument, Settings
from introspect.documents.profile_architecture import Architecture
from introspect.documents.profile_files import Environment, Target
from introspect.documents.profile_tokenizer import Tokenizer
from introspect.remote.contract import FilesFacts, RawFacts, as_dict

__all__ = ["BAD_PATH_STATES", "PROFILE_SCHEMA", "Profile", "analyze", "build_profile", "build_profile_document",
           "environment_section", "exit_code"]

R = TypeVar("R", bound=Record)

# Model-directory states that mean "wrong path", not "broken model" (exit 2).
BAD_PATH_STATES = {"not-found", "not-a-directory", "not-a-model-dir", "permission-denied", "symlink-loop"}


def analyze(raw: object) -> Profile:
    """The full typed profile of raw facts as read (any JSON value). Never raises on malformed
    raw facts: damage is a finding."""
    raw, damage = repair_raw(raw)
    target = target_section(raw.get("target"))
    files = raw.get("files")
    options = as_dict(raw.get("options"))
    no_findings: Callable[[], list[Finding]] = list
    environment = guarded("environment", lambda: environment_section(raw),
                          lambda: environment_section(RawFacts()), damage)

    config = files.get("config") if files is not None else None
    architecture, arch_findings = _architecture(raw, files, config)
    if as_dict(files).get("status") != "ok":  # the files were never read: "no config.json" would name the wrong cause
        arch_findings = [f for f in arch_findings if f.code != "config-missing"]
    arch_findings += guarded("witnesses", lambda: apply_witnesses(architecture, raw), no_findings, damage)
    arch_findings = still_unknown(architecture, arch_findings)
    tokenizer_model, tok_findings = guarded("tokenizer", lambda: tokenizer_section(
        raw.get("tokenizer_files"),
        raw.get("tokenizer_probe") if isinstance(raw.get("tokenizer_probe"), dict) else None,
        config=config if isinstance(config, dict) else None, target=target,
        remote_code_allowed=bool(options.get("remote_code", True)), model_files=raw.get("files")),
        lambda: tokenizer_section(None, None, config=None, target=target, remote_code_allowed=True), damage)

    timings: dict[str, Number | None] = dict(raw.get("timings") or {})
    # Keep run-to-run noise out of the sections so that profiles diff cleanly.
    timings["tokenizer.load"] = load_seconds(raw.get("tokenizer_probe"))

    serving, serving_findings = guarded(
        "engines, GPUs and plan", lambda: _serving(raw, architecture, tokenizer_model),
        lambda: _serving(RawFacts(), None, None), damage)
    findings = guarded("errors", lambda: _findings(raw, files, target, environment, tok_findings,
                                                    arch_findings + serving_findings), no_findings, damage)
    files_record = guarded("files", lambda: files_section(raw, files), lambda: files_section(RawFacts(), None), damage)
    cache = guarded("cache", lambda: _record(CacheHit, raw.get("cache")), lambda: None, damage)
    settings = guarded("settings", lambda: _record(Settings, raw.get("settings")), lambda: None, damage)
    return Profile(
        target=Target(**target), environment=environment, architecture=architecture, tokenizer=tokenizer_model,
        files=files_record, serving=serving, findings=_dedupe(damage + findings), timings=timings, cache=cache,
        settings=settings)


def _record(kind: type[R], block: object) -> R | None:
    """A small block of the raw facts (the cache hit, a live run's settings) as its document record."""
    return kind.model_validate(block) if isinstance(block, dict) and block else None


def _serving(raw: RawFacts, architecture: Architecture | None,
             tokenizer: Tokenizer | None) -> tuple[Serving, list[Finding]]:
    """Engines, GPUs and the plan; the drafter plan joins ``architecture.speculative``. Without an
    architecture (the fallback of a damaged section), those of a model nothing is known of."""
    arch = architecture if architecture is not None else architecture_section(None)[0]
    sections, findings = serving_sections(raw, arch, tokenizer)
    return Serving(engines=sections["engines"], gpus=sections["gpus"], plan=sections["plan"]), findings


def _architecture(raw: RawFacts, files: FilesFacts | None, config: object) -> tuple[Architecture, list[Finding]]:
    """The config rules on config.json, then on the config class's own view of it when the host gave one."""
    path = (as_dict(files).get("model_path") or "") + "/config.json" if config is not None else None
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
    raw: RawFacts, files: FilesFacts | None, target: TargetSection, environment: Environment,
    tok_findings: list[Finding], arch_findings: list[Finding],
) -> list[Finding]:
    """Every finding of the profile, in the order the dedupe keeps the first of equals."""
    findings: list[Finding] = []
    status = as_dict(files).get("status")
    if status and status != "ok":
        findings.append(Finding(Severity.ERROR, "model-path", f"{target.get('model_path')}: {status}",
                                "pass --model the directory that holds config.json"))
    findings += error_findings(list(raw.get("errors") or []))
    findings += tok_findings
    findings += missing_module_findings(environment, target, _packages_named(tok_findings))
    findings += arch_findings
    fatal = raw.get("fatal")
    if fatal:
        # A run stopped by a signal (client/model.py keeps what finished) is not a connection failure.
        code = "interrupted" if fatal.get("type") in ("Interrupted", "Terminated") else "connection"
        hint = fatal.get("hint")
        findings.append(Finding(Severity.ERROR, code, str(fatal.get("message")),
                                hint if isinstance(hint, str) else None))
    snapshot = snapshot_remote_code_finding(raw)
    if snapshot is not None:
        findings.append(snapshot)
    return findings


def _packages_named(tok_findings: list[Finding]) -> set[str]:
    """The packages the tokenizer's missing-package findings already name (lower case)."""
    named = {str(f.extra.get("package", "")).lower() for f in tok_findings if f.code == "missing-package"}
    for f in tok_findings:
        packages = f.extra.get("packages")
        named |= {str(pkg).lower() for pkg in packages} if isinstance(packages, list) else set()
    return named


def build_profile_document(raw: object) -> ProfileDocument:
    """The full profile as its typed document (``introspect.profile/v1``). Never raises on malformed raw facts."""
    return analyze(raw).document()


def build_profile(raw: object) -> dict[str, Any]:
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


def exit_code(profile: Mapping[str, object], raw: object) -> int:
    """0 clean, 1 error findings, 2 bad model path, fatal connection errors their own code.
    ``profile``: the profile's JSON (built or read back); ``raw``: the raw facts as read."""
    facts = as_dict(raw)
    fatal = as_dict(facts.get("fatal"))
    if fatal.get("exit_code"):
        return int(fatal["exit_code"])
    if as_dict(facts.get("files")).get("status") in BAD_PATH_STATES:
        return 2
    findings = profile.get("findings")
    if isinstance(findings, list) and any(as_dict(f).get("severity") == "error" for f in findings):
        return 1
    return 0
