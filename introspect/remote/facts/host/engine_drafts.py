"""Which MTP / NextN draft class an engine builds for a target, read from the engine's rewrite code.

Standard library only, Python 3.8+, never imports the engine. Both engines turn the
target's own config into its MTP head's config with a chain of ``if`` statements:

* SGLang ``srt/configs/model_config.py``: ``if is_draft_model and
  self.hf_config.architectures[0] == "DeepseekV3ForCausalLM": ...architectures[0] =
  "DeepseekV3ForCausalLMNextN"`` (one per family);
* vLLM ``config/speculative.py`` ``SpeculativeConfig.hf_config_override``: ``if
  hf_config.model_type == "deepseek_v3": hf_config.model_type = "deepseek_mtp"``, then
  ``if hf_config.model_type == "deepseek_mtp": hf_config.update({"architectures":
  ["DeepSeekMTPModel"]})``.

``trace`` follows that chain in source order from the target's architecture and
model_type: an ``if`` whose test names one of them is a hit; a ``model_type`` it
assigns joins the names for the ``if`` statements after it; every string that can
land in ``architectures`` (both arms of a conditional, a local dict's entry) is a
candidate draft class. The engine can serve it when it registers a candidate.
"""

from __future__ import annotations

import ast
from typing import Any, Dict, List, Optional, Set

from .engine_source import Module, SourceTree


def _slice(node: ast.Subscript) -> Any:
    inner: Any = node.slice
    return inner.value if type(inner).__name__ == "Index" else inner  # Python 3.8 wraps it in ast.Index


def _constants(node: Any) -> List[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _module_strings(tree: SourceTree, mod: Module, name: str) -> List[str]:
    """Strings of a module-level constant ``name`` (a tuple of architectures), here or where it is imported from."""
    if name in mod.assigns:
        return _constants(mod.assigns[name])
    source = mod.imports.get(name)
    if source is not None and source[1] is not None:
        other = tree.module(source[0])
        if other is not None and source[1] in other.assigns:
            return _constants(other.assigns[source[1]])
    return []


def _test_strings(tree: SourceTree, mod: Module, test: Any) -> Set[str]:
    found = set(_constants(test))
    for node in ast.walk(test):
        if isinstance(node, ast.Name) and node.id.isupper():
            found.update(_module_strings(tree, mod, node.id))
    return found


class Trace(object):
    """What a walk of the rewrite chain found for one target."""

    def __init__(self, keys: List[str]) -> None:
        self.keys = set(k for k in keys if k)
        self.sites: List[int] = []  # lines of the if statements that matched
        self.candidates: List[str] = []


def _local_values(body: List[Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                out.setdefault(node.targets[0].id, node.value)
    return out


def _arch_strings(value: Any, local: Dict[str, Any], keys: Set[str], depth: int = 0) -> List[str]:
    """Strings an ``architectures`` value can hold: constants, a local name's value, ``table[arch]``."""
    if depth > 4:
        return []
    if isinstance(value, ast.Name) and value.id in local:
        return _arch_strings(local[value.id], local, keys, depth + 1)
    if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name) and value.value.id in local:
        table = local[value.value.id]
        if isinstance(table, ast.Dict):
            pairs = [(k.value, v) for k, v in zip(table.keys, table.values) if isinstance(k, ast.Constant)]
            chosen = [v for k, v in pairs if k in keys] or [v for _, v in pairs]
            return [s for v in chosen for s in _arch_strings(v, local, keys, depth + 1)]
    if isinstance(value, (ast.List, ast.Tuple)):
        return [s for item in value.elts for s in _arch_strings(item, local, keys, depth + 1)]
    if isinstance(value, ast.IfExp):
        return _arch_strings(value.body, local, keys, depth + 1) + _arch_strings(value.orelse, local, keys, depth + 1)
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return [value.value]
    return []


def _architectures_values(node: Any) -> List[Any]:
    """The values assigned to ``architectures`` by one statement or dict display."""
    if isinstance(node, ast.Dict):
        return [v for k, v in zip(node.keys, node.values)
                if isinstance(k, ast.Constant) and k.value == "architectures"]
    if not isinstance(node, ast.Assign):
        return []
    out = []
    for target in node.targets:
        if isinstance(target, ast.Attribute) and target.attr == "architectures":
            out.append(node.value)  # x.architectures = ["Draft"]
        elif isinstance(target, ast.Subscript):
            base, key = target.value, _slice(target)
            if ((isinstance(base, ast.Attribute) and base.attr == "architectures")
                    or (isinstance(key, ast.Constant) and key.value == "architectures")):
                out.append(node.value)  # x.architectures[0] = "Draft"; overrides["architectures"] = [...]
    return out


def _collect(trace: Trace, body: List[Any]) -> None:
    local = _local_values(body)
    for stmt in body:
        for node in ast.walk(stmt):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str)
                    and any(isinstance(t, ast.Attribute) and t.attr == "model_type" for t in node.targets)):
                trace.keys.add(node.value.value)  # the next if statements test the new model_type
            for value in _architectures_values(node):
                for name in _arch_strings(value, local, trace.keys):
                    if name not in trace.candidates:
                        trace.candidates.append(name)


def _walk(tree: SourceTree, mod: Module, body: List[Any], trace: Trace, gate: Optional[str]) -> None:
    for stmt in body:
        if isinstance(stmt, ast.If):
            names = {n.id for n in ast.walk(stmt.test) if isinstance(n, ast.Name)}
            names |= {n.attr for n in ast.walk(stmt.test) if isinstance(n, ast.Attribute)}
            if (gate is None or gate in names) and trace.keys & _test_strings(tree, mod, stmt.test):
                trace.sites.append(stmt.lineno)
                _collect(trace, stmt.body)
                continue
            _walk(tree, mod, stmt.body, trace, gate)
            _walk(tree, mod, stmt.orelse, trace, gate)
        elif isinstance(stmt, (ast.With, ast.For, ast.While, ast.Try)):
            _walk(tree, mod, stmt.body, trace, gate)


def _function(mod: Module, name: str) -> Optional[ast.FunctionDef]:
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def trace(tree: SourceTree, mod: Module, keys: List[str], function: Optional[str] = None,
          gate: Optional[str] = None) -> Optional[Trace]:
    """The rewrite chain for ``keys`` (architecture, model_type) in ``mod``: in ``function`` when given
    (None when the module has no such function), else in every function of the module; an ``if``
    counts only when its test names ``gate`` (SGLang's ``is_draft_model``)."""
    found = Trace(keys)
    if function is not None:
        fn = _function(mod, function)
        if fn is None:
            return None
        _walk(tree, mod, fn.body, found, gate)
        return found
    functions = [node for node in ast.walk(mod.tree) if isinstance(node, ast.FunctionDef)]
    for node in sorted(functions, key=lambda fn: fn.lineno):  # source order: a rewrite feeds the ifs after it
        _walk(tree, mod, node.body, found, gate)
    return found


def first_gated_if(mod: Module, gate: str) -> Optional[int]:
    """The line of the first ``if`` testing ``gate``: where the rewrites are, cited when none matched."""
    lines = [node.lineno for node in ast.walk(mod.tree) if isinstance(node, ast.If)
             and any(isinstance(n, ast.Name) and n.id == gate for n in ast.walk(node.test))]
    return min(lines) if lines else None
