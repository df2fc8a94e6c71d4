"""The import rules of docs/architecture.md, checked on the code: which folder may import which.

Each rule is (importer prefix, forbidden prefixes). Every import statement of every module counts,
function-level ones included (an import hidden in a function still couples the folders).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "introspect"

# Folders of the controller that do I/O, run processes or talk to users.
SIDE_EFFECTS = ("introspect.cli", "introspect.client", "introspect.transport", "introspect.checks",
                "introspect.inventory", "introspect.userconfig", "introspect.report")

RULES: dict[str, tuple[str, ...]] = {
    # Pure verdicts: raw facts in, sections out; no I/O module, no controller folder.
    "introspect.analysis": SIDE_EFFECTS + ("subprocess", "socket", "shutil", "sqlite3", "urllib", "http",
                                           "asyncio", "threading", "paramiko"),
    # What the model is does not depend on how it is served or diffed.
    "introspect.analysis.architecture": ("introspect.analysis.serving", "introspect.analysis.diff"),
    # The tokenizer section stands alone among the verdicts.
    "introspect.analysis.tokenizer": ("introspect.analysis.architecture", "introspect.analysis.serving",
                                      "introspect.analysis.diff"),
    "introspect.analysis.serving": ("introspect.analysis.diff",),
    # Transport moves bytes: it never interprets them.
    "introspect.transport": ("introspect.analysis", "introspect.checks", "introspect.client", "introspect.cli",
                             "introspect.documents", "introspect.report"),
    "introspect.checks": ("introspect.client", "introspect.cli", "introspect.report"),
    "introspect.client": ("introspect.cli", "introspect.report"),
    "introspect.documents": SIDE_EFFECTS,
    # Facts never run a task: tasks compose facts. (One exception below: tasks/health.py.)
    "introspect.remote.facts": ("introspect.remote.tasks", "introspect.remote.runner", "introspect.remote.batch"),
}

# tasks/health.py is self-contained by design (``python health.py < request.json`` runs it alone,
# and Ansible ships it as one file), so it cannot import the facts; the GPU facts reuse its
# nvidia-smi parsing instead of keeping a second copy.
ALLOWED = {("introspect.remote.facts.host.gpus", "introspect.remote.tasks.health")}


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    return _imports_in(_module(path), path.name == "__init__.py", path.read_text(encoding="utf-8"))


def _imports_in(module: str, is_package: bool, text: str) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in ``text``, relative ones resolved."""
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            found.append((node.lineno, target))
            found += [(node.lineno, f"{target}.{alias.name}") for alias in node.names]
    return found


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


MODULES = sorted(PACKAGE.rglob("*.py"))


def _broken(module: str, imports: list[tuple[int, str]]) -> list[str]:
    return [f"{module}:{line} imports {target} ({importer} must not import {bad})"
            for importer, forbidden in RULES.items() if _under(module, importer)
            for line, target in imports for bad in forbidden if _under(target, bad)
            and not any(module == m and (_under(target, allowed) or _under(allowed, target)) for m, allowed in ALLOWED)]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_follow_the_rules(path: Path) -> None:
    broken = _broken(_module(path), _imports(path))
    assert not broken, "\n".join(broken)


def _module_level(text: str) -> list[tuple[int, str]]:
    """The imports that run when a module is imported: those outside every function body."""
    tree = ast.parse(text)
    inside = {id(node) for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
              for node in ast.walk(fn)}
    return [(node.lineno, alias.name.split(".")[0] if isinstance(node, ast.Import) else (node.module or ""))
            for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in inside
            for alias in (node.names if isinstance(node, ast.Import) else node.names[:1])
            if isinstance(node, ast.Import) or not node.level]


@pytest.mark.parametrize("path", sorted((PACKAGE / "remote").rglob("*.py")),
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_remote_imports_only_itself_and_the_standard_library(path: Path) -> None:
    """The remote side is shipped to hosts that have nothing installed (docs/architecture.md).

    transformers, torch or a tokenizer library are imported only inside the functions that the
    isolated, supervised tasks call; importing any remote module needs the standard library alone.
    """
    outside = [f"{line}: {target}" for line, target in _module_level(path.read_text(encoding="utf-8"))
               if not _under(target, "introspect.remote") and target.split(".")[0] not in sys.stdlib_module_names
               and target != "__future__"]
    assert not outside, outside


def test_a_broken_rule_is_caught() -> None:
    """The checker sees a forbidden import, relative or absolute, inside a function."""
    module = "introspect.analysis.architecture.example"
    imports = _imports_in(module, False, "def f():\n    from ...cli import render\n    import subprocess\n")
    assert {target for _, target in imports} >= {"introspect.cli", "introspect.cli.render", "subprocess"}
    broken = _broken(module, imports)
    assert any("must not import introspect.cli" in b for b in broken)
    assert any("must not import subprocess" in b for b in broken)
    assert _module_level("import torch\ndef f():\n    import transformers\n") == [(1, "torch")]
    assert not _broken("introspect.analysis.serving.example", _imports_in(
        "introspect.analysis.serving.example", False, "from ..architecture import layers\n"))
