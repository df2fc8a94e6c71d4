"""What goes over the wire: the boot line, the envelope, and reading the reply.

The remote side is never installed: the controller runs ``<python> -B -c BOOT``
(every word quoted) and sends the envelope on stdin as one JSON line that
carries the request *and* the source of the modules the task needs, with the
list of names that are packages. What a task needs is read off the code: the
runner, the task's module and, for an isolated task, the supervisor, and
everything they import within ``introspect.remote`` (function-level imports
included), found by walking their ASTs (:func:`task_modules`). BOOT installs an importer serving those sources from memory, checks
the Python version and hands over to ``introspect.remote.runner``. The request travels as
data, so no path or option is ever pasted into a shell line.
"""

from __future__ import annotations

import ast
import functools
import json
import shlex
import threading
from importlib import resources
from typing import TYPE_CHECKING, Any

from introspect import __version__
from introspect.errors import ProtocolError
from introspect.remote import runner  # noqa: F401  # callers read the frame markers here too
from introspect.remote.contract import BEGIN, END, PROTOCOL

if TYPE_CHECKING:
    from collections.abc import Iterator
    from importlib.abc import Traversable

REMOTE_PACKAGE = "introspect.remote"
MIN_PYTHON = (3, 8)

# Kept tiny and free of newer syntax so that an old Python reaches the version check.
BOOT = r"""
import sys
if sys.version_info < (3, 8):
    sys.stdout.write('\n<<<INTROSPECT:BEGIN>>>\n{"protocol": 1, "fatal": {"type": "python-too-old", "version": "%d.%d.%d"}}\n<<<INTROSPECT:END>>>\n' % tuple(sys.version_info[:3]))
    sys.exit(0)
import json, importlib.abc, importlib.util
_env = json.loads(sys.stdin.buffer.readline().decode("utf-8"))
_src = _env["sources"]
_pkg = set(_env["packages"])
class _Ship(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name in _src:
            return importlib.util.spec_from_loader(name, self, is_package=name in _pkg)
        return None
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        code = _src[module.__spec__.name]
        exec(compile(code, "<introspect:%s>" % module.__spec__.name, "exec"), module.__dict__)
sys.meta_path.insert(0, _Ship())
import introspect.remote.runner as _runner
_runner.main(_env, _BOOT)
"""


@functools.lru_cache(maxsize=1)
def remote_sources() -> dict[str, str]:
    """Source of every module of the remote package and its sub-packages, keyed by dotted name.

    A package's own source is its ``__init__.py``; ``introspect`` itself ships empty
    (its ``__init__`` is the controller's, never needed on the host).
    """
    sources = {"introspect": ""}
    _walk(resources.files(REMOTE_PACKAGE), REMOTE_PACKAGE, sources)
    return sources


@functools.lru_cache(maxsize=1)
def remote_packages() -> tuple[str, ...]:
    """The dotted names in :func:`remote_sources` that are packages."""
    names = ["introspect"]
    _walk(resources.files(REMOTE_PACKAGE), REMOTE_PACKAGE, {}, names)
    return tuple(names)


def _walk(folder: Traversable, dotted: str, sources: dict[str, str], packages: list[str] | None = None) -> None:
    if packages is not None:
        packages.append(dotted)
    init = folder / "__init__.py"
    sources[dotted] = init.read_text(encoding="utf-8") if init.is_file() else ""
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.is_dir() and (entry / "__init__.py").is_file():
            _walk(entry, f"{dotted}.{entry.name}", sources, packages)
        elif entry.name.endswith(".py") and entry.name != "__init__.py":
            sources[f"{dotted}.{entry.name[:-3]}"] = entry.read_text(encoding="utf-8")


RUNNER = "introspect.remote.runner"
SUPERVISOR = "introspect.remote.supervisor"


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:`` (never run, so never needed on the host)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    return skipped


def _statements(tree: ast.AST) -> Iterator[ast.AST]:
    """``tree`` and every statement in it, however nested: an import is always a statement, so the
    expressions (most of a module's nodes) are not visited."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        todo.extend(child for child in ast.iter_child_nodes(node)
                    if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)))


@functools.cache  # per module: the tasks of one run share the runner, the contract and the readers
def _imports(name: str) -> frozenset[str]:
    """The shipped modules ``name`` imports anywhere in its code that runs (relative or absolute)."""
    sources, packages = remote_sources(), remote_packages()
    found: set[str] = set()
    base = name if name in packages else name.rpartition(".")[0]
    tree = ast.parse(sources[name])
    skipped = _type_checking_only(tree) if "TYPE_CHECKING" in sources[name] else set()
    for node in _statements(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in sources)
        elif isinstance(node, ast.ImportFrom):
            parts = base.split(".")
            module = ".".join(parts[:len(parts) - node.level + 1]) if node.level else ""
            module = ".".join(p for p in (module, node.module or "") if p)
            if module in sources:
                found.add(module)
            # ``from ..facts import drafters``: a name may be a sub-module.
            found.update(f"{module}.{alias.name}" for alias in node.names if f"{module}.{alias.name}" in sources)
    if name == RUNNER:
        found.discard(SUPERVISOR)  # imported only for isolated tasks (runner.main): added for those
    return frozenset(found)


# CPython 3.11's AST constructor keeps its recursion depth per interpreter, not per thread, so two
# threads parsing at once can fail with "AST constructor recursion depth mismatch"
# (https://github.com/python/cpython/issues/106905); the channels of one probe ship in parallel.
_AST_LOCK = threading.Lock()


def task_modules(task: str, isolate: bool = False) -> tuple[str, ...]:
    with _AST_LOCK:
        return _task_modules(task, isolate)


@functools.cache
def _task_modules(task: str, isolate: bool = False) -> tuple[str, ...]:
    """Every module a task can import on the host, and the packages above them, sorted.

    Computed from the code, never listed by hand: the runner (which imports the task
    module named in its ``TASKS`` table by name), that module, the supervisor when the
    task is isolated, and the closure of their imports within the shipped package.
    """
    from introspect.remote.runner import TASKS

    todo = [RUNNER] + ([TASKS[task][0]] if task in TASKS else []) + ([SUPERVISOR] if isolate else [])
    needed: set[str] = set()
    while todo:
        name = todo.pop()
        if name in needed:
            continue
        needed.add(name)
        todo.extend(_imports(name) - needed)
    for name in list(needed):  # importing a.b.c imports a and a.b first
        parts = name.split(".")
        needed.update(".".join(parts[:i]) for i in range(1, len(parts)))
    return tuple(sorted(needed))


def boot_source() -> str:
    # The supervisor re-runs BOOT for isolated children, so BOOT carries itself.
    return f"_BOOT = {BOOT!r}\n{BOOT}"


def command_argv(python: str) -> list[str]:
    return [python, "-B", "-c", boot_source()]


def command_line(python: str) -> str:
    """The exec line for an SSH channel: every word shell-quoted."""
    return " ".join(shlex.quote(word) for word in command_argv(python))


def envelope(task: str, request: dict[str, Any], *, isolate: bool = False,
             timeout: float | None = None) -> bytes:
    body = {"protocol": PROTOCOL, "probe_version": __version__, "task": task, "request": request,
            "isolate": isolate, "timeout": timeout}
    return json.dumps(body).encode("utf-8")[:-1] + _shipped(task, isolate) + b"}\n"


@functools.cache
def _shipped(task: str, isolate: bool) -> bytes:
    """The ``sources`` and ``packages`` members of a task's envelope, encoded once per run (not per host)."""
    names = task_modules(task, isolate)
    sources, packages = remote_sources(), set(remote_packages())
    shipped = {"sources": {n: sources[n] for n in names}, "packages": [n for n in names if n in packages]}
    return b", " + json.dumps(shipped).encode("utf-8")[1:-1]


def parse_reply(stdout: bytes) -> dict[str, Any] | None:
    """The last complete frame on stdout, or None when there is none (noise, truncation)."""
    start = stdout.rfind(BEGIN)
    if start < 0:
        return None
    end = stdout.find(END, start)
    if end < 0:
        return None
    try:
        # The probe caps what it parses at MAX_JSON_DEPTH, but a reply is still untrusted text:
        # json's recursive decoder must not meet a nesting that exhausts the stack here.
        reply = json.loads(stdout[start + len(BEGIN):end].decode("utf-8"))
    except RecursionError:
        raise ProtocolError("the probe's reply nests too deeply to be read",
                            hint="report this as a bug with --debug output") from None
    except ValueError as exc:
        raise ProtocolError(f"the probe's reply is not valid JSON: {exc}",
                            hint="report this as a bug with --debug output") from exc
    if not isinstance(reply, dict):
        raise ProtocolError("the probe's reply is not a JSON object")
    if reply.get("protocol") != PROTOCOL:
        raise ProtocolError(
            f"remote probe speaks protocol {reply.get('protocol')!r}, this introspect {PROTOCOL}",
            hint="use the same introspect version on both sides")
    return reply
