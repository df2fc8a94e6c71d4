"""Per speculative method: can this engine serve a drafter for THIS model's class? Read, never imported.

Standard library only, Python 3.8+. An engine's enum lists every method it knows, but
the server raises at start when the target class lacks what the method calls on it
(engine_rules.py lists those requirements with their sources). For the class the
engine registers for the model's ``architectures[0]``, each method gets
``yes`` / ``no`` / ``unknown`` with the engine line that states each requirement
and the class line that provides it (or why not). A method no rule covers, a
requirement line that is not where the rules look, or a base class that cannot be
resolved is "unknown", never "yes".

Bounded: at most ``MAX_PARSED`` engine files are parsed per engine, each once, and
the probe's deadline stops the rest (their methods become "unknown").
"""

from __future__ import annotations

import ast
import os
from typing import Any, Dict, List, Optional, Tuple

from ... import readers
from ...sections import EngineReadiness, MethodReadiness, ReadinessCheck
from . import engine_drafts
from .engine_hooks import Sites, base_check, method_check
from .engine_rules import RULES, SGLANG_ALIASES, VLLM_MTP_TYPES
from .engine_source import Budget, Found, SourceTree

MAX_PARSED = 80


def model_targets(model_path: Optional[str]) -> Optional[Dict[str, Any]]:
    """The target's architectures and model_type from config.json: what the engines instantiate and
    rewrite (a wrapper's text model counts only through the wrapper's hooks, engine_hooks.py)."""
    if not model_path:
        return None
    config, _err = readers.read_json_capped(os.path.join(model_path, "config.json"))
    if not isinstance(config, dict):
        return None
    archs = config.get("architectures")
    model_type = config.get("model_type")
    return {"architectures": [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else [],
            "model_type": model_type if isinstance(model_type, str) else None}


class _Context(object):
    def __init__(self, engine: Dict[str, Any], tree: SourceTree, targets: Dict[str, Any]) -> None:
        self.name, self.version = engine.get("name"), engine.get("version")
        self.classes = (engine.get("architectures") or {}).get("classes") or {}
        self.tree, self.sites = tree, Sites(tree.root)
        self.checks, self.methods, self.free = RULES[str(engine.get("name"))]
        archs = targets.get("architectures") or []
        self.arch: Optional[str] = archs[0] if archs else None
        self.model_type = targets.get("model_type")
        self.found: Optional[Found] = None
        self.class_why = ""


def _check(requires: str, verdict: str, why: str, requirement: Any = None, provided: Any = None,
           delegate: Any = None) -> ReadinessCheck:
    return {"requires": requires, "requirement": requirement, "verdict": verdict, "provided_by": provided,
            "delegate": delegate, "why": why}


def _class_check(ctx: _Context, rule: Dict[str, Any], method: str) -> ReadinessCheck:
    requires = " or ".join(rule["hooks"]) if "hooks" in rule else rule["base"][1]
    site = ctx.sites.find(rule["files"], rule["pattern"])
    if site is None:
        return _check(requires, "unknown", "the engine's check of %s was not found in %s: a layout this reader "
                      "does not know" % (requires, ", ".join(rule["files"])))
    why = ""
    if "trigger" in rule:
        trigger = ctx.sites.find(rule["trigger"][0], rule["trigger"][1].replace("{method}", method))
        if trigger is None:
            return _check(requires, "unknown", "where %s turns on the auxiliary hidden states %s checks was not "
                          "found" % (method, requires), site)
        why = "; %s turns it on (%s:%d)" % (method, trigger["file"], trigger["line"])
    if ctx.found is None:
        return _check(requires, "unknown", "the class was not found: %s" % ctx.class_why, site)
    if "hooks" in rule:
        verdict, provided, delegate, text = method_check(ctx.tree, ctx.found, list(rule["hooks"]))
    else:
        verdict, provided, delegate, text = base_check(ctx.tree, ctx.found, rule["base"][0], rule["base"][1])
    return _check(requires, verdict, text + why, site, _class_site(provided), delegate)


def _class_site(where: Optional[Dict[str, Any]]) -> Any:
    return None if where is None else {"file": where["file"], "line": where["line"], "class": where["class"]}


def _draft_check(ctx: _Context, rule: Dict[str, Any]) -> ReadinessCheck:
    rel, function, gate = rule["draft"]
    mod = ctx.tree.module_of_file(rel)
    found = engine_drafts.trace(ctx.tree, mod, [str(ctx.arch), str(ctx.model_type or "")], function, gate) \
        if mod is not None else None
    if mod is None or found is None:
        return _check("draft architecture", "unknown", "%s%s was not read: a layout this reader does not know" % (
            rel, " (%s)" % function if function else ""))
    if not found.sites:
        line = engine_drafts.first_gated_if(mod, gate) if gate else _def_line(mod, function)
        return _check("draft architecture", "no", "no rewrite of %s%s to an MTP / NextN class there" % (
                      ctx.arch, " (model_type %s)" % ctx.model_type if ctx.model_type else ""),
                      {"file": rel, "line": line, "text": mod.line(line) if line else None})
    site = {"file": rel, "line": found.sites[0], "text": mod.line(found.sites[0])}
    registered = [name for name in found.candidates if name in ctx.classes]
    if not registered:
        why = ("rewrites %s to %s, which %s %s does not register" % (ctx.arch, " or ".join(found.candidates),
                                                                     ctx.name, ctx.version)
               if found.candidates else "a rewrite for %s is there but no draft class was read from it" % ctx.arch)
        return _check("draft architecture", "no" if found.candidates else "unknown", why, site)
    info = ctx.classes[registered[0]]
    got, _why = ctx.tree.find_class(str(info.get("module")), str(info.get("class") or registered[0]))
    provided = {"file": got[0].rel, "line": got[1].lineno, "class": got[1].name} if got else None
    return _check("draft architecture", "yes", "rewrites %s to %s (registered)" % (
        ctx.arch, " or ".join(registered)), site, provided)


def _def_line(mod: Any, function: Optional[str]) -> Optional[int]:
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.FunctionDef) and node.name == function:
            return node.lineno
    return None


def _decide(method: str, kind: str, checks: List[ReadinessCheck], aliases: List[str]) -> MethodReadiness:
    order = [c for c in checks if c["verdict"] == "no"] or [c for c in checks if c["verdict"] == "unknown"] or checks
    deciding = order[0]
    return {"method": method, "kind": kind, "aliases": aliases, "verdict": deciding["verdict"],
            "why": deciding["why"], "requires": deciding["requires"], "requirement": deciding["requirement"],
            "provided_by": deciding["provided_by"], "checks": checks}


def _method(ctx: _Context, method: str, aliases: List[str]) -> MethodReadiness:
    rule = ctx.methods.get(method)
    if rule is None:
        return _decide(method, "other", [_check("?", "unknown", "no rule for %s in this reader: what %s %s requires "
                                               "of the model class is not known" % (method, ctx.name, ctx.version))],
                       aliases)
    kind, names = rule
    if ctx.arch is None or ctx.arch not in ctx.classes:
        return _decide(method, kind, [_check("registered architecture", "no", "%s %s does not register %s" % (
            ctx.name, ctx.version, ctx.arch or "the model (config.json names no architecture)"))], aliases)
    if not names:
        files, pattern = ctx.free[method]
        site = ctx.sites.find(files, pattern)
        verdict, why = ("yes", "asks nothing of the model class") if site else (
            "unknown", "its code path was not found in %s" % ", ".join(files))
        return _decide(method, kind, [_check("nothing", verdict, why, site)], aliases)
    checks = []
    for name in names:
        rule_of = ctx.checks[name]
        checks.append(_draft_check(ctx, rule_of) if "draft" in rule_of else _class_check(ctx, rule_of, method))
    return _decide(method, kind, checks, aliases)


def _strings_of(tree: SourceTree, rel: str, name: str) -> List[str]:
    mod = tree.module_of_file(rel)
    value = mod.assigns.get(name) if mod is not None else None
    return [n.value for n in ast.walk(value) if isinstance(n, ast.Constant) and isinstance(n.value, str)] \
        if value is not None else []


def method_names(engine: Dict[str, Any], tree: SourceTree) -> List[Tuple[str, List[str]]]:
    """The engine's methods (its enum / Literal), with aliases: SGLang's NEXTN, vLLM's per-family MTP names."""
    algorithms = [str(a) for a in (engine.get("speculative") or {}).get("algorithms") or []]
    if engine.get("name") == "sglang":
        extra = [a for a in _strings_of(tree, *SGLANG_ALIASES) if a not in algorithms]
        return [(a, []) for a in algorithms + extra]
    mtp = set(_strings_of(tree, *VLLM_MTP_TYPES))
    out: List[Tuple[str, List[str]]] = []
    for name in algorithms:
        if name in mtp:
            if not any(m == "mtp" for m, _ in out):
                out.append(("mtp", sorted(m for m in mtp if m != "mtp" and m in algorithms)))
        else:
            out.append((name, []))
    return out


def engine_readiness(engine: Dict[str, Any], targets: Optional[Dict[str, Any]], deadline: float,
                     parsed: Optional[Dict[str, Any]] = None) -> Tuple[Optional[EngineReadiness], List[str]]:
    """The readiness of ``engine`` (describe_engine's facts) for ``targets``; (None, notes) when not read.
    ``parsed``: a cache of parsed modules to share between calls for one engine (the tests' many targets)."""
    name, location = str(engine.get("name")), engine.get("location")
    if name not in RULES or not location or not targets:
        return None, [] if not targets else ["readiness: no rules for %s" % name]
    tree = SourceTree(location, name, deadline, MAX_PARSED, parsed)
    ctx = _Context(engine, tree, targets)
    out: EngineReadiness = {"architecture": ctx.arch, "class_site": None, "files_parsed": 0, "methods": [],
                            "notes": []}
    try:
        names = method_names(engine, tree)
    except Budget:  # the enum's own names still get a verdict each (unknown)
        names = [(str(a), []) for a in (engine.get("speculative") or {}).get("algorithms") or []]
    try:
        info = ctx.classes.get(ctx.arch) if ctx.arch else None
        if info:
            ctx.found, ctx.class_why = tree.find_class(str(info.get("module")), str(info.get("class") or ctx.arch))
            if ctx.found is not None:
                out["class_site"] = {"file": ctx.found[0].rel, "line": ctx.found[1].lineno, "class": ctx.found[1].name}
        for method, aliases in names:
            out["methods"].append(_method(ctx, method, aliases))
    except Budget as exc:
        done = {m["method"] for m in out["methods"]}
        for method, aliases in names:
            if method not in done:
                kind = ctx.methods[method][0] if method in ctx.methods else "other"
                out["methods"].append(_decide(method, kind, [_check("?", "unknown", str(exc))], aliases))
        out["notes"].append("readiness: %s" % exc)
    out["files_parsed"] = tree.parsed
    out["notes"].extend("readiness: %s did not parse under this Python" % rel for rel in tree.unparsed[:5])
    return out, []
