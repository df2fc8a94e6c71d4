"""What goes over the wire: the boot line, the envelope, and reading the reply.

The remote side is never installed: the controller runs ``<python> -B -c BOOT``
(every word quoted) and sends the envelope on stdin as one JSON line that
carries the request *and* the source of the modules the task needs, with the
list of names that are packages. What a task needs is read off the code: the
runner, the task's module and, for an isolated task, the supervisor, and
everything they import within ``introspect.remote`` (function-level imports
included, ``if TYPE_CHECKING:`` blocks not), found by scanning their import statements
(:func:`task_modules`); contract's TypedDict modules only for a task whose modules name one of
its shapes (contract imports them on first use). Each source ships stripped of docstrings,
comments and signature annotations (:mod:`introspect.transport.strip`). BOOT installs an importer serving those sources from memory, checks
the Python version and hands over to ``introspect.remote.runner``. The request travels as
data, so no path or option is ever pasted into a shell line.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
import threading
from collections.abc import Iterable
from importlib import resources
from typing import TYPE_CHECKING

from introspect import __version__
from introspect.remote import runner  # noqa: F401  # callers read the frame markers here too
from introspect.remote.contract import PROTOCOL
from introspect.transport import frames

if TYPE_CHECKING:  # the shapes: contract imports their modules on first use only
    from importlib.abc import Traversable

    from introspect.remote.contract import BatchEntry, Reply, TaskRequest

REMOTE_PACKAGE = "introspect.remote"
MIN_PYTHON = (3, 8)

# Kept tiny and free of newer syntax so that an old Python reaches the version check.
# Its first act drops the cwd entry that `python -c` puts first on sys.path
# (https://docs.python.org/3/using/cmdline.html#cmdoption-c), and the absolute cwd that an empty
# PYTHONPATH component becomes (`export PYTHONPATH=$PYTHONPATH:/opt/x` with it unset): a json.py
# in the caller's or the login's directory (a model dir, say) would otherwise be imported by
# BOOT's own imports, --no-remote-code or not. `os` is imported by the interpreter's startup,
# before any cwd entry exists, so importing it here reads no file. `-P` exists only from 3.11, and `-I` would also drop PYTHONPATH and
# the user site, which the host's own pipeline sees.
BOOT = r"""
import sys, os
try:
    _cwd = os.getcwd()
except OSError:
    _cwd = ""
sys.path[:] = [p for p in sys.path if p not in ("", ".", _cwd)]
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
BATCH = "introspect.remote.batch"


# An import statement at the start of a line, at any indent (function-level imports count):
# ``import a.b, c as d`` or ``from ..x import (a, b)``, the forms this package is written in.
# A regex, not ``ast.parse``: parsing the remote package's ~300 kB took 0.1 CPU-s per run, on
# the critical path of every probe. Text that only looks like an import (in a docstring) can
# add a module, never drop one; tests check the result equals the AST's on this package.
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)|import[ \t]+([^\n]*))",
                     re.M)
_COMMENT = re.compile(r"#[^\n]*")
# An ``if TYPE_CHECKING:`` block (its header and every deeper-indented or blank line after it):
# its imports never run, so they ship nothing.
_TYPE_CHECKING = re.compile(r"^([ \t]*)if TYPE_CHECKING:[^\n]*\n(?:(?:\1[ \t]+[^\n]*)?\n)*", re.M)
# A top-level definition: ``def f``, ``class C``, ``NAME =`` or ``NAME: T =``.
_DEFINED = re.compile(r"^(?:(?:async[ \t]+)?def[ \t]+(\w+)|class[ \t]+(\w+)|(\w+)[ \t]*(?::[^\n=]*)?=(?!=))", re.M)
CONTRACT = "introspect.remote.contract"
# What contract re-exports on first use (its ``__getattr__``, SHAPE_MODULES there).
SHAPES = frozenset(f"introspect.remote.{m}" for m in ("sections", "wire", "wire_preflight"))


def _names(text: str) -> list[str]:
    """The imported names of an import list: ``(a as b,\n c)  # noqa`` -> [a, c]."""
    body = _COMMENT.sub("", text).strip().strip("()")
    return [part.split()[0] for part in re.split(r"[,\n]", body) if part.strip()]


def _imports(name: str, sources: dict[str, str], packages: tuple[str, ...]) -> set[str]:
    """The shipped modules ``name`` imports anywhere in its code (relative or absolute)."""
    found: set[str] = set()
    base = name if name in packages else name.rpartition(".")[0]
    for source, listed, plain in _IMPORT.findall(_TYPE_CHECKING.sub("", sources[name])):
        if plain:
            found.update(n for n in _names(plain) if n in sources)
            continue
        level = len(source) - len(source.lstrip("."))
        parts = base.split(".")
        module = ".".join(parts[:len(parts) - level + 1]) if level else ""
        module = ".".join(p for p in (module, source[level:]) if p)
        if module in sources:
            found.add(module)
        # ``from ..facts.model import drafters``: a name may be a sub-module.
        found.update(f"{module}.{n}" for n in _names(listed) if f"{module}.{n}" in sources)
        if module == CONTRACT and not set(_names(listed)) <= _contract_names(sources[CONTRACT]):
            found |= SHAPES & set(sources)  # a shape, loaded by contract's __getattr__
    if name == RUNNER:
        # Imported only for isolated tasks and batches (runner.main): added for those.
        found -= {SUPERVISOR, BATCH}
    if name == CONTRACT:
        found -= SHAPES  # its __getattr__ imports them for the modules that name a shape (above)
    return found


@functools.cache
def _contract_names(source: str) -> frozenset[str]:
    """The names contract defines itself (what a module may import from it without the shapes)."""
    return frozenset(n for groups in _DEFINED.findall(source) for n in groups if n)


@functools.cache
def _shipped_imports(name: str) -> frozenset[str]:
    """:func:`_imports` of one module of the shipped package, scanned once per run for every task."""
    return frozenset(_imports(name, remote_sources(), remote_packages()))


@functools.cache
def task_modules(task: str, isolate: bool = False) -> tuple[str, ...]:
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
        todo.extend(_shipped_imports(name) - needed)
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


def envelope(task: str, request: TaskRequest, *, isolate: bool = False,
             timeout: float | None = None) -> bytes:
    body = {"protocol": PROTOCOL, "probe_version": __version__, "task": task, "request": request,
            "isolate": isolate, "timeout": timeout}
    with _shipping_lock:
        member = _encoded_modules(task_modules(task, isolate))
    return json.dumps(body).encode("utf-8")[:-1] + member + b"}\n"


# The shipped modules are found, stripped and encoded once per run and set of modules, not once per
# host. The first hosts of a fleet ask together: one does it, the others wait for it
# (``functools.cache`` alone would have each of them do it).
_shipping_lock = threading.Lock()


@functools.cache
def _encoded_modules(names: tuple[str, ...]) -> bytes:
    """``, "sources": {...}, "packages": [...]``: the members of an envelope that ship ``names``."""
    packages = set(remote_packages())
    shipped = {"sources": shipped_sources(names), "packages": [n for n in names if n in packages]}
    return b", " + json.dumps(shipped).encode("utf-8")[1:-1]


def shipped_sources(names: Iterable[str]) -> dict[str, str]:
    """The sources of ``names`` as they are shipped: docstrings, comments and signature
    annotations cut out (transport/strip.py; the cuts are kept between runs, strip_cache.py)."""
    return dict(_stripped(tuple(sorted(set(names)))))


@functools.cache
def _stripped(names: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Once per run and set of modules (a fleet's batches share one), not once per host."""
    from introspect.transport.strip_cache import stripped_sources

    return tuple(stripped_sources(names, remote_sources()).items())


def batch_envelope(items: list[BatchEntry]) -> bytes:
    """Several tasks for one interpreter in one session (see :mod:`introspect.remote.batch`):
    ``items`` are ``{key, task, request, isolate, timeout}``; the modules are the union of theirs."""
    with _shipping_lock:
        names = {n for item in items for n in task_modules(item["task"], bool(item.get("isolate")))} | {BATCH}
        member = _encoded_modules(tuple(sorted(names)))
    body = {"protocol": PROTOCOL, "probe_version": __version__, "task": "batch", "batch": items}
    return json.dumps(body).encode("utf-8")[:-1] + member + b"}\n"


def parse_frames(stdout: bytes) -> list[Reply]:
    """Every complete, valid frame on stdout, in order (a batch writes one per task); frames that
    fail their type check are skipped (see :mod:`introspect.transport.frames`), and when none is
    valid the last one's ProtocolError is raised."""
    return frames.valid_frames(stdout)


def parse_reply(stdout: bytes) -> Reply | None:
    """The last complete valid frame on stdout, or None when there is none (noise, truncation).

    A frame begun after it and never ended is the real reply cut short (the probe writes its
    frame last): None then, so the caller reports the truncation instead of an earlier frame.
    """
    if frames.truncated_after(stdout):
        return None
    found = frames.valid_frames(stdout)
    return found[-1] if found else None
