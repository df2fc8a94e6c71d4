"""Serving-engine facts read from the installed sources, without importing them.

Runs on the host under the target interpreter: standard library only, Python 3.8+.
Importing sglang or vllm pulls in torch and CUDA (tens of seconds, sometimes a
crash); here every fact comes from reading the engine's own ``.py`` files with
``ast``. ``importlib.util.find_spec`` of a top-level name locates a package
without executing it.

``collect_engines(deadline)`` returns ``({"searched": [...], "engines": [ENGINE, ...]}, errors)``::

    ENGINE = {"name": "sglang", "distribution": "sglang", "version": "0.5.23",
              "location": "/venv/lib/python3.11/site-packages/sglang",
              "layout": "read" | "version-only",
              "architectures": null | {"source": "srt/models/*.py (EntryClass)",
                                       "classes": {"KimiK25ForConditionalGeneration":
                                                   {"module": "sglang.srt.models.kimi_k25",
                                                    "file": "srt/models/kimi_k25.py"}}},
              "speculative": null | {"source": "srt/speculative/spec_info.py",
                                     "algorithms": ["DFLASH", "EAGLE", "EAGLE3", ...]},
              "quantization": null | {"source": "...", "methods": [...],
                                      "conditional": {"mxfp4": "is_cpu() or is_cuda()"}},
              "readiness": null | EngineReadiness (engine_readiness.py: per speculative method,
                                  whether the model's class provides what the engine calls at start),
              "notes": ["speculative: no SpeculativeAlgorithm in srt/speculative/spec_info.py", ...]}

A layout this module does not know (a future engine version) leaves the fact
null with a note; it never raises. ``file`` and ``source`` paths are relative to
``location``.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ...contract import ErrorRecord, error_record
from .engine_readiness import engine_readiness, model_targets
from .engine_source import parse, read_text

PROBE = "engines"

# import name -> distribution name; the order is the report's.
ENGINES = (("sglang", "sglang"), ("vllm", "vllm"), ("tensorrt_llm", "tensorrt-llm"), ("lmdeploy", "lmdeploy"))
MAX_MODEL_FILES = 2000
DEFAULT_SECONDS = 20.0

_ENTRY = re.compile(r"^EntryClass\s*[+]?=", re.M)


def _names(node: Any) -> List[str]:
    """Class names in ``X``, ``[X, Y]``, ``(X,)``, ``[X] + [Y]``."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, (ast.List, ast.Tuple)):
        out = []  # type: List[str]
        for item in node.elts:
            out.extend(_names(item))
        return out
    if isinstance(node, ast.BinOp):
        return _names(node.left) + _names(node.right)
    return []


def _str_keys(node: Any) -> List[str]:
    if not isinstance(node, ast.Dict):
        return []
    return [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]


# ------------------------------------------------------------------------ sglang


def _entry_classes(text: str) -> Optional[List[str]]:
    """The names a module's ``EntryClass`` holds; None when it defines none.

    Only the text from the first ``EntryClass =`` on is parsed (it closes the module
    in every SGLang model file); the whole file only when that tail does not parse.
    """
    found = _ENTRY.search(text)
    if found is None:
        return None
    tree = parse(text[found.start():]) or parse(text)
    if tree is None:
        return None
    names = []  # type: List[str]
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(_is_entry(t) for t in node.targets):
            names = _names(node.value)
        elif isinstance(node, ast.AugAssign) and _is_entry(node.target):
            names.extend(_names(node.value))
    return names


def _is_entry(target: Any) -> bool:
    return isinstance(target, ast.Name) and target.id == "EntryClass"


def sglang_architectures(root: str, deadline: float) -> Tuple[Optional[Dict[str, Any]], List[str]]:
    """Its ModelRegistry imports every non-package module of srt/models and keys each
    ``EntryClass`` entry by its class name (sglang/srt/models/registry.py)."""
    models = os.path.join(root, "srt", "models")
    if not os.path.isdir(models):
        return None, ["architectures: no srt/models directory"]
    classes = {}  # type: Dict[str, Dict[str, str]]
    notes = []  # type: List[str]
    files = sorted(f for f in os.listdir(models) if f.endswith(".py") and f != "__init__.py")
    for name in files[:MAX_MODEL_FILES]:
        if time.time() > deadline:
            notes.append("architectures: stopped at the deadline after %d files" % len(classes))
            break
        text = read_text(os.path.join(models, name))
        if text is None or "EntryClass" not in text:
            continue
        stem = name[:-3]
        for cls in _entry_classes(text) or []:
            classes.setdefault(cls, {"module": "sglang.srt.models." + stem, "file": "srt/models/" + name})
    if not classes:
        return None, notes + ["architectures: no EntryClass found in srt/models/*.py"]
    return {"source": "srt/models/*.py (EntryClass)", "classes": classes}, notes


def _enum_members(tree: ast.Module, class_name: str) -> Optional[List[str]]:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            out = []  # type: List[str]
            for item in node.body:
                if isinstance(item, ast.Assign):
                    out.extend(t.id for t in item.targets if isinstance(t, ast.Name) and t.id.isupper())
            return [m for m in out if m != "NONE"]
    return None


def sglang_speculative(root: str) -> Tuple[Optional[Dict[str, Any]], List[str]]:
    rel = "srt/speculative/spec_info.py"
    text = read_text(os.path.join(root, *rel.split("/")))
    tree = parse(text) if text is not None else None
    members = _enum_members(tree, "SpeculativeAlgorithm") if tree is not None else None
    if not members:
        return None, ["speculative: no SpeculativeAlgorithm enum in %s" % rel]
    return {"source": rel, "algorithms": members}, []


def _dict_updates(tree: ast.Module, text: str, names: Tuple[str, ...]) -> Dict[str, str]:
    """Keys added by ``NAME.update({...})`` under a module-level ``if``: {key: condition}."""
    out = {}  # type: Dict[str, str]
    for node in tree.body:
        if not isinstance(node, ast.If):
            continue
        condition = ast.get_source_segment(text, node.test) or "?"
        for stmt in ast.walk(node):
            call = stmt.value if isinstance(stmt, ast.Expr) else None
            if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "update" and isinstance(call.func.value, ast.Name)
                    and call.func.value.id in names and call.args):
                for key in _str_keys(call.args[0]):
                    out.setdefault(key, condition)
    return out


def sglang_quantization(root: str) -> Tuple[Optional[Dict[str, Any]], List[str]]:
    rel = "srt/layers/quantization/__init__.py"
    text = read_text(os.path.join(root, *rel.split("/")))
    tree = parse(text) if text is not None else None
    if tree is None or text is None:
        return None, ["quantization: cannot read %s" % rel]
    wanted = ("BASE_QUANTIZATION_METHODS", "QUANTIZATION_METHODS")
    methods = []  # type: List[str]
    for node in tree.body:
        target, value = _assigned(node)
        if target in wanted:
            methods.extend(k for k in _str_keys(value) if k not in methods)
    if not methods:
        return None, ["quantization: no QUANTIZATION_METHODS dict in %s" % rel]
    conditional = dict((k, v) for k, v in _dict_updates(tree, text, wanted).items() if k not in methods)
    return {"source": rel, "methods": methods, "conditional": conditional}, []


def _assigned(node: Any) -> Tuple[Optional[str], Any]:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id, node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id, node.value
    return None, None


# -------------------------------------------------------------------------- vllm


def _module_assignments(tree: ast.Module) -> Dict[str, Any]:
    out = {}  # type: Dict[str, Any]
    for node in tree.body:
        target, value = _assigned(node)
        if target is not None and value is not None:
            out[target] = value
    return out


def vllm_architectures(root: str) -> Tuple[Optional[Dict[str, Any]], List[str]]:
    """``_*_MODELS = {"Arch": ("module", "Class")}`` tables of vllm/model_executor/models/registry.py;
    a relative module lives in vllm.model_executor.models."""
    rel = "model_executor/models/registry.py"
    text = read_text(os.path.join(root, *rel.split("/")))
    tree = parse(text) if text is not None else None
    if tree is None:
        return None, ["architectures: cannot read %s" % rel]
    classes = {}  # type: Dict[str, Dict[str, str]]
    for table, value in _module_assignments(tree).items():
        if not (table.startswith("_") and table.endswith("_MODELS")) or not isinstance(value, ast.Dict):
            continue
        for key, item in zip(value.keys, value.values):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                continue
            parts = [e.value for e in getattr(item, "elts", []) if isinstance(e, ast.Constant)]
            if len(parts) != 2 or not all(isinstance(p, str) for p in parts):
                continue  # a URL of an out-of-tree plugin, not an implementation
            module = parts[0] if "." in parts[0] else "vllm.model_executor.models." + parts[0]
            classes.setdefault(key.value, {"module": module, "class": parts[1], "table": table})
    if not classes:
        return None, ["architectures: no _*_MODELS tables in %s" % rel]
    return {"source": rel, "classes": classes}, []


def _literal_values(node: Any, scope: Dict[str, Any], depth: int = 0) -> List[str]:
    """Strings of ``Literal["a", OtherLiteral, ...]``, following names in the module."""
    if depth > 8:
        return []
    if isinstance(node, ast.Name) and node.id in scope:
        return _literal_values(scope[node.id], scope, depth + 1)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Subscript):
        inner = node.slice  # type: Any
        if type(inner).__name__ == "Index":  # Python 3.8 wraps the slice in ast.Index
            inner = inner.value
        items = inner.elts if isinstance(inner, ast.Tuple) else [inner]
        out = []  # type: List[str]
        for item in items:
            out.extend(v for v in _literal_values(item, scope, depth + 1) if v not in out)
        return out
    return []


def _literal_fact(root: str, rel: str, name: str, what: str) -> Tuple[Optional[Dict[str, Any]], List[str]]:
    text = read_text(os.path.join(root, *rel.split("/")))
    tree = parse(text) if text is not None else None
    scope = _module_assignments(tree) if tree is not None else {}
    values = _literal_values(scope[name], scope) if name in scope else []
    if not values:
        return None, ["%s: no %s Literal in %s" % (what, name, rel)]
    return {"source": rel, what: values}, []


def vllm_speculative(root: str) -> Tuple[Optional[Dict[str, Any]], List[str]]:
    return _literal_fact(root, "config/speculative.py", "SpeculativeMethod", "algorithms")


def vllm_quantization(root: str) -> Tuple[Optional[Dict[str, Any]], List[str]]:
    rel = "model_executor/layers/quantization/__init__.py"
    fact, notes = _literal_fact(root, rel, "QuantizationMethods", "methods")
    if fact is None:
        # Older releases (0.6 and before) keyed a QUANTIZATION_METHODS dict instead of a Literal.
        text = read_text(os.path.join(root, *rel.split("/")))
        tree = parse(text) if text is not None else None
        keys = _str_keys(_module_assignments(tree).get("QUANTIZATION_METHODS")) if tree is not None else []
        if keys:
            fact, notes = {"source": rel, "methods": keys}, []
    if fact is not None:
        fact["conditional"] = {}
    return fact, notes


# ------------------------------------------------------------------------- glue

Reader = Callable[[str, float], Tuple[Optional[Dict[str, Any]], List[str]]]

READERS = {
    "sglang": (("architectures", sglang_architectures), ("speculative", lambda r, d: sglang_speculative(r)),
               ("quantization", lambda r, d: sglang_quantization(r))),
    "vllm": (("architectures", lambda r, d: vllm_architectures(r)), ("speculative", lambda r, d: vllm_speculative(r)),
             ("quantization", lambda r, d: vllm_quantization(r))),
}  # type: Dict[str, Tuple[Tuple[str, Reader], ...]]


def _version(distribution: str) -> Optional[str]:
    try:
        import importlib.metadata as md
        return md.version(distribution)
    except Exception:  # not installed, or broken metadata of a half-removed package
        return None


def _location(name: str) -> Tuple[Optional[str], Optional[str]]:
    try:
        spec = importlib.util.find_spec(name)  # a top-level spec: nothing of the package runs
    except Exception as exc:
        return None, "%s: %s" % (type(exc).__name__, exc)
    if spec is None:
        return None, None
    paths = list(spec.submodule_search_locations or [])
    return (paths[0] if paths else os.path.dirname(spec.origin or "") or None), None


def describe_engine(name: str, distribution: str, deadline: float,
                    targets: Optional[Dict[str, Any]] = None) -> Optional[Dict[str, Any]]:
    """One engine's facts, or None when neither its package nor its distribution is there.
    ``targets``: the model's architectures (engine_readiness.model_targets), for its readiness."""
    version = _version(distribution)
    location, problem = _location(name)
    if version is None and location is None:
        return None
    engine = {"name": name, "distribution": distribution, "version": version, "location": location,
              "layout": "version-only", "architectures": None, "speculative": None, "quantization": None,
              "readiness": None, "notes": []}  # type: Dict[str, Any]
    if problem:
        engine["notes"].append("find_spec(%r) failed: %s" % (name, problem))
    readers = READERS.get(name)
    if location is None or readers is None:
        engine["notes"].append("installed sources not read for %s: %s" % (
            name, "its package directory was not found" if location is None else "layout not known"))
        return engine
    for key, reader in readers:
        try:
            engine[key], notes = reader(location, deadline)
        except Exception as exc:  # an unknown layout must cost this fact only
            engine[key], notes = None, ["%s: %s: %s" % (key, type(exc).__name__, exc)]
        engine["notes"].extend(notes)
    if any(engine[key] is not None for key, _ in readers):
        engine["layout"] = "read"
    if engine["architectures"] is not None and engine["speculative"] is not None:
        try:
            engine["readiness"], notes = engine_readiness(engine, targets, deadline)
        except Exception as exc:  # an unknown layout must cost this fact only
            notes = ["readiness: %s: %s" % (type(exc).__name__, exc)]
        engine["notes"].extend(notes)
    return engine


def collect_engines(deadline: Optional[float] = None, model_path: Optional[str] = None
                    ) -> Tuple[Dict[str, Any], List[ErrorRecord]]:
    """Facts of every serving engine installed for this interpreter, with each engine's speculative
    readiness for the model at ``model_path`` (its config.json) when given. Never raises."""
    end = deadline if deadline is not None else time.time() + DEFAULT_SECONDS
    try:
        targets = model_targets(model_path)
    except Exception:  # the files section reports an unreadable config.json
        targets = None
    facts = {"searched": [name for name, _ in ENGINES], "engines": []}  # type: Dict[str, Any]
    errors = []  # type: List[ErrorRecord]
    for name, distribution in ENGINES:
        try:
            engine = describe_engine(name, distribution, end, targets)
        except Exception as exc:
            errors.append(error_record("internal-error", "%s: %s: %s" % (name, type(exc).__name__, exc),
                                       probe=PROBE))
            continue
        if engine is not None:
            facts["engines"].append(engine)
    return facts, errors
