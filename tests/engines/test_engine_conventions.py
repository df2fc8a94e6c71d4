"""The engine-conventions table against the engines' installed sources.

Every row of introspect/analysis/serving/engine_conventions.py cites lines of SGLang 0.5.23 and
vLLM 0.33.0; here each cited line is read from the real distributions (tests/fixtures/engine_venv.py:
the PyPI packages installed ``--no-deps``, never imported) and must still contain the cited text, and
the list-valued rows (KV cache dtypes, state dtype choices) must equal the lists the sources define,
read with ``ast``. A version bump that moves or changes a line fails here; a pinned version the
table does not know fails ``test_the_pinned_versions_have_tables``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from introspect.analysis.serving.engine_conventions import (
    TABLES,
    engine_ids,
    lookup,
    nearest_version,
    version_key,
)
from tests.fixtures.engine_venv import SGLANG_VERSION, VLLM_VERSION, engines_venv, venv_or_skip

CITES = [(engine, version, key, cite) for engine, tables in TABLES.items() for version, rules in tables.items()
         for key, rule in rules.items() for cite in rule.cites]


@pytest.fixture(scope="module")
def site() -> Path:
    venv = venv_or_skip(engines_venv, "the pinned engines")
    return venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def test_the_pinned_versions_have_tables() -> None:
    assert SGLANG_VERSION in TABLES["sglang"] and VLLM_VERSION in TABLES["vllm"]


@pytest.mark.slow
@pytest.mark.parametrize(("engine", "version", "key", "cite"), CITES,
                         ids=[f"{e}-{k}-{c.path.rsplit('/', 1)[-1]}:{c.line}" for e, _, k, c in CITES])
def test_each_cited_line_says_what_the_row_claims(site: Path, engine: str, version: str, key: str, cite) -> None:
    assert (site / f"{engine}-{version}.dist-info").is_dir(), f"the venv holds no {engine} {version}"
    lines = (site / cite.path).read_text(encoding="utf-8").splitlines()
    assert cite.text in lines[cite.line - 1], f"{cite.path}:{cite.line} is now: {lines[cite.line - 1].strip()!r}"


def _node_at(tree: ast.AST, line: int, kind: type) -> ast.AST:
    found = [n for n in ast.walk(tree) if isinstance(n, kind) and n.lineno == line]
    assert found, f"no {kind.__name__} at line {line}"
    return found[0]


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


@pytest.mark.slow
def test_kv_and_state_dtype_lists_are_the_sources(site: Path) -> None:
    sglang = TABLES["sglang"]["0.5.23"]
    tree = ast.parse((site / "sglang/srt/arg_groups/fields/model.py").read_text())
    field = _node_at(tree, 197, ast.AnnAssign)  # kv_cache_dtype: A[str, Arg(help=..., choices=[...])] = "auto"
    choices = [kw.value for call in ast.walk(field) if isinstance(call, ast.Call)
               for kw in call.keywords if kw.arg == "choices"]
    assert _strings(choices[0]) == sglang["kv_cache_dtypes"].value
    assert isinstance(field.value, ast.Constant) and field.value.value == "auto"
    exec_ = ast.parse((site / "sglang/srt/arg_groups/fields/exec_.py").read_text())
    assert _strings(_node_at(exec_, 494, ast.keyword).value) == ["float32", "bfloat16", "float16"]

    vllm = TABLES["vllm"]["0.33.0"]
    cache = ast.parse((site / "vllm/config/cache.py").read_text())
    literal = _node_at(cache, 44, ast.Assign)  # CacheDType = Literal[...]
    assert _strings(literal.value) == vllm["kv_cache_dtypes"].value


def test_ids_per_engine() -> None:
    sglang, vllm = lookup("sglang", "0.5.23"), lookup("vllm", "0.33.0")
    # Kimi-K2.5's EAGLE-3 taps, 0-based outputs of layers 1, 29, 57: SGLang reads them as written,
    # vLLM needs the hidden-states index (+1); DFlash ids are the same for both (both add 1).
    assert engine_ids([1, 29, 57], "eagle3", sglang) == [1, 29, 57]
    assert engine_ids([1, 29, 57], "eagle3", vllm) == [2, 30, 58]
    assert engine_ids([1, 15, 30], "dflash", sglang) == engine_ids([1, 15, 30], "dflash", vllm) == [1, 15, 30]
    assert sglang.value("dflash.draft_tokens") == {"flag": "--speculative-num-draft-tokens", "minus": 0}
    assert vllm.value("dflash.draft_tokens") == {"flag": "num_speculative_tokens", "minus": 1}
    assert sglang.source("eagle3.layer_id_offset") == (
        "https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/models/llama.py#L939")


def test_an_unknown_version_is_unknown_with_the_nearest_named() -> None:
    assert version_key("0.5.23.post1") == (0, 5, 23) and version_key("0.34.0rc1+cu128") == (0, 34, 0)
    newer = lookup("sglang", "0.5.30")
    assert not newer.known and newer.table_version == "0.5.23"
    reason = newer.unknown_reason()
    assert reason is not None and "sglang 0.5.30 is not in" in reason and "nearest known version, sglang 0.5.23" in reason
    assert nearest_version("vllm", "0.1.0") == "0.33.0"  # older than every table: the oldest known
    absent = lookup("vllm", None)
    assert not absent.known and "no vllm version from the probed host" in str(absent.unknown_reason())
    assert lookup("vllm", "0.33.0").unknown_reason() is None
    with pytest.raises(ValueError, match="no conventions table"):
        lookup("tensorrt_llm", "1.0")
