"""Per-task shipping: each task runs on a Python without introspect given exactly its module set."""

from __future__ import annotations

import ast
import json
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from introspect.remote.runner import TASKS
from introspect.transport import shipping
from tests.fixtures.shards import write_shard
from tests.remote.test_shipping import _bare_python

MISSING = "No module named 'introspect"


def _model_dir(root: Path) -> Path:
    model = root / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"],
                                                   "num_hidden_layers": 2, "hidden_size": 8}))
    (model / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 16}))
    write_shard(model / "model.safetensors", [("model.layers.0.mlp.weight", "BF16", (8, 8)),
                                              ("model.layers.1.mlp.weight", "BF16", (8, 8))])
    return model


def _request(root: Path, model: Path) -> dict[str, Any]:
    """One request every task can read (each takes the keys it knows)."""
    return {"model_path": str(model), "roots": [str(root)], "model_dirs": [str(model)], "spec": "org/name",
            "imports": ["json"], "nvidia_smi": False, "hf_cache": str(root / "hf"), "cache_dir": str(root / "hf"),
            "use_hf_scanner": False, "deadline": 20, "sample": True}


def _run(python: str, envelope: bytes, cwd: Path) -> tuple[dict[str, Any] | None, str]:
    argv = shipping.command_argv(python)
    argv.insert(1, "-I")  # isolated: neither PYTHONPATH, the cwd nor user site-packages
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    timer = threading.Timer(60, proc.kill)  # bounded even if a task hung
    timer.start()
    try:
        proc.stdin.write(envelope)
        proc.stdin.flush()  # stdin stays open while the task runs: its EOF means the controller is gone
        out = proc.stdout.read()
        proc.stdin.close()
        err = proc.stderr.read()
        proc.wait()
    finally:
        timer.cancel()
        proc.kill()
    return shipping.parse_reply(out), err.decode("utf-8", "replace")


@pytest.fixture(scope="module")
def bare_python() -> str:
    return _bare_python()


@pytest.mark.parametrize("task,isolate", [(t, False) for t in TASKS] + [("tokenizer", True), ("model", True)])
def test_each_task_runs_with_exactly_its_shipped_modules(task: str, isolate: bool, bare_python: str,
                                                         tmp_path: Path) -> None:
    model = _model_dir(tmp_path)
    envelope = shipping.envelope(task, _request(tmp_path, model), isolate=isolate, timeout=30)
    shipped = json.loads(envelope)
    assert sorted(shipped["sources"]) == list(shipping.task_modules(task, isolate))
    reply, stderr = _run(bare_python, envelope, tmp_path)
    assert reply is not None, stderr
    assert MISSING not in json.dumps(reply) and MISSING not in stderr, (reply, stderr)
    assert not [e for e in reply["errors"] if e.get("probe") == task and e.get("type") in ("ImportError",
                                                                                             "ModuleNotFoundError")]


def test_a_module_left_out_is_caught(bare_python: str, tmp_path: Path) -> None:
    """The check above can fail: the model task without one of its modules reports the import error."""
    model = _model_dir(tmp_path)
    body = json.loads(shipping.envelope("model", _request(tmp_path, model), timeout=30))
    del body["sources"]["introspect.remote.facts.model.header_scan"]
    reply, stderr = _run(bare_python, json.dumps(body).encode() + b"\n", tmp_path)
    assert MISSING in json.dumps(reply) + stderr


def test_the_set_is_smaller_than_the_package_and_grows_with_isolation() -> None:
    everything = set(shipping.remote_sources())
    # What isolation adds: the supervisor and what it imports, nothing else.
    supervision = set(shipping.task_modules("no-such-task", True)) - set(shipping.task_modules("no-such-task"))
    assert shipping.SUPERVISOR in supervision
    for task in TASKS:
        plain, isolated = set(shipping.task_modules(task)), set(shipping.task_modules(task, True))
        assert {shipping.RUNNER, TASKS[task][0], "introspect", "introspect.remote"} <= plain < everything
        assert isolated == plain | supervision
    # The runner alone names no shape of contract's at run time: the TypedDict modules stay home.
    assert set(shipping.task_modules("no-such-task")) == {"introspect", "introspect.remote", "introspect.remote.confine",
                                                          "introspect.remote.contract", "introspect.remote.limits",
                                                          "introspect.remote.readers", "introspect.remote.runner"}


def _ast_imports(name: str, sources: dict[str, str], packages: tuple[str, ...]) -> set[str]:
    """The reference: every shipped module ``name`` imports in code that runs (TYPE_CHECKING
    blocks skipped), read off its AST."""
    tree = ast.parse(sources[name])
    skipped = {id(inner) for node in ast.walk(tree)
               if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
               for stmt in node.body for inner in ast.walk(stmt)}
    base = name if name in packages else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in sources)
        elif isinstance(node, ast.ImportFrom):
            parts = base.split(".")
            module = ".".join(parts[:len(parts) - node.level + 1]) if node.level else ""
            module = ".".join(p for p in (module, node.module or "") if p)
            found.update({module} & set(sources))
            found.update(f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in sources)
            if module == shipping.CONTRACT and {a.name for a in node.names} - _defined(sources[shipping.CONTRACT]):
                found |= shipping.SHAPES  # a shape: contract's __getattr__ imports its module
    if name == shipping.CONTRACT:
        found -= shipping.SHAPES  # imported by __getattr__ only for a name that is a shape
    return found - ({shipping.SUPERVISOR, shipping.BATCH} if name == shipping.RUNNER else set())


def _defined(source: str) -> set[str]:
    """The names a module's top level defines (def, class, assignment), read off its AST."""
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def test_the_import_scan_ships_what_the_ast_finds_for_every_task() -> None:
    """Module by module the scan may find more (it reads TYPE_CHECKING blocks too); task by task
    the closures are the same."""
    sources, packages = shipping.remote_sources(), shipping.remote_packages()
    for name in sources:
        assert shipping._imports(name, sources, packages) >= _ast_imports(name, sources, packages), name
    for task in TASKS:
        for isolate in (False, True):
            todo = [shipping.RUNNER, TASKS[task][0]] + ([shipping.SUPERVISOR] if isolate else [])
            closure: set[str] = set()
            while todo:
                name = todo.pop()
                if name not in closure:
                    closure.add(name)
                    todo.extend(_ast_imports(name, sources, packages))
            closure |= {".".join(n.split(".")[:i]) for n in closure for i in range(1, n.count(".") + 1)}
            assert shipping.task_modules(task, isolate) == tuple(sorted(closure)), (task, isolate)


def test_the_import_scan_reads_every_statement_form() -> None:
    sources = {n: "" for n in ("pkg", "pkg.a", "pkg.b", "pkg.c", "pkg.sub", "pkg.sub.d", "pkg.sub.e", "json")}
    sources["pkg.sub.e"] = (
        "import pkg.a, json as j  # noqa\n"
        "from . import d\n"
        "from .. import (b,  # why\n"
        "    c as cc,\n"
        ")\n"
        "def f():\n"
        "    from ..a import x\n"
    )
    assert shipping._imports("pkg.sub.e", sources, ("pkg", "pkg.sub")) == {"pkg.a", "json", "pkg.sub", "pkg.sub.d",
                                                                          "pkg", "pkg.b", "pkg.c"}
