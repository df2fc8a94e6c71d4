"""Speculative readiness per engine, per method, for this model's class; and the drafters it cannot serve. Pure.

The raw facts (remote/facts/host/engine_readiness.py) carry, per installed engine, one
verdict per speculative method: whether the class the engine instantiates for
``architectures[0]`` provides what the engine calls on it at start (SGLang's
``set_eagle3_layers_to_capture`` / ``set_dflash_layers_to_capture`` hooks, vLLM's
``SupportsEagle3`` interface, the MTP / NextN class the engine rewrites the target to),
each with the engine line that requires it and the class line that provides it.

Here those verdicts become the ``readiness`` member of each engine, ``served_by``
answers "which engines can serve a drafter of kind K", and a drafter found beside the
model whose method no installed engine can serve for this class is an error (a warning
when another installed engine can).
"""

from __future__ import annotations

from typing import cast

from introspect.analysis.findings import Finding, make
from introspect.analysis.serving.shapes import ServedBy
from introspect.documents.profile_architecture import Architecture
from introspect.documents.profile_serving import (
    ClassSite,
    CodeSite,
    Engine,
    EngineReadiness,
    MethodReadiness,
    ReadinessCheck,
    Verdict,
)
from introspect.remote.contract import as_dict

VERDICTS = ("yes", "no", "unknown")
# The drafter kinds of architecture.speculative (analysis/architecture/speculative.py).
DRAFTER_KINDS = ("dflash", "eagle3", "eagle", "mtp")
_RANK = {"yes": 0, "unknown": 1, "no": 2}


def _code_site(value: object) -> CodeSite | None:
    item = as_dict(value)
    return CodeSite(file=item.get("file"), line=item.get("line"), text=item.get("text")) if item else None


def _class_site(value: object) -> ClassSite | None:
    item = as_dict(value)
    # ``class`` by its JSON name: a type checker reads the field's alias as the constructor's keyword.
    return ClassSite.model_validate({key: item.get(key) for key in ("file", "line", "class")}) if item else None


def _check(value: object) -> ReadinessCheck:
    item = as_dict(value)
    return ReadinessCheck(requires=str(item.get("requires") or "?"), verdict=_verdict(item.get("verdict")),
                          why=str(item.get("why") or ""), requirement=_code_site(item.get("requirement")),
                          provided_by=_class_site(item.get("provided_by")),
                          delegate=as_dict(item.get("delegate")) or None)


def _verdict(value: object) -> Verdict:
    return cast(Verdict, value) if value in VERDICTS else "unknown"


def _method(value: object, mtp_layers: int) -> MethodReadiness:
    item = as_dict(value)
    kind, verdict = str(item.get("kind") or "other"), _verdict(item.get("verdict"))
    note = None
    if kind == "mtp" and verdict == "yes" and mtp_layers == 0:
        # The engine builds the MTP head from the target checkpoint's own MTP layers
        # (SGLang num_nextn_predict_layers, vLLM n_predict in config/speculative.py).
        note = "the checkpoint has no MTP layers (mtp_layers 0): the MTP head must come from elsewhere"
    return MethodReadiness(method=str(item.get("method") or "?"), kind=kind,
                           aliases=[str(a) for a in item.get("aliases") or []], verdict=verdict,
                           why=str(item.get("why") or ""), requires=str(item.get("requires") or "?"),
                           requirement=_code_site(item.get("requirement")),
                           provided_by=_class_site(item.get("provided_by")),
                           checks=[_check(c) for c in item.get("checks") or []], note=note)


def readiness_section(raw: object, arch: Architecture) -> EngineReadiness | None:
    """The engine's ``readiness`` member from its raw facts as read (remote ``EngineReadiness``; None: not read)."""
    item = as_dict(raw)
    if not item:
        return None
    mtp_layers = arch.speculative.mtp_layers
    return EngineReadiness(architecture=item.get("architecture"), class_site=_class_site(item.get("class_site")),
                           files_parsed=item.get("files_parsed") if isinstance(item.get("files_parsed"), int) else None,
                           methods=[_method(m, mtp_layers) for m in item.get("methods") or []],
                           notes=[str(n) for n in item.get("notes") or []])


def best_for(readiness: EngineReadiness | None, kind: str) -> MethodReadiness | None:
    """The engine's method of drafter kind ``kind`` with the best verdict (yes, then unknown, then no)."""
    methods = [m for m in (readiness.methods if readiness is not None else []) if m.kind == kind]
    return min(methods, key=lambda m: _RANK[m.verdict]) if methods else None


def served_by(engines: list[Engine]) -> dict[str, list[ServedBy]]:
    """Per drafter kind: each read engine's verdict for its method of that kind."""
    out: dict[str, list[ServedBy]] = {}
    for kind in DRAFTER_KINDS:
        for engine in engines:
            method = best_for(engine.readiness, kind)
            if method is not None:
                out.setdefault(kind, []).append(ServedBy(engine=engine.name, version=engine.version,
                                                         method=method.method, verdict=method.verdict))
    return out


def cite(method: MethodReadiness) -> str:
    """``requires X (engine file:line): why`` of a method's deciding check, for findings and the report."""
    site = method.requirement
    where = f" ({site.file}:{site.line})" if site is not None and site.file else ""
    return f"requires {method.requires}{where}: {method.why}"


def drafter_findings(engines: list[Engine], arch: Architecture) -> list[Finding]:
    """A drafter beside the model of a method no installed engine serves for this class: an error;
    one that some installed engine cannot serve while another can (or may): a warning."""
    out: list[Finding] = []
    target = (arch.architectures or ["the model's class"])[0]
    for drafter in arch.speculative.drafters:
        kind = drafter.kind
        if kind not in DRAFTER_KINDS or drafter.error:
            continue
        verdicts = [(engine, best_for(engine.readiness, kind)) for engine in engines]
        judged = [(engine, method) for engine, method in verdicts if method is not None]
        refused = [(engine, method) for engine, method in judged if method.verdict == "no"]
        if not refused:
            continue
        reasons = "; ".join(f"{e.name} {e.version} {m.method}: no, {cite(m)}" for e, m in refused)
        if len(refused) == len(judged):
            out.append(make("error", "drafter-unservable", f"the {kind} drafter {drafter.path} cannot be "
                            f"served for {target} by any installed engine: {reasons}",
                            f"# serve {target} with an engine version whose model class provides what {kind} "
                            "requires, or train a drafter of a method the Engines section marks yes"))
        else:
            out.append(make("warning", "drafter-engine-unservable", f"the {kind} drafter {drafter.path} "
                            f"cannot be served for {target} by {reasons}",
                            "# serve it with the engine the Engines section marks yes for this method"))
    return out
