"""Static resolution inside an installed engine's package: modules, classes, bases, members.

Standard library only, Python 3.8+. Nothing of the engine is imported: a dotted
module name inside the package (``sglang.srt.models.llama``) maps to its ``.py``
file under the package directory, which is parsed with ``ast`` once per run.
A class is found where a module defines it, or followed through the module's
``from X import Name`` (absolute or relative) and ``Alias = Name`` statements.
Its bases are resolved the same way, so a method inherited from a class in
another module of the engine is found where Python would find it.

Names from outside the package (``torch.nn.Module``, ``typing.Protocol``) are
"external": they cannot define an engine's hooks. A name inside the package
that cannot be resolved (a file that does not parse, a base built by a call)
is "unresolved", and a verdict that depends on it is unknown, never yes.

Every read counts against a file cap and the probe's deadline (``Budget``).
"""

from __future__ import annotations

import ast
import os
import time
from typing import Any, Dict, List, Optional, Tuple

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 12  # re-export chains and base classes followed at most this deep


class Budget(Exception):
    """The file cap or the deadline ran out; the message says which."""


class Module(object):
    """One parsed module: its classes, module-level imports and assignments."""

    def __init__(self, name: str, rel: str, text: str, tree: ast.Module, is_package: bool) -> None:
        self.name, self.rel, self.tree, self.is_package = name, rel, tree, is_package
        self.lines = text.splitlines()
        self.classes: Dict[str, ast.ClassDef] = {}
        self.imports: Dict[str, Tuple[str, Optional[str]]] = {}  # local -> (module, attr)
        self.assigns: Dict[str, Any] = {}
        for node in _top_level(tree.body):
            self._index(node)
        top = dict(self.imports)
        for node in ast.walk(tree):  # imports inside functions too (a lazy import in __init__) ...
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self._index(node)
        self.imports.update(top)  # ... though a module-level binding of the same name wins

    def _index(self, node: Any) -> None:
        if isinstance(node, ast.ClassDef):
            self.classes.setdefault(node.name, node)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.imports[alias.asname] = (alias.name, None)
                else:
                    top = alias.name.split(".")[0]
                    self.imports[top] = (top, None)
        elif isinstance(node, ast.ImportFrom):
            base = self.absolute(node.module, node.level)
            for alias in node.names:
                self.imports[alias.asname or alias.name] = (base, alias.name)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            self.assigns.setdefault(node.targets[0].id, node.value)

    def absolute(self, module: Optional[str], level: int) -> str:
        """The dotted name ``from <level dots><module> import`` refers to, seen from this module."""
        if not level:
            return module or ""
        parts = self.name.split(".")
        if not self.is_package:
            parts = parts[:-1]
        parts = parts[:len(parts) - (level - 1)] if level > 1 else parts
        return ".".join(parts + ([module] if module else []))

    def line(self, number: int) -> str:
        text = self.lines[number - 1].strip() if 0 < number <= len(self.lines) else ""
        return text[:200]


def _top_level(body: List[Any]) -> List[Any]:
    """Module-level statements, including those under ``if``/``try`` (TYPE_CHECKING, optional imports)."""
    out: List[Any] = []
    for node in body:
        out.append(node)
        if isinstance(node, ast.If):
            out.extend(_top_level(node.body) + _top_level(node.orelse))
        elif isinstance(node, ast.Try):
            out.extend(_top_level(node.body))
            for handler in node.handlers:
                out.extend(_top_level(handler.body))
    return out


Found = Tuple[Module, ast.ClassDef]


class SourceTree(object):
    """The parsed modules of one engine package (``root`` is its directory, ``package`` its name)."""

    def __init__(self, root: str, package: str, deadline: float, max_files: int,
                 cache: Optional[Dict[str, Optional[Module]]] = None) -> None:
        self.root, self.package, self.deadline, self.max_files = root, package, deadline, max_files
        # Parsed modules by dotted name; a caller reading several targets of one engine may share it.
        self.cache: Dict[str, Optional[Module]] = cache if cache is not None else {}
        self.parsed = 0
        self.unparsed: List[str] = []  # files that exist but did not read or parse

    def inside(self, dotted: str) -> bool:
        return dotted == self.package or dotted.startswith(self.package + ".")

    def _path(self, dotted: str) -> Tuple[Optional[str], bool]:
        parts = dotted.split(".")[1:]
        base = os.path.join(self.root, *parts) if parts else self.root
        if os.path.isfile(base + ".py"):
            return base + ".py", False
        if os.path.isfile(os.path.join(base, "__init__.py")):
            return os.path.join(base, "__init__.py"), True
        return None, False

    def module(self, dotted: str) -> Optional[Module]:
        """The parsed module ``dotted`` of this package; None outside it or without a file."""
        if dotted in self.cache:
            return self.cache[dotted]
        if not self.inside(dotted):
            return None
        path, is_package = self._path(dotted)
        if path is None:
            self.cache[dotted] = None
            return None
        if self.parsed >= self.max_files:
            raise Budget("stopped after parsing %d files (the cap)" % self.parsed)
        if time.time() > self.deadline:
            raise Budget("stopped at the probe's deadline after parsing %d files" % self.parsed)
        self.parsed += 1
        self.cache[dotted] = None  # a re-entrant lookup while this one parses finds nothing, not a loop
        rel = os.path.relpath(path, self.root).replace(os.sep, "/")
        text = read_text(path)
        tree = parse(text) if text is not None else None
        if text is None or tree is None:
            self.unparsed.append(rel)
            return None
        self.cache[dotted] = Module(dotted, rel, text, tree, is_package)
        return self.cache[dotted]

    def module_of_file(self, rel: str) -> Optional[Module]:
        stem = rel[:-3] if rel.endswith(".py") else rel
        stem = stem[:-len("/__init__")] if stem.endswith("/__init__") else stem
        return self.module(".".join([self.package] + [p for p in stem.split("/") if p]))

    def find_class(self, dotted: str, name: str, depth: int = 0) -> Tuple[Optional[Found], str]:
        """(the module and class ``dotted.name`` is, or None; why not: "external ..." / "unresolved ...")."""
        if not self.inside(dotted):
            return None, "external %s.%s" % (dotted, name)
        mod = self.module(dotted)
        if mod is None or depth > MAX_DEPTH:
            return None, "unresolved %s.%s (%s)" % (dotted, name, "no readable source" if mod is None else "too deep")
        if name in mod.classes:
            return (mod, mod.classes[name]), ""
        if name in mod.imports:
            source, attr = mod.imports[name]
            if attr is None:
                return None, "unresolved %s.%s (a module, not a class)" % (dotted, name)
            return self.find_class(source, attr, depth + 1)
        value = mod.assigns.get(name)
        if isinstance(value, (ast.Name, ast.Attribute)):
            return self.resolve(mod, value, depth + 1)
        if name in ("object",):
            return None, "external builtins.object"
        return None, "unresolved %s.%s (not defined or imported there)" % (dotted, name)

    def resolve(self, mod: Module, node: Any, depth: int = 0) -> Tuple[Optional[Found], str]:
        """The class an expression in ``mod`` names (a base, a constructor): ``Name`` or ``module.Name``."""
        if isinstance(node, ast.Name):
            return self.find_class(mod.name, node.id, depth)
        parts = _dotted(node)
        if parts and parts[0] in mod.imports:  # module.Class, package.module.Class, torch.nn.Module
            source, attr = mod.imports[parts[0]]
            target = ".".join([source] + ([attr] if attr else []) + parts[1:-1])
            return self.find_class(target, parts[-1], depth)
        if parts:
            return None, "unresolved %s in %s" % (".".join(parts), mod.rel)
        if isinstance(node, ast.Subscript):  # Generic[T], Protocol[T]: typing, outside the engine
            return None, "external %s" % type(node).__name__
        return None, "unresolved %s in %s" % (type(node).__name__, mod.rel)

    def mro(self, found: Found) -> Tuple[List[Found], List[str]]:
        """The class and its bases, depth first, left to right, each once; and the bases not resolved
        inside the package (``unresolved ...``; external ones are dropped: they define no engine hook)."""
        order: List[Found] = []
        unresolved: List[str] = []
        seen: set = set()
        stack = [(found, 0)]
        while stack:
            (mod, cls), depth = stack.pop(0)
            key = (mod.rel, cls.name, cls.lineno)
            if key in seen:
                continue
            seen.add(key)
            order.append((mod, cls))
            bases: List[Tuple[Found, int]] = []
            for base in cls.bases:
                got, why = self.resolve(mod, base)
                if got is not None and depth < MAX_DEPTH:
                    bases.append((got, depth + 1))
                elif why.startswith("unresolved"):
                    unresolved.append(why)
            stack = bases + stack
        return order, unresolved


def _dotted(node: Any) -> List[str]:
    """``a.b.C`` as ["a", "b", "C"]; [] for anything but names and attributes."""
    parts: List[str] = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    return [node.id] + parts if isinstance(node, ast.Name) and parts else []


def member(cls: ast.ClassDef, name: str) -> Optional[Any]:
    """The statement of ``cls``'s own body that defines ``name`` (a def, or a class-level assignment)."""
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return node
    return None


def read_text(path: str) -> Optional[str]:
    try:
        if os.path.getsize(path) > MAX_FILE_BYTES:
            return None
        with open(path, "r", encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def parse(text: str) -> Optional[ast.Module]:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None
