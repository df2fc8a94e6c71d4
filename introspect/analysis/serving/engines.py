"""The ``engines`` section: can the host's SGLang / vLLM serve this model, and how? Pure.

The raw facts come from the engines' installed sources (remote/facts/host/engines.py):
SGLang registers the class names in ``EntryClass`` of ``srt/models/*.py``; vLLM maps
architecture names to (module, class) in ``model_executor/models/registry.py``.
Per engine this says whether the model's ``architectures[0]`` (and the wrapped text
model's) is registered and by which module, which speculative algorithms the
version defines, which drafter classes it ships for this family (EAGLE / EAGLE-3
heads, MTP / NextN modules, DFlash drafters), and whether it registers the
checkpoint's quantization method. ``readiness`` says, per speculative method, whether
this model's class provides what the engine calls on it at start (engine_readiness.py):
the ``speculative`` flags only say that the version knows the method.
"""

from __future__ import annotations

import re
from typing import cast

from introspect.analysis.findings import Finding, make
from introspect.analysis.serving.engine_readiness import drafter_findings, readiness_section
from introspect.analysis.serving.shapes import EngineQuantization
from introspect.documents.profile_architecture import Architecture
from introspect.documents.profile_serving import (
    Engine,
    EngineDrafter,
    Engines,
    EngineSpeculative,
    Registration,
)
from introspect.remote.contract import as_dict
from introspect.remote.sections_engines import EngineClass, EngineFacts, EngineQuantizationFacts, EnginesFacts

DRAFTER_WORDS = ("eagle", "dflash", "dspark", "nextn", "mtp", "medusa", "speculator")
GENERIC_DRAFTER = re.compile(r"^D(Flash|Spark)\d*DraftModel$")  # target-agnostic drafters

_SUFFIXES = ("ForConditionalGeneration", "ForCausalLM", "Model")



def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def family_tokens(arch: Architecture) -> list[str]:
    """Names a drafter class or module of this family contains: "kimik25", "deepseekv3", "deepseek"."""
    tokens: list[str] = []
    names = list(arch.architectures or []) + list(arch.text_architectures or [])
    for name in (str(n) for n in names):
        stem = name
        for suffix in _SUFFIXES:
            stem = stem.split(suffix)[0] or stem
        words = re.findall(r"[A-Z][a-z]+|[A-Z]+(?![a-z])|\d+", stem)
        tokens += [_norm(stem)] + ([_norm(words[0])] if words else [])
    tokens += [_norm(name) for name in (arch.model_type, arch.text_model_type) if name is not None]
    return sorted({t for t in tokens if len(t) >= 4})


def drafter_kind(name: str) -> str:
    low = name.lower()
    for word, kind in (("dflash", "dflash"), ("dspark", "dspark"), ("eagle3", "eagle3"), ("eagle", "eagle"),
                       ("nextn", "mtp"), ("mtp", "mtp"), ("medusa", "medusa")):
        if word in low:
            return kind
    return "other"


def _drafters(classes: dict[str, EngineClass], tokens: list[str]) -> tuple[list[EngineDrafter], list[str]]:
    family: list[tuple[bool, str, EngineDrafter]] = []
    generic = []
    for name, info in sorted(classes.items()):
        if not any(word in name.lower() for word in DRAFTER_WORDS):
            continue
        module = str(as_dict(info).get("module") or "")
        if GENERIC_DRAFTER.match(name):
            generic.append(name)
            continue
        haystack = _norm(name) + " " + _norm(module.rsplit(".", 1)[-1])
        hits = [token for token in tokens if token in haystack]
        if hits:
            # "model": a versioned name of this model (kimik25, deepseekv3) in the class or module;
            # "family": only the family word (deepseek), e.g. another generation's MTP head.
            match = "model" if any(any(c.isdigit() for c in token) for token in hits) else "family"
            drafter = EngineDrafter.model_validate({"class": name, "kind": drafter_kind(name), "match": match,
                                                    "module": module, "file": as_dict(info).get("file")})
            family.append((match != "model", name, drafter))
    family.sort(key=lambda item: item[:2])
    return [drafter for _, _, drafter in family], generic


def _registered(classes: dict[str, EngineClass], name: str | None, source: str | None) -> Registration | None:
    if not name:
        return None
    info = as_dict(classes.get(name))
    return Registration.model_validate({"architecture": name, "registered": bool(info), "module": info.get("module"),
                                        "class": info.get("class") or (name if info else None),
                                        "source": info.get("file") or source})


def _quantization(fact: EngineQuantizationFacts, method: str | None) -> EngineQuantization:
    methods = [str(m) for m in fact.get("methods") or []]
    conditional = as_dict(fact.get("conditional"))
    out = EngineQuantization(source=fact.get("source"), methods=methods, checkpoint_method=method, supported=None,
                             condition=None)
    if method:
        out["supported"] = method in methods or method in conditional
        out["condition"] = conditional.get(method)
    return out


def describe_engine(engine: EngineFacts, arch: Architecture) -> Engine:
    """One engine of the section from its raw facts (facts/host/engines.py, untyped on the wire)."""
    archs = as_dict(engine.get("architectures"))
    classes = as_dict(archs.get("classes"))
    spec = as_dict(engine.get("speculative"))
    algorithms = [str(a) for a in spec.get("algorithms") or []]
    upper = {a.upper() for a in algorithms}
    quantization = cast(EngineQuantizationFacts, as_dict(engine.get("quantization")))
    first = arch.architectures[0] if arch.architectures else None
    out = Engine(
        name=engine.get("name"), version=engine.get("version"), location=engine.get("location"),
        layout=engine.get("layout"), notes=list(engine.get("notes") or []),
        registered_architectures=len(classes) if classes else None,
        architecture=_registered(classes, first, archs.get("source")) if classes else None,
        text_architecture=None,
        speculative=EngineSpeculative(source=spec.get("source"), algorithms=algorithms, dflash="DFLASH" in upper,
                                      eagle3="EAGLE3" in upper) if spec else None,
        drafters=[], generic_drafters=[],
        quantization=dict(_quantization(quantization, arch.quantization.method if arch.quantization else None))
        if engine.get("quantization") else None,
        readiness=readiness_section(engine.get("readiness"), arch),
    )
    text_archs = arch.text_architectures or []
    if classes and text_archs and text_archs[0] != first:
        out.text_architecture = _registered(classes, text_archs[0], archs.get("source"))
    if classes:
        out.drafters, out.generic_drafters = _drafters(classes, family_tokens(arch))
    return out


def _engine_findings(item: Engine) -> list[Finding]:
    name, version = item.name, item.version
    out = []
    if item.layout != "read":
        out.append(make("info", "engine-version-only",
                           f"{name} {version}: its sources were not read ({'; '.join(item.notes) or 'layout unknown'})"
                           ": only the version is known", None))
        return out
    target = item.architecture
    if target and not target.registered:
        out.append(make("warning", "engine-architecture", f"{name} {version} does not register "
                           f"{target.architecture}", f"upgrade {name}, or serve it with another engine"))
    quant = item.quantization or {}
    if quant.get("checkpoint_method") and quant.get("supported") is False:
        out.append(make("warning", "engine-quantization", f"{name} {version} does not register the "
                           f"checkpoint's quantization method {quant['checkpoint_method']!r}",
                           f"upgrade {name}, or use a checkpoint in one of its methods"))
    out += [make("info", "engine-fact-missing", f"{name} {version}: {note}", None) for note in item.notes]
    return out


def analyze_engines(raw: object, arch: Architecture) -> tuple[Engines, list[Finding]]:
    """(section, findings). ``raw`` is the model task's ``engines`` facts as read (None: not probed)."""
    if not isinstance(raw, dict):
        return Engines(probed=False, searched=[], engines=[]), []
    facts = cast(EnginesFacts, raw)
    engines = [describe_engine(e, arch) for e in facts.get("engines") or [] if isinstance(e, dict)]
    searched = [str(name) for name in facts.get("searched") or []]
    section = Engines(probed=True, searched=searched, engines=engines)
    if not engines:
        return section, [make("info", "engines-none", "no serving engine (" + ", ".join(searched)
                                 + ") is installed for this interpreter", None)]
    findings: list[Finding] = []
    for item in engines:
        findings += _engine_findings(item)
    findings += drafter_findings(engines, arch)
    return section, findings
