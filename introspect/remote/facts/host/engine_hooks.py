"""Does a model class provide what an engine calls on it at start? Read statically.

Standard library only, Python 3.8+. Three kinds of check, each answering
``(verdict, provided_by, delegate, why)`` with verdict "yes" / "no" / "unknown":

* ``method_check``: the class or a base defines one of the hook names (SGLang's
  ``hasattr(model, "set_eagle3_layers_to_capture")``). A hook that only hands the
  call to an attribute (``self.language_model.set_eagle3_layers_to_capture(ids)``,
  the multimodal wrappers) is followed to that attribute's class, built in the
  class's ``__init__`` (``self.language_model = DeepseekV3ForCausalLM(...)``): the
  wrapper is ready only when the wrapped model is.
* ``base_check``: the class inherits an engine interface (vLLM's ``SupportsEagle3``,
  tested with ``isinstance`` at start).
* ``find_site``: the line of the engine that states the requirement, found by a
  pattern in named files, so the cited line is the installed version's own.
"""

from __future__ import annotations

import ast
import fnmatch
import os
import re
from typing import Any, Dict, List, Optional, Tuple

from .engine_source import Found, SourceTree, member, read_text

MAX_DELEGATION = 3
MAX_SITE_FILES = 400

Where = Dict[str, Any]
Result = Tuple[str, Optional[Where], Optional[Where], str]


def _chain(order: List[Found]) -> str:
    names = [cls.name for _, cls in order]
    return ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")


def _where(found: Found, node: Any = None) -> Where:
    mod, cls = found
    return {"file": mod.rel, "line": (node or cls).lineno, "class": cls.name}


class Sites(object):
    """Requirement lines of one engine, read as text (no parse), each file once."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.texts: Dict[str, Optional[List[str]]] = {}

    def _files(self, spec: str) -> List[str]:
        if "*" not in spec:
            return [spec]
        folder, pattern = spec.rsplit("/", 1)
        try:
            names = sorted(os.listdir(os.path.join(self.root, *folder.split("/"))))
        except OSError:
            return []
        return [folder + "/" + name for name in names if fnmatch.fnmatch(name, pattern)]

    def _lines(self, rel: str) -> Optional[List[str]]:
        if rel not in self.texts:
            if len(self.texts) >= MAX_SITE_FILES:
                return None
            text = read_text(os.path.join(self.root, *rel.split("/")))
            self.texts[rel] = text.splitlines() if text is not None else None
        return self.texts[rel]

    def find(self, files: Tuple[str, ...], pattern: str) -> Optional[Where]:
        """The first line matching ``pattern`` in ``files`` (in order; ``dir/*.py`` globs), or None."""
        regex = re.compile(pattern)
        for spec in files:
            for rel in self._files(spec):
                for number, line in enumerate(self._lines(rel) or [], 1):
                    if regex.search(line):
                        return {"file": rel, "line": number, "text": line.strip()[:200]}
        return None


def _delegate_attr(node: Any, hooks: List[str]) -> Optional[Tuple[str, str]]:
    """``(attribute, hook)`` when the hook's body calls ``self.<attribute>.<hook>(...)``."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    for call in ast.walk(node):
        func = call.func if isinstance(call, ast.Call) else None
        if (isinstance(func, ast.Attribute) and func.attr in hooks and isinstance(func.value, ast.Attribute)
                and isinstance(func.value.value, ast.Name) and func.value.value.id == "self"):
            return func.value.attr, func.attr
    return None


def _has_fallback(node: Any, attr: str, hook: str) -> bool:
    """``if hasattr(self.<attr>, "<hook>"): ... else: <something else>``: the hook works without the
    wrapped model's (Qwen3-VL sets ``self.model.layers_to_capture`` instead)."""
    for stmt in ast.walk(node):
        test = stmt.test if isinstance(stmt, ast.If) and stmt.orelse else None
        if (isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "hasattr"
                and len(test.args) == 2 and isinstance(test.args[0], ast.Attribute) and test.args[0].attr == attr
                and isinstance(test.args[1], ast.Constant) and test.args[1].value == hook):
            return True
    return False


def _constructors(value: Any) -> List[Any]:
    if isinstance(value, ast.Call):
        return [value.func]
    if isinstance(value, ast.IfExp):
        return _constructors(value.body) + _constructors(value.orelse)
    return []


def _assigned_in(fn: Any, name: str) -> Optional[Any]:
    """The value last assigned to the local ``name`` in ``fn`` (``cls = SomeModel``), if any."""
    value = None
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            value = node.value
    return value


def _default(fn: Any, name: str) -> Optional[Any]:
    args = fn.args.args[len(fn.args.args) - len(fn.args.defaults):]
    pairs = list(zip(args, fn.args.defaults)) + list(zip(fn.args.kwonlyargs, fn.args.kw_defaults))
    return next((value for arg, value in pairs if arg.arg == name and value is not None), None)


def _passed_down(tree: SourceTree, derived: List[Found], name: str) -> Optional[Found]:
    """The class a subclass passes as ``name=`` to its base's ``__init__`` (``super().__init__(model_cls=X)``)."""
    for mod, cls in derived:
        for call in ast.walk(cls):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "__init__":
                for keyword in call.keywords:
                    if keyword.arg == name:
                        got, _ = tree.resolve(mod, keyword.value)
                        if got is not None:
                            return got
    return None


def _callable_class(tree: SourceTree, order: List[Found], index: int, fn: Any, func: Any) -> Tuple[Optional[Found], str]:
    """The class a constructor expression in ``fn`` of ``order[index]`` names: a class, a class attribute
    (``self.body_cls``), a local (``cls = X``), or a parameter (a subclass's argument, else its default)."""
    mod = order[index][0]
    got, why = tree.resolve(mod, func)
    if got is not None:
        return got, ""
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("self", "cls"):
        for owner_mod, owner in order:  # the most derived class's attribute wins
            node = member(owner, func.attr)
            if isinstance(node, ast.Assign):
                return tree.resolve(owner_mod, node.value)
    if isinstance(func, ast.Name):
        value = _assigned_in(fn, func.id)
        if value is not None:
            return tree.resolve(mod, value)
        passed = _passed_down(tree, order[:index], func.id)
        if passed is not None:
            return passed, ""
        default = _default(fn, func.id)
        if default is not None:
            return tree.resolve(mod, default)
    return None, why


def _assigns_attr(node: Any, attr: str) -> bool:
    if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
        return False
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return any(isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name)
               and t.value.id == "self" for t in targets)


def attribute_class(tree: SourceTree, order: List[Found], attr: str) -> Tuple[Optional[Found], str]:
    """The class ``self.<attr>`` is built from in a method of the class or a base (``__init__``)."""
    why = "no self.%s = SomeClass(...) in %s" % (attr, _chain(order))
    for index, (_mod, cls) in enumerate(order):
        for fn in cls.body:
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if not _assigns_attr(node, attr):
                    continue
                for func in _constructors(getattr(node, "value", None)):
                    got, reason = _callable_class(tree, order, index, fn, func)
                    if got is not None:
                        return got, ""
                    why = "self.%s is built by %s" % (attr, reason or "a call not resolved")
    return None, why


def method_check(tree: SourceTree, found: Found, hooks: List[str], depth: int = 0) -> Result:
    """Whether ``found`` (or a base) defines one of ``hooks``, following a hook that delegates."""
    order, unresolved = tree.mro(found)
    for hook in hooks:
        for owner in order:
            node = member(owner[1], hook)
            if node is not None:
                return _delegated(tree, order, owner, node, hook, depth)
    names, chain = " or ".join(hooks), _chain(order)
    if unresolved:
        return "unknown", None, None, "%s not found in %s, and bases were not resolved: %s" % (
            names, chain, "; ".join(unresolved[:3]))
    return "no", None, None, "%s defines no %s (classes searched: %s)" % (found[1].name, names, chain)


def _delegated(tree: SourceTree, order: List[Found], owner: Found, node: Any, hook: str, depth: int) -> Result:
    where = _where(owner, node)
    own = "%s.%s (%s:%d)" % (owner[1].name, hook, owner[0].rel, node.lineno)
    handed = _delegate_attr(node, [hook])
    if handed is None:
        return "yes", where, None, "defines %s" % own
    attr = handed[0]
    if _has_fallback(node, attr, hook):
        return "yes", where, None, "defines %s (it hands the call to self.%s when that has it, else does the " \
            "work itself)" % (own, attr)
    target, why = attribute_class(tree, order, attr)
    if target is None or depth >= MAX_DELEGATION:
        return "unknown", where, None, "%s hands the call to self.%s, whose class was not resolved (%s)" % (
            own, attr, why or "too deep")
    verdict, inner, _, inner_why = method_check(tree, target, [hook], depth + 1)
    delegate = dict(_where(target), attribute=attr)
    if inner is not None:
        delegate.update(file=inner["file"], line=inner["line"], defined_in=inner["class"])
    return verdict, where, delegate, "%s hands the call to self.%s (%s): %s" % (own, attr, target[1].name, inner_why)


def base_check(tree: SourceTree, found: Found, base_file: str, base_name: str) -> Result:
    """Whether ``found`` inherits ``base_name`` defined in ``base_file`` (vLLM's interfaces)."""
    home = tree.module_of_file(base_file)
    if home is None or base_name not in home.classes:
        return "unknown", None, None, "%s defines no class %s in this version" % (base_file, base_name)
    order, unresolved = tree.mro(found)
    for mod, cls in order:
        for base in cls.bases:
            got, _ = tree.resolve(mod, base)
            if got is not None and got[0].rel == base_file and got[1].name == base_name:
                return "yes", _where((mod, cls)), None, "%s inherits %s (%s:%d)" % (
                    cls.name, base_name, base_file, home.classes[base_name].lineno)
    chain = _chain(order)
    if unresolved:
        return "unknown", None, None, "%s not among the bases of %s; not resolved: %s" % (
            base_name, chain, "; ".join(unresolved[:3]))
    return "no", None, None, "%s does not inherit %s (%s:%d); classes searched: %s" % (
        found[1].name, base_name, base_file, home.classes[base_name].lineno, chain)
