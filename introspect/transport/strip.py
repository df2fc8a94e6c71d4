"""The remote modules as they are shipped: docstrings, comments and signature annotations cut out.

Every task sends the source of the modules it imports on the remote interpreter's stdin
(:mod:`introspect.transport.shipping`); about 40% of that text is prose and type annotations
the host never needs. :func:`strip` removes, from the original text (never a re-rendering of
it, so the result stays valid Python 3.8 whatever Python the controller runs):

- docstrings (a module's is deleted, so ``from __future__`` stays first; a class's or a
  function's becomes ``pass``, so no body is left empty);
- comments, with the blanks before them;
- the annotations of function parameters and return values (never evaluated on the host:
  nothing there reads ``__annotations__``). Annotations in class bodies stay: they are the
  fields of the TypedDicts.

Every line stays where it was, so a traceback from the host (runner.py keeps its last lines)
points at the same line of the source in this repository. The result is checked: its syntax
tree must equal the original's with the same parts removed, else the module ships as it is.
"""

from __future__ import annotations

import ast
import io
import tokenize

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


Cut = tuple[int, int, str]  # (start, end, replacement): source[start:end] becomes replacement
REPLACEMENTS = ("", "pass")


def strip(source: str) -> str:
    """``source`` without docstrings, comments and signature annotations (see the module docstring);
    ``source`` itself when it does not parse or the check fails."""
    return apply(source, cuts(source))


def cuts(source: str) -> list[Cut]:
    """What :func:`strip` cuts out of ``source``; none when it does not parse or the check fails."""
    try:
        tree = ast.parse(source)
        found = _cuts(source, tree)
        return found if _same(tree, ast.parse(apply(source, found))) else []
    except (SyntaxError, ValueError, tokenize.TokenError):
        return []


class _Offsets:
    """(line, column) -> index into the source; ``ast`` counts columns in UTF-8 bytes, tokenize in characters."""

    def __init__(self, source: str) -> None:
        self.lines = source.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def chars(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col

    def utf8(self, line: int, col: int) -> int:
        text = self.lines[line - 1] if line <= len(self.lines) else ""
        return self.starts[line - 1] + len(text.encode("utf-8")[:col].decode("utf-8"))


def _cuts(source: str, tree: ast.Module) -> list[Cut]:
    """(start, end, replacement) of every part to remove, in order, none overlapping."""
    at = _Offsets(source)
    found: list[Cut] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, *_DEFS)) and _docstring(node) is not None:
            doc = node.body[0]
            end_line, end_col = doc.end_lineno or doc.lineno, doc.end_col_offset or 0
            found.append((at.utf8(doc.lineno, doc.col_offset), at.utf8(end_line, end_col),
                         "" if isinstance(node, ast.Module) else "pass"))
        if isinstance(node, _DEFS):
            found += _annotation_cuts(node, at, source)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            start = at.chars(*token.start)
            while start > 0 and source[start - 1] in " \t":
                start -= 1
            found.append((start, at.chars(*token.end), ""))
    ordered: list[Cut] = []
    pos = 0
    for start, end, replacement in sorted(found):
        start = max(start, pos)  # inside a part already cut (a comment in a multi-line annotation)
        if end > start:
            ordered.append((start, end, replacement))
            pos = end
    return ordered


def _docstring(node: ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> ast.Expr | None:
    first = node.body[0] if node.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first
    return None


def _annotation_cuts(node: ast.FunctionDef | ast.AsyncFunctionDef, at: _Offsets,
                     source: str) -> list[Cut]:
    """``: T`` of each parameter and ``-> T`` of the return. One in parentheses (``: (T)``, whose
    node leaves them out) or a return over several lines (its line breaks would stand outside
    any bracket) is kept."""
    found: list[Cut] = []
    args = node.args
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if arg is None or arg.annotation is None:
            continue
        ann = arg.annotation
        name_end = at.utf8(arg.lineno, arg.col_offset) + len(arg.arg)
        if source[name_end:at.utf8(ann.lineno, ann.col_offset)].strip() == ":":
            found.append((name_end, at.utf8(ann.end_lineno or ann.lineno, ann.end_col_offset or 0), ""))
    returns = node.returns
    if returns is not None:
        begin = at.utf8(returns.lineno, returns.col_offset)
        end = at.utf8(returns.end_lineno or returns.lineno, returns.end_col_offset or 0)
        arrow = source.rfind("->", 0, begin)
        if (arrow >= 0 and not source[arrow + 2:begin].strip() and "\n" not in source[arrow:end]
                and source[end:].lstrip(" \t").startswith(":")):
            while arrow > 0 and source[arrow - 1] in " \t":  # ``f(x) -> T:`` becomes ``f(x):``
                arrow -= 1
            found.append((arrow, end, ""))
    return found


def apply(source: str, found: list[Cut]) -> str:
    """``source`` with ``found`` cut out (newlines inside a cut are kept)."""
    out, pos = [], 0
    for start, end, replacement in found:  # in order, none inside another (as _cuts gives them)
        out += [source[pos:start], replacement, "\n" * source.count("\n", start, end)]
        pos = end
    out.append(source[pos:])
    return "".join(out)


def _same(original: ast.Module, stripped: ast.Module) -> bool:
    """Whether ``stripped`` is ``original`` less its docstrings; signature annotations (cut, or kept
    where cutting them is not safe) are left out of the comparison on both sides."""
    return ast.dump(_unannotated(_undocumented(original))) == ast.dump(_unannotated(stripped))


def _undocumented(tree: ast.Module) -> ast.Module:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, *_DEFS)) and _docstring(node) is not None:
            node.body = node.body[1:] if isinstance(node, ast.Module) else [ast.Pass(), *node.body[1:]]
    return tree


def _unannotated(tree: ast.Module) -> ast.Module:
    for node in ast.walk(tree):
        if isinstance(node, _DEFS):
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if arg is not None:
                    arg.annotation = None
            node.returns = None
    return tree
