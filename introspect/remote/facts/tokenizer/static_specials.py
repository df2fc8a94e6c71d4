"""Special tokens a tokenizer class declares in code, read statically (see static_code).

Runs on the host: standard library only, Python 3.8+. The shapes real classes use:

* the reserved-id count: ``num_reserved_special_tokens = 256`` or ``= SOME_CONSTANT``
  (possibly imported from a sibling module) in the class or its bases, plus any
  ``+ K`` after it in a ``range(...)`` bound (Kimi-Linear reserves 256 + 2);
* placeholder names: an f-string ``f"<|reserved_token_{i}|>"`` naming the id itself
  (Kimi's ``TikTokenTokenizer``), or ``f"<|reserved_special_token_{2 + i}|>"`` naming
  an index after a list of named specials (Meta's Llama-3 ``Tokenizer`` in
  llama_models/llama3/tokenizer.py);
* a list literal of named specials whose ids follow the base vocabulary in order (Meta);
* dict literals of specials, ``{"<|endoftext|>": 100257, ...}``, values resolved to ints;
* (id, token) pairs, ``SPECIAL_TOKENS = tuple(enumerate((ENDOFTEXT, ...) + EXTRAS, start=K))``
  (Qwen's ``tokenization_qwen.py``; the constructions are :mod:`static_sequences`');
* named ids: ``self.bos_id = self.special_tokens["<|begin_of_text|>"]``.
"""

from __future__ import annotations

import ast
from typing import Any, Dict, List, Optional, Tuple

from ...contract import ErrorRecord
from ..model.static_code import UNRESOLVED, Module, Scanner, source_of
from . import static_sequences

RESERVED = "num_reserved_special_tokens"
MAX_DICT_ENTRIES = 10000


def scan_specials(root: str, rel: str, class_name: Optional[str], cap: int,
                  with_unresolved: bool = False) -> Tuple[Dict[str, Any], List[ErrorRecord]]:
    """(facts, errors) for the class ``class_name`` of module file ``rel`` under ``root``.

    ``with_unresolved``: also ``facts["unresolved"]``, the ``file:line`` of each assignment
    to a ``*special*`` name that builds a collection no reader here resolves (a list
    comprehension over a language table, a loop): specials the code has and this cannot know.
    """
    scanner = Scanner(root, cap)
    module, cls = scanner.find_class(rel, class_name)
    facts = {
        "class": cls.name if cls is not None else None,
        "class_file": module.rel if module is not None and cls is not None else None,
        "reserved": None,
        "placeholder": None,
        "named_specials": None,
        "special_token_ids": {},
        "named_ids": {},
        "vocab_files": {},
        "files_read": [],
    }  # type: Dict[str, Any]
    if module is not None:
        scope = _scope(scanner, module, cls)
        facts["reserved"] = _reserved(scanner, module, cls, scope)
        facts["placeholder"] = _placeholder(scope) or _placeholder(_imported(scanner, module))
        facts["named_specials"] = _named_list(scanner, scope)
        facts["special_token_ids"] = _dict_literals(scanner, module, scope)
        facts["named_ids"] = _named_ids(scope)
        facts["vocab_files"] = _vocab_files(scanner, module, cls)
    if with_unresolved:
        facts["unresolved"] = unresolved(scanner, module) if module is not None else []
    facts["files_read"] = sorted(rel for rel, m in scanner.modules.items() if m is not None)
    return facts, scanner.errors


def _scope(scanner: Scanner, module: Module, cls: Optional[ast.ClassDef]) -> List[Tuple[Module, Optional[ast.ClassDef], ast.AST]]:
    """(module, class, node) of the class and its in-file bases; the whole module without a class."""
    if cls is None:
        return [(module, None, module.tree)]
    out = [(module, cls, cls)]  # type: List[Tuple[Module, Optional[ast.ClassDef], ast.AST]]
    seen = {id(cls)}
    queue = scanner.bases(module, cls)
    while queue and len(out) < 8:
        base_module, base = queue.pop(0)
        if id(base) not in seen:
            seen.add(id(base))
            out.append((base_module, base, base))
            queue.extend(scanner.bases(base_module, base))
    return out


def _reserved(scanner: Scanner, module: Module, cls: Optional[ast.ClassDef], scope: List[Any]) -> Optional[Dict[str, Any]]:
    """The count, the expression it is written as, and the file that holds the number."""
    found = _reserved_assignment(scope)
    if found is None:  # module level, here and in the modules it imports (read only when needed)
        found = _reserved_assignment([(module, None, module.tree)] + _imported(scanner, module))
    if found is None:
        return None
    owner_module, owner, expr = found
    count = scanner.evaluate(expr, owner_module, owner)
    declared_in = owner_module.rel
    resolved_in = declared_in
    if isinstance(expr, ast.Name):
        resolved_in = scanner.lookup(owner_module, expr.id)[1] or declared_in
    return {
        "count": count if isinstance(count, int) else None,
        "expression": source_of(expr),
        "declared_in": declared_in,
        "resolved_in": resolved_in,
        "extra": _reserved_extra(scanner, scope),
    }


def _reserved_assignment(scope: List[Any]) -> Optional[Tuple[Module, Optional[ast.ClassDef], ast.AST]]:
    """(module, class, expression) of the first ``num_reserved_special_tokens = ...`` in scope."""
    for owner_module, owner, node in scope:
        expr = _class_or_module_assignment(node, RESERVED)
        if expr is not None:
            return owner_module, owner, expr
    return None


def _class_or_module_assignment(node: ast.AST, name: str) -> Optional[ast.AST]:
    body = getattr(node, "body", [])
    for child in body:
        if isinstance(child, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in child.targets):
            return child.value
        if isinstance(child, ast.AnnAssign) and isinstance(child.target, ast.Name) and child.target.id == name:
            return child.value
    return None


def _reserved_extra(scanner: Scanner, scope: List[Any]) -> int:
    """``range(base, base + self.num_reserved_special_tokens + 2)``: the ``+ 2``."""
    for owner_module, owner, node in scope:
        for call in ast.walk(node):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "range"):
                continue
            for arg in call.args[1:]:
                terms = _sum_terms(arg)
                if any(_names(t, RESERVED) for t in terms):
                    values = [scanner.evaluate(t, owner_module, owner) for t in terms if not _names(t, RESERVED)]
                    return sum(v for v in values if isinstance(v, int))
    return 0


def _sum_terms(node: ast.AST) -> List[ast.AST]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _sum_terms(node.left) + _sum_terms(node.right)
    return [node]


def _names(node: ast.AST, name: str) -> bool:
    return (isinstance(node, ast.Name) and node.id == name) or (isinstance(node, ast.Attribute) and node.attr == name)


def _placeholder(scope: List[Any]) -> Optional[Dict[str, Any]]:
    """f"<|...{i}|>" (mode "id") or f"<|...{K + i}|>" (mode "index", offset K)."""
    for _module, _owner, node in scope:
        for joined in ast.walk(node):
            if isinstance(joined, ast.JoinedStr):
                found = _placeholder_of(joined)
                if found is not None:
                    return found
    return None


def _imported(scanner: Scanner, module: Module) -> List[Any]:
    """(module, None, tree) of every module ``module`` imports relatively, transitively, in order.

    A helper module may build the placeholder name or hold the reserved count.
    """
    out: List[Any] = []
    seen = {module.rel}
    queue = [module]
    while queue:
        current = queue.pop(0)
        for rel, _name in sorted(set(current.imports.values()), key=lambda r: (r[0], r[1] or "")):
            other = scanner.load(rel) if rel not in seen else None
            seen.add(rel)
            if other is not None:
                out.append((other, None, other.tree))
                queue.append(other)
    return out


def _placeholder_of(joined: ast.JoinedStr) -> Optional[Dict[str, Any]]:
    parts = joined.values
    if len(parts) != 3 or not all(isinstance(parts[i], ast.Constant) for i in (0, 2)):
        return None
    prefix, suffix = parts[0].value, parts[2].value  # type: ignore[attr-defined]
    value = getattr(parts[1], "value", None)
    if not (isinstance(prefix, str) and isinstance(suffix, str) and prefix.startswith("<") and suffix.endswith(">")):
        return None
    if isinstance(value, ast.Name):
        return {"template": prefix + "{id}" + suffix, "mode": "id", "offset": 0}
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
        left, right = value.left, value.right
        offset = left if isinstance(left, ast.Constant) else right if isinstance(right, ast.Constant) else None
        if isinstance(offset, ast.Constant) and isinstance(offset.value, int):
            return {"template": prefix + "{id}" + suffix, "mode": "index", "offset": offset.value}
    return None


def _named_list(scanner: Scanner, scope: List[Any]) -> Optional[List[str]]:
    """A list literal of token strings bound to a ``*special*`` name (Meta's ``special_tokens``)."""
    for owner_module, owner, node in scope:
        for assign in ast.walk(node):
            if not isinstance(assign, ast.Assign) or not isinstance(assign.value, ast.List):
                continue
            if not any("special" in _target_name(t).lower() for t in assign.targets):
                continue
            value = scanner.evaluate(assign.value, owner_module, owner)
            if isinstance(value, list) and value and all(isinstance(v, str) and v.startswith("<") for v in value):
                return value
    return None


def _target_name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else ""


def _dict_literals(scanner: Scanner, module: Module, scope: List[Any]) -> Dict[str, int]:
    """{token: id} from dict literals bound to ``*special*`` names (class, its bases, module)."""
    out = {}  # type: Dict[str, int]
    nodes = [(m, o, n) for m, o, n in scope] + [(module, None, module.tree)]
    for owner_module, owner, node in nodes:
        for assign in ast.walk(node):
            targets = assign.targets if isinstance(assign, ast.Assign) else (
                [assign.target] if isinstance(assign, ast.AnnAssign) else [])
            value = getattr(assign, "value", None)
            if value is None or not any("special" in _target_name(t).lower() for t in targets):
                continue
            if not isinstance(value, ast.Dict):
                _add_pairs(out, static_sequences.evaluate(scanner, value, owner_module, owner))
                continue
            for key, item in zip(value.keys[:MAX_DICT_ENTRIES], value.values[:MAX_DICT_ENTRIES]):
                token = scanner.evaluate(key, owner_module, owner) if key is not None else UNRESOLVED
                token_id = scanner.evaluate(item, owner_module, owner)
                if isinstance(token, str) and isinstance(token_id, int):
                    out.setdefault(token, token_id)
    return out


def _add_pairs(out: Dict[str, int], value: Any) -> None:
    """(id, token) or (token, id) pairs, every one of them, into ``out``; anything else adds nothing."""
    if not isinstance(value, list) or not value or len(value) > MAX_DICT_ENTRIES:
        return
    pairs = []
    for item in value:
        if not (isinstance(item, list) and len(item) == 2):
            return
        token, token_id = (item[1], item[0]) if isinstance(item[0], int) else (item[0], item[1])
        if not isinstance(token, str) or not isinstance(token_id, int) or isinstance(token_id, bool):
            return
        pairs.append((token, token_id))
    for token, token_id in pairs:
        out.setdefault(token, token_id)


_COLLECTIONS = (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
                ast.Call, ast.BinOp)


def unresolved(scanner: Scanner, module: Module) -> List[str]:
    """``file:line`` of each non-empty collection bound to a ``*special*`` name that stays unresolved."""
    out = []  # type: List[str]
    for assign in ast.walk(module.tree):
        targets = assign.targets if isinstance(assign, ast.Assign) else (
            [assign.target] if isinstance(assign, ast.AnnAssign) else [])
        value = getattr(assign, "value", None)
        if not isinstance(value, _COLLECTIONS) or not any("special" in _target_name(t).lower() for t in targets):
            continue
        if isinstance(value, (ast.List, ast.Tuple, ast.Set)) and not value.elts:
            continue  # an empty initial value, filled in later
        if isinstance(value, ast.Dict) and not value.keys:
            continue
        if static_sequences.evaluate(scanner, value, module, None) is UNRESOLVED:
            out.append("%s:%d" % (module.rel, getattr(assign, "lineno", 0)))
    return out


def _vocab_files(scanner: Scanner, module: Module, cls: Optional[ast.ClassDef]) -> Dict[str, str]:
    """The class's ``vocab_files_names`` ({"vocab_file": "tiktoken.model"}), when resolvable."""
    value = scanner.class_attr(module, cls, "vocab_files_names") if cls is not None else UNRESOLVED
    if not isinstance(value, dict):
        value = scanner.lookup(module, "VOCAB_FILES_NAMES")[0]
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def _named_ids(scope: List[Any]) -> Dict[str, str]:
    """``self.bos_id = self.special_tokens["<|begin_of_text|>"]`` -> {"bos": "<|begin_of_text|>"}."""
    out = {}  # type: Dict[str, str]
    for _module, _owner, node in scope:
        for assign in ast.walk(node):
            if not isinstance(assign, (ast.Assign, ast.AnnAssign)):
                continue
            targets = assign.targets if isinstance(assign, ast.Assign) else [assign.target]
            value = assign.value
            if not isinstance(value, ast.Subscript):
                continue
            key = value.slice
            key = getattr(key, "value", key) if type(key).__name__ == "Index" else key  # Python 3.8's ast.Index
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                continue
            for target in targets:
                name = _target_name(target)
                attr = name[: -len("_id")] if name.endswith("_id") else None
                if attr in ("bos", "eos", "pad", "unk"):
                    out.setdefault(attr, key.value)
    return out
