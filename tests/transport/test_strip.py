"""The shipped remote sources: docstrings, comments and signature annotations cut out, lines kept,
the cuts kept between runs only when they can be trusted (transport/strip.py, strip_cache.py)."""

from __future__ import annotations

import ast
import concurrent.futures
import glob
import json
import os
import subprocess
from pathlib import Path

import pytest

from introspect.transport import shipping, strip_cache
from introspect.transport.strip import Cut, apply, cuts, strip

SAMPLE = '''"""Module docstring."""

from __future__ import annotations

import os  # why os


def f(a: int, *args: str, b: "list[int]" = [1], **kw: object) -> dict[str, int]:
    """Only a docstring."""


class C:
    """Doc."""

    x: int  # a field: class-body annotations stay
    s = "a # not a comment"

    def g(self, v: int) -> str:
        # a comment line
        return "#%s" % v


async def h(x: int) -> None:
    return None


def k(y) -> (
    dict
):
    return y
'''


def test_strip_cuts_prose_and_signature_annotations_and_keeps_every_line() -> None:
    out = strip(SAMPLE)
    assert out.count("\n") == SAMPLE.count("\n")
    assert "docstring" not in out and "Doc." not in out and "why os" not in out and "comment line" not in out
    assert out.splitlines()[2] == "from __future__ import annotations"  # still first: the module docstring is gone
    assert "def f(a, *args, b = [1], **kw):" in out and "    pass" in out  # a body of a docstring alone
    assert "x: int\n" in out and '"a # not a comment"' in out and 'return "#%s" % v' in out
    assert "def g(self, v):" in out and "async def h(x):" in out
    namespace: dict[str, object] = {}
    exec(compile(out, "<stripped>", "exec"), namespace)  # noqa: S102 - our own sample
    assert namespace["C"].__annotations__ == {"x": "int"}  # type: ignore[attr-defined]


def test_a_cut_that_would_change_the_code_ships_the_module_as_it_is() -> None:
    # ``(int)``: the annotation's node leaves its parentheses out; cut, they would be unbalanced.
    source = "def h(x: (int)):\n    return x\n"
    assert cuts(source) == [] and strip(source) == source
    assert strip("def broken(:\n") == "def broken(:\n"


def test_multi_line_return_annotations_stay() -> None:
    out = strip(SAMPLE)
    assert "def k(y) -> (\n    dict\n):" in out


def test_every_remote_module_strips_and_keeps_its_lines() -> None:
    for name, source in shipping.remote_sources().items():
        if not source.strip():
            continue
        out = strip(source)
        assert out != source, f"{name}: nothing cut (the check refused it?)"
        assert out.count("\n") == source.count("\n"), name  # tracebacks from the host point at the same line
        ast.parse(out)


def _python38() -> str | None:
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8*/bin/python3.8")))
    return found[0] if found else None


def test_the_stripped_package_compiles_on_python_3_8(tmp_path: Path) -> None:
    python = _python38()
    if python is None:
        pytest.skip("no Python 3.8 on this machine")
    stripped = {name: strip(source) for name, source in shipping.remote_sources().items()}
    (tmp_path / "sources.json").write_text(json.dumps(stripped))
    code = ("import json, sys\nfor name, text in json.load(open(sys.argv[1])).items():\n"
            "    compile(text, name, 'exec')\nprint('ok')\n")
    proc = subprocess.run([python, "-I", "-c", code, str(tmp_path / "sources.json")], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_the_health_task_ships_at_most_60_kb() -> None:
    from introspect.checks.health import probe_request
    from introspect.inventory import VenvEntry

    venv = VenvEntry(path="/opt/venvs/serving", requires=("transformers", "tiktoken", "tokenizers"),
                     imports=("torch", "transformers"), models=("/models/Kimi-K2.6",))
    payload = shipping.envelope("health", probe_request(venv), timeout=60)
    assert len(payload) <= 60_000, len(payload)
    shipped = json.loads(payload)["sources"]
    # The task's own closure only: no TypedDict module (the shapes) rides along.
    assert not shipping.SHAPES & set(shipped)
    assert shipped == {n: strip(shipping.remote_sources()[n]) for n in shipping.task_modules("health")}


# ------------------------------------------------------------------ the kept cuts


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # platformdirs' user_cache_dir on Linux
    monkeypatch.setenv("INTROSPECT_CACHE_DIR", str(tmp_path / "results"))  # never used for the cuts
    assert strip_cache.cache_dir() == tmp_path / "introspect" / "shipped"
    monkeypatch.setattr(strip_cache, "_MEMO", {})  # each test starts as a new process would
    return tmp_path / "introspect" / "shipped"


def _next_process() -> None:
    """What a later run sees: the kept file, not this process's memo."""
    strip_cache._MEMO.clear()


SOURCES = {"m.a": SAMPLE, "m.b": '"""B."""\nX = 1  # one\n'}


def test_cuts_are_kept_and_read_back(cache_dir: Path) -> None:
    first = strip_cache.stripped_sources(SOURCES, SOURCES)
    assert first == {n: strip(s) for n, s in SOURCES.items()}
    [kept] = list(cache_dir.glob("*.json"))
    assert oct(kept.stat().st_mode & 0o777) == oct(0o600) and oct(cache_dir.stat().st_mode & 0o777) == oct(0o700)
    doc = json.loads(kept.read_text())
    assert doc["format"] == strip_cache.FORMAT and doc["cuts"]["m.b"] == [list(c) for c in cuts(SOURCES["m.b"])]
    # Read back: a cut recorded there (and sound) is what is applied.
    doc["cuts"]["m.b"] = [[0, 8, ""]]  # the docstring only (the comment stays)
    kept.write_text(json.dumps(doc))
    _next_process()
    assert strip_cache.stripped_sources(SOURCES, SOURCES)["m.b"] == "\nX = 1  # one\n"


@pytest.mark.parametrize("bad", [[[0, 10**6, ""]], [[5, 2, ""]], [[0, 3, "import os"]], [[4, 9, ""], [0, 6, ""]],
                                 [["0", 3, ""]], "nonsense"])
def test_an_unsound_kept_cut_is_recomputed(cache_dir: Path, bad: object) -> None:
    strip_cache.stripped_sources(SOURCES, SOURCES)
    [kept] = list(cache_dir.glob("*.json"))
    doc = json.loads(kept.read_text())
    doc["cuts"]["m.b"] = bad
    kept.write_text(json.dumps(doc))
    _next_process()
    assert strip_cache.stripped_sources(SOURCES, SOURCES)["m.b"] == strip(SOURCES["m.b"])
    assert json.loads(kept.read_text())["cuts"]["m.b"] == [list(c) for c in cuts(SOURCES["m.b"])]  # rewritten


def test_a_kept_file_others_can_write_is_not_used(cache_dir: Path) -> None:
    strip_cache.stripped_sources(SOURCES, SOURCES)
    [kept] = list(cache_dir.glob("*.json"))
    doc = json.loads(kept.read_text())
    doc["cuts"]["m.b"] = [[0, 8, ""]]
    kept.write_text(json.dumps(doc))
    kept.chmod(0o666)
    _next_process()
    assert strip_cache.stripped_sources(SOURCES, SOURCES)["m.b"] == strip(SOURCES["m.b"])


def test_another_source_is_another_file_and_old_files_go(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(strip_cache, "MAX_FILES", 3)
    for i in range(5):
        sources = {"m.a": f"X = {i}  # {i}\n"}
        assert strip_cache.stripped_sources(sources, sources) == {"m.a": f"X = {i}\n"}
    assert len(list(cache_dir.glob("*.json"))) == 3


def test_one_process_strips_once_for_all_its_threads(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fleet run ships the same modules from many threads at once: one computes, none repeats,
    even where nothing can be kept on disk (cache_dir under a file)."""
    blocker = cache_dir.parent / "file"
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("")
    monkeypatch.setattr(strip_cache, "cache_dir", lambda: blocker / "shipped")
    calls: list[str] = []

    def counted(source: str) -> list[Cut]:
        calls.append(source)
        return cuts(source)

    monkeypatch.setattr(strip_cache, "cuts", counted)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: strip_cache.stripped_sources(SOURCES, SOURCES), range(32)))
    assert all(r == {n: strip(s) for n, s in SOURCES.items()} for r in results)
    assert len(calls) == len(SOURCES)


def test_an_unwritable_cache_only_costs_the_stripping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setattr(strip_cache, "cache_dir", lambda: blocker / "shipped")  # cannot be made under a file
    assert strip_cache.stripped_sources(SOURCES, SOURCES) == {n: strip(s) for n, s in SOURCES.items()}


def test_apply_of_no_cuts_is_the_source() -> None:
    assert apply(SAMPLE, []) == SAMPLE
