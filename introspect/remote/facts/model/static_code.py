"""Static reading of a model's Python code: parse, follow relative imports, resolve constants.

Runs on the host: standard library only, Python 3.8+. Nothing is imported or run:
the module and the sibling modules it imports relatively (never a file outside the
model dir) are parsed with :mod:`ast`; a name resolves to the module-level constant
it is bound to (``X = 256``, ``N = BASE + 2``, ``from .consts import N``,
``from . import consts; consts.N``), class attributes through the class and its
bases defined in the same files. Anything else is unresolved, never guessed.
Relative imports resolve to files through :func:`custom_code.resolve_relative`, the
one resolver the files section uses too.
"""

from __future__ import annotations

import ast
import os
from typing import Any, Dict, List, Optional, Tuple

from ...contract import ErrorRecord, error_record
from ...readers import read_text_capped
from .custom_code import resolve_relative

MAX_MODULES = 16
MAX_DEPTH = 6  # nested name resolution
UNRESOLVED = object()  # the value of anything that is not a resolvable constant


class Module:
    def __init__(self, rel: str, tree: ast.Module) -> None:
        self.rel = rel
        self.tree = tree
        self.env: Dict[str, ast.AST] = {}
        self.imports: Dict[str, Tuple[str, Optional[str]]] = {}  # local name -> (module rel, name or None)
        self.classes: Dict[str, ast.ClassDef] = {}


class Scanner:
    """Parse the module at ``rel`` (inside ``root``) and whatever it imports relatively."""

    def __init__(self, root: str, cap: int) -> None:
        # Lexical, not realpath: in an HF cache snapshot every file is a link into blobs/.
        self.root = os.path.normpath(os.path.abspath(root))
        self.cap = cap
        self.modules: Dict[str, Optional[Module]] = {}
        self.errors: List[ErrorRecord] = []

    # ------------------------------------------------------------ loading

    def load(self, rel: str) -> Optional[Module]:
        if rel in self.modules:
            return self.modules[rel]
        self.modules[rel] = None
        if len(self.modules) > MAX_MODULES:
            return None
        file = os.path.normpath(os.path.join(self.root, rel))
        if not file.startswith(self.root + os.sep) or not os.path.isfile(file):
            return None  # a name that climbs out of the model dir is never followed
        source, err = read_text_capped(file, self.cap)
        if err is not None or source is None:
            self.errors.append(err or error_record("unreadable", "%s could not be read" % rel, file))
            return None
        try:
            tree = ast.parse(source, filename=rel)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            self.errors.append(error_record("unparsable-code", "%s: %s" % (rel, exc), file))
            return None
        module = Module(rel, tree)
        self.modules[rel] = module
        for node in tree.body:
            self._top_level(module, node)
        return module

    def _top_level(self, module: Module, node: ast.AST) -> None:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    module.env[target.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            module.env[node.target.id] = node.value
        elif isinstance(node, ast.ClassDef):
            module.classes[node.name] = node
        elif isinstance(node, ast.ImportFrom) and node.level:
            self._relative_import(module, node)

    def _relative_import(self, module: Module, node: ast.ImportFrom) -> None:
        """Bind each imported name to (file, name in it), or (file, None) for a module."""
        for alias in node.names:
            local = alias.asname or alias.name
            if node.module:  # from .consts import N
                found = resolve_relative(self.root, module.rel, node.level, node.module, [alias.name])
                imported: Optional[str] = alias.name
            else:  # from . import consts (a sibling module, or a name of the package's __init__)
                found = resolve_relative(self.root, module.rel, node.level, None, [alias.name])
                imported = None if found and found[0][0].endswith("." + alias.name) else alias.name
            target = found[0][1] if found else None
            if target is not None:
                module.imports[local] = (os.path.normpath(target), imported)

    # ------------------------------------------------------------ resolution

    def lookup(self, module: Module, name: str, depth: int = 0) -> Tuple[Any, Optional[str]]:
        """(python value, file it was resolved in) of a module-level name; UNRESOLVED if none."""
        if depth > MAX_DEPTH:
            return UNRESOLVED, None
        if name in module.env:
            return self.evaluate(module.env[name], module, None, depth + 1), module.rel
        if name in module.imports:
            rel, imported = module.imports[name]
            other = self.load(rel)
            if other is not None and imported is not None:
                return self.lookup(other, imported, depth + 1)
        return UNRESOLVED, None

    def evaluate(self, node: ast.AST, module: Module, cls: Optional[ast.ClassDef], depth: int = 0) -> Any:
        """A literal, a resolvable name, arithmetic on those, len() of a literal; else UNRESOLVED."""
        if depth > MAX_DEPTH:
            return UNRESOLVED
        ev = lambda n: self.evaluate(n, module, cls, depth + 1)  # noqa: E731
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, str)) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Name):
            if cls is not None:
                found = self.class_attr(module, cls, node.id, depth + 1)
                if found is not UNRESOLVED:
                    return found
            return self.lookup(module, node.id, depth + 1)[0]
        if isinstance(node, ast.Attribute):
            return self._attribute(node, module, cls, depth)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
            left, right = ev(node.left), ev(node.right)
            if isinstance(left, int) and isinstance(right, int):
                if isinstance(node.op, ast.Add):
                    return left + right
                return left - right if isinstance(node.op, ast.Sub) else left * right
            return UNRESOLVED
        if isinstance(node, (ast.List, ast.Tuple)):
            items = [ev(e) for e in node.elts]
            return UNRESOLVED if any(i is UNRESOLVED for i in items) else items
        if isinstance(node, ast.Dict):
            keys = [ev(k) if k is not None else UNRESOLVED for k in node.keys]
            values = [ev(v) for v in node.values]
            if any(x is UNRESOLVED for x in keys + values):
                return UNRESOLVED
            return dict(zip(keys, values))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" and node.args:
            value = ev(node.args[0])
            return len(value) if isinstance(value, (list, str)) else UNRESOLVED
        return UNRESOLVED

    def _attribute(self, node: ast.Attribute, module: Module, cls: Optional[ast.ClassDef], depth: int) -> Any:
        owner = node.value
        if isinstance(owner, ast.Name) and cls is not None and owner.id in ("self", "cls", cls.name):
            return self.class_attr(module, cls, node.attr, depth + 1)
        if isinstance(owner, ast.Name) and owner.id in module.imports:
            rel, imported = module.imports[owner.id]
            other = self.load(rel) if imported is None else None
            if other is not None:
                return self.lookup(other, node.attr, depth + 1)[0]
        return UNRESOLVED

    def class_attr(self, module: Module, cls: ast.ClassDef, name: str, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            return UNRESOLVED
        for node in cls.body:
            value = _assigned(node, name)
            if value is not None:
                return self.evaluate(value, module, None, depth + 1)
        for base_module, base in self.bases(module, cls):
            found = self.class_attr(base_module, base, name, depth + 1)
            if found is not UNRESOLVED:
                return found
        return UNRESOLVED

    def bases(self, module: Module, cls: ast.ClassDef) -> List[Tuple[Module, ast.ClassDef]]:
        """Base classes defined in the scanned files (transformers' own bases are not read)."""
        out = []
        for base in cls.bases:
            if not isinstance(base, ast.Name):
                continue
            if base.id in module.classes and module.classes[base.id] is not cls:
                out.append((module, module.classes[base.id]))
            elif base.id in module.imports:
                rel, imported = module.imports[base.id]
                other = self.load(rel)
                if other is not None and imported in other.classes:
                    out.append((other, other.classes[imported]))
        return out

    def find_class(self, rel: str, name: Optional[str]) -> Tuple[Optional[Module], Optional[ast.ClassDef]]:
        module = self.load(rel)
        if module is None:
            return None, None
        if name and name in module.classes:
            return module, module.classes[name]
        if name and name in module.imports:  # re-exported from a sibling
            other_rel, imported = module.imports[name]
            other = self.load(other_rel)
            if other is not None and imported in other.classes:
                return other, other.classes[imported]
        return module, None


def _assigned(node: ast.AST, name: str) -> Optional[ast.AST]:
    if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
        return node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
        return node.value
    return None


def source_of(node: Optional[ast.AST]) -> Optional[str]:
    """A short, version-independent rendering of a small expression (``N``, ``256``, ``a.b + 2``)."""
    if node is None:
        return None
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Constant):
        return repr(node.value)
    if isinstance(node, ast.Attribute):
        return "%s.%s" % (source_of(node.value), node.attr)
    if isinstance(node, ast.BinOp):
        ops = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}
        op = ops.get(type(node.op))
        if op is not None:
            return "%s %s %s" % (source_of(node.left), op, source_of(node.right))
    return type(node).__name__
