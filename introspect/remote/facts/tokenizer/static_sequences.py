"""Sequences of special tokens built the ways tokenizer modules build them, read statically.

Runs on the host: standard library only, Python 3.8+. Extends
:meth:`static_code.Scanner.evaluate` (literals, names, arithmetic) with the few
constructions real modules use to spell a table of specials, never running any code:

* ``tuple(...)`` / ``list(...)`` of a sequence, ``A + B`` of two sequences, ``*seq`` in a literal;
* a comprehension ``f"<|extra_{i}|>" for i in range(N)`` (one loop over ``range`` of
  resolvable ints, one plain ``{name}`` field, no condition);
* ``enumerate(seq, start=K)``: ``[[K, seq[0]], [K + 1, seq[1]], ...]``.

Qwen's ``tokenization_qwen.py`` (https://huggingface.co/Qwen/Qwen-7B/blob/main/tokenization_qwen.py#L30)
spells its table ``SPECIAL_TOKENS = tuple(enumerate(((ENDOFTEXT, IMSTART, IMEND) + EXTRAS),
start=SPECIAL_START_ID))`` with ``EXTRAS = tuple((f"<|extra_{i}|>" for i in range(205)))``.
Anything else is UNRESOLVED.
"""

from __future__ import annotations

import ast
from typing import Any, List, Optional

from ..model.static_code import MAX_DEPTH, UNRESOLVED, Module, Scanner

MAX_ITEMS = 100000  # a range() longer than this is not a table of specials


def evaluate(scanner: Scanner, node: ast.AST, module: Module, cls: Optional[ast.ClassDef], depth: int = 0) -> Any:
    """A list (of str, int, or [int, str] pairs) or the scanner's own value; else UNRESOLVED."""
    if depth > MAX_DEPTH:
        return UNRESOLVED
    ev = lambda n: evaluate(scanner, n, module, cls, depth + 1)  # noqa: E731
    # In a method a bare name is the module's global, never a class attribute.
    if isinstance(node, ast.Name) and node.id in module.env:
        return evaluate(scanner, module.env[node.id], module, None, depth + 1)
    if isinstance(node, ast.Name) and node.id in module.imports:
        rel, imported = module.imports[node.id]
        other = scanner.load(rel)
        if other is not None and imported is not None and imported in other.env:
            return evaluate(scanner, other.env[imported], other, None, depth + 1)
    if isinstance(node, (ast.List, ast.Tuple)):
        return _items(node.elts, ev)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = ev(node.left), ev(node.right)
        if isinstance(left, list) and isinstance(right, list):
            return left + right
    if isinstance(node, (ast.GeneratorExp, ast.ListComp)):
        return _comprehension(scanner, node, module, cls, depth)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return _call(node, ev, scanner, module, cls, depth)
    return scanner.evaluate(node, module, cls, depth)


def _items(elts: List[ast.expr], ev: Any) -> Any:
    out: List[Any] = []
    for elt in elts:
        if isinstance(elt, ast.Starred):
            value = ev(elt.value)
            if not isinstance(value, list):
                return UNRESOLVED
            out.extend(value)
            continue
        value = ev(elt)
        if value is UNRESOLVED:
            return UNRESOLVED
        out.append(value)
    return out


def _call(node: ast.Call, ev: Any, scanner: Scanner, module: Module, cls: Optional[ast.ClassDef], depth: int) -> Any:
    name = node.func.id  # type: ignore[attr-defined]
    if name in ("tuple", "list") and len(node.args) == 1 and not node.keywords:
        return ev(node.args[0])
    if name == "enumerate" and len(node.args) in (1, 2):
        seq = ev(node.args[0])
        keyword = [k.value for k in node.keywords if k.arg == "start"]
        start_node = node.args[1] if len(node.args) == 2 else (keyword[0] if keyword else None)
        start = ev(start_node) if start_node is not None else 0
        if isinstance(seq, list) and isinstance(start, int) and not isinstance(start, bool):
            return [[start + i, item] for i, item in enumerate(seq)]
        return UNRESOLVED
    return scanner.evaluate(node, module, cls, depth)


def _comprehension(scanner: Scanner, node: Any, module: Module, cls: Optional[ast.ClassDef], depth: int) -> Any:
    """``f"<|x_{i}|>" for i in range(a, b)``: the strings; any other comprehension UNRESOLVED."""
    if len(node.generators) != 1:
        return UNRESOLVED
    gen = node.generators[0]
    call = gen.iter
    if gen.ifs or not isinstance(gen.target, ast.Name) or not _is_call(call, "range"):
        return UNRESOLVED
    bounds = [scanner.evaluate(a, module, cls, depth + 1) for a in call.args]
    if not bounds or len(bounds) > 2 or not all(isinstance(b, int) and not isinstance(b, bool) for b in bounds):
        return UNRESOLVED
    lo, hi = (0, bounds[0]) if len(bounds) == 1 else (bounds[0], bounds[1])
    if hi - lo > MAX_ITEMS:
        return UNRESOLVED
    template = _template(node.elt, gen.target.id)
    if template is None:
        return UNRESOLVED
    prefix, suffix = template
    return ["%s%d%s" % (prefix, i, suffix) for i in range(lo, hi)]


def _is_call(node: Any, name: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name and \
        not node.keywords


def _template(node: ast.AST, var: str) -> Optional[Any]:
    """(prefix, suffix) of ``f"{prefix}{var}{suffix}"`` with a plain field; else None."""
    if not isinstance(node, ast.JoinedStr):
        return None
    parts = list(node.values)
    fields = [p for p in parts if isinstance(p, ast.FormattedValue)]
    if len(fields) != 1:
        return None
    field = fields[0]
    if field.conversion not in (-1, None) or field.format_spec is not None:
        return None
    if not (isinstance(field.value, ast.Name) and field.value.id == var):
        return None
    at = parts.index(field)
    texts = [p.value if isinstance(p, ast.Constant) and isinstance(p.value, str) else None for p in parts]
    if any(t is None for i, t in enumerate(texts) if i != at):
        return None
    return "".join(t for t in texts[:at] if t), "".join(t for t in texts[at + 1:] if t)
