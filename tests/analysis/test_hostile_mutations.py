"""Generated hostile inputs through the whole aggregator (``introspect profile RAW.json --json``).

Two generators, both deterministic (``derandomize``) and run in-process through ``main()``:

- a real config (tests/data/realconfigs) placed in a saved raw file, with one number a
  verdict reads made unusable (quoted, 0, -1, 1.5, 1e308, 10**30, a list, ``true``, a NaN /
  Infinity marker);
- a saved raw file (tests/data/golden/raw) with one node anywhere replaced by damage
  (a list where a string belongs, a 5,000-deep array, NaN, 1e400, an object, null).

Every run must exit 0, 1 or 2, print strict JSON (no NaN / Infinity) for 0 and 1, never a
traceback or an ``internal error``; and for a config number that is invalid whatever the
family, every figure that changed against the clean profile must be null, with a
``config-invalid-value`` finding naming the key (no number derived from an invalid key).
"""

from __future__ import annotations

import contextlib
import io
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from introspect.analysis.architecture.config_checks import INT_RULES
from introspect.cli.main import main
from introspect.remote.contract import WRAPPER_TEXT_CONFIG_KEYS
from introspect.remote.readers import JSON_CONSTANT_KEY

DATA = Path(__file__).resolve().parents[1] / "data"
CONFIGS = {p.parent.name: json.loads(p.read_text()) for p in sorted((DATA / "realconfigs").glob("*/config.json"))}
RAWS = {p.stem: p.read_text() for p in sorted((DATA / "golden" / "raw").glob("*.json"))}
TEMPLATE = json.loads(RAWS["kimi-k2.6-loaded"])

# Values no integer config key accepts (the getters' own floor is 0, their ceiling 10**12), and a
# non-finite number as it reaches the controller: a bare Infinity of config.json as the probe marks it
# (remote/readers.py), NaN as transformers 5 writes it (configuration_utils.py _encode_special_floats).
ALWAYS_BAD = ["quoted", -1, 1.5, 1e308, 10**30, "list", True, {JSON_CONSTANT_KEY: "Infinity"}, {"__float__": "NaN"}]
SETTINGS = settings(max_examples=150, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _run(tmp_path: Path, text: str) -> tuple[int, str, str]:
    path = tmp_path / "raw.json"
    path.write_text(text, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["profile", str(path), "--json"])
    return code, out.getvalue(), err.getvalue()


def _strict(text: str) -> Any:
    def refuse(name: str) -> None:
        raise AssertionError(f"non-strict JSON constant {name} in the output")

    return json.loads(text, parse_constant=refuse)


def _assert_clean(code: int, out: str, err: str) -> Any:
    assert code in (0, 1, 2), (code, err[-2000:])
    assert "Traceback" not in err and "internal error" not in err, err[-2000:]
    if code == 2:
        assert any(line.startswith("error: ") for line in err.splitlines()), err
        return None
    return _strict(out)


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    for key in WRAPPER_TEXT_CONFIG_KEYS:
        if isinstance(config.get(key), dict) and "num_hidden_layers" in config[key]:
            return config[key]
    return config


def _raw_with(config: dict[str, Any]) -> str:
    raw = json.loads(json.dumps(TEMPLATE))
    raw["files"]["config"] = config
    raw["safetensors"] = None  # the figures under test come from the config alone
    return json.dumps(raw)


def _figures(profile: dict[str, Any]) -> dict[str, Any]:
    arch = profile["architecture"]
    kv, params = arch.get("kv_cache") or {}, arch["params"]["config_estimate"]
    return {"kv_cache": kv.get("bytes_per_token"), "params.total": params["total"],
            "params.active": params["active"], "attention.type": arch["attention"]["type"],
            "attention.num_kv_heads": arch["attention"]["num_kv_heads"], "moe.is_moe": arch["moe"]["is_moe"],
            "moe.routed_experts": arch["moe"]["routed_experts"], "layers.pure_attention": arch["layers"]["pure_attention"]}


_CLEAN: dict[str, dict[str, Any]] = {}


def _clean_figures(tmp_path: Path, name: str) -> dict[str, Any]:
    if name not in _CLEAN:
        code, out, err = _run(tmp_path, _raw_with(CONFIGS[name]))
        _CLEAN[name] = _figures(_assert_clean(code, out, err))
    return _CLEAN[name]


@st.composite
def config_mutation(draw: st.DrawFn) -> tuple[str, str, Any]:
    name = draw(st.sampled_from(sorted(CONFIGS)))
    text = _text_config(CONFIGS[name])
    keys = sorted(k for k, v in text.items() if isinstance(v, int) and not isinstance(v, bool) and k in INT_RULES)
    key = draw(st.sampled_from(keys))
    bad = draw(st.sampled_from([*ALWAYS_BAD, 0] if INT_RULES[key][0] >= 1 else ALWAYS_BAD))
    return name, key, bad


@SETTINGS
@given(config_mutation())
def test_an_invalid_config_number_never_yields_a_number(tmp_path: Path, case: tuple[str, str, Any]) -> None:
    name, key, bad = case
    config = json.loads(json.dumps(CONFIGS[name]))
    text = _text_config(config)
    text[key] = {"quoted": str(text[key]), "list": [text[key]]}.get(bad, bad) if isinstance(bad, str) else bad
    profile = _assert_clean(*_run(tmp_path, _raw_with(config)))
    assert profile is not None
    clean, figures = _clean_figures(tmp_path, name), _figures(profile)
    changed = {field: value for field, value in figures.items() if value != clean[field]}
    assert all(value is None for value in changed.values()), (key, bad, changed)
    named = [f for f in profile["findings"] if f["code"] == "config-invalid-value" and f["key"].endswith(key)]
    if changed:
        assert named, (key, bad, changed, [f["code"] for f in profile["findings"]])
    for finding in named:
        assert "config.json" in finding["message"] and key in finding["message"]


DEEP = "[" * 5000 + "]" * 5000
DAMAGE = ["list-of-paths", "deep", "nan", "inf", "object", "null", "string", "negative"]


def _nodes(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path] if path else []
    if isinstance(value, dict):
        for key, item in value.items():
            out += _nodes(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:3]):
            out += _nodes(item, (*path, index))
    return out


def _damaged(raw_text: str, path: tuple[Any, ...], damage: str) -> str:
    raw = json.loads(raw_text)
    parent = raw
    for step in path[:-1]:
        parent = parent[step]
    marker = "__HOSTILE_MARKER__"
    replacement = {"list-of-paths": ["/a", ["/b"]], "object": {"x": [1]}, "null": None, "string": "x",
                   "negative": -(10**30)}.get(damage, marker)
    parent[path[-1]] = replacement
    text = json.dumps(raw)
    token = {"deep": DEEP, "nan": "NaN", "inf": "1e400"}.get(damage)
    return text.replace(json.dumps(marker), token) if token else text


@st.composite
def raw_mutation(draw: st.DrawFn) -> tuple[str, tuple[Any, ...], str]:
    name = draw(st.sampled_from(sorted(RAWS)))
    nodes = _nodes(json.loads(RAWS[name]))
    seed = draw(st.integers(min_value=0, max_value=len(nodes) - 1))
    return name, random.Random(seed).choice(nodes), draw(st.sampled_from(DAMAGE))


@SETTINGS
@given(raw_mutation())
def test_damaged_raw_facts_give_findings_never_an_internal_error(
    tmp_path: Path, case: tuple[str, tuple[Any, ...], str]
) -> None:
    name, path, damage = case
    _assert_clean(*_run(tmp_path, _damaged(RAWS[name], path, damage)))


@pytest.mark.parametrize("path,damage", [
    (("files", "model_path"), "list-of-paths"), (("target", "model_path"), "list-of-paths"),
    (("files", "config", "num_hidden_layers"), "nan"), (("tokenizer_files",), "deep"),
])
def test_the_damage_of_the_issue(tmp_path: Path, path: tuple[Any, ...], damage: str) -> None:
    _assert_clean(*_run(tmp_path, _damaged(RAWS["kimi-k2.6-loaded"], path, damage)))


def test_a_directory_as_raw_file_is_a_usage_error(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["profile", str(tmp_path), "--json"])
    assert code == 2
    assert any(line.startswith("error: ") and str(tmp_path) in line for line in err.getvalue().splitlines())


def test_absurd_safetensors_shapes_give_a_finding_not_a_37_digit_count() -> None:
    from introspect.analysis.profile import build_profile

    raw = json.loads(RAWS["kimi-k25-int4-8shards"])
    raw["safetensors"]["shards"][0]["groups"][0]["shape"] = [10**18, 10**18]
    profile = build_profile(raw)
    assert any(f["code"] == "safetensors-implausible" for f in profile["findings"])
    params = profile["architecture"]["params"]
    assert params["source"] == "config" and params["total"] < 10**13  # the config estimate, not the headers
    assert profile["plan"]["weights"] is None  # nor the plan's weight bytes
    numbers = [int(n) for n in __import__("re").findall(r"(?<![\w.])\d{16,}", json.dumps(profile))]
    assert all(n == 10**18 for n in numbers), numbers  # only the header's own dims, quoted in the finding


def test_the_plan_names_an_invalid_key_and_computes_no_kv_tokens_from_it() -> None:
    from introspect.analysis.profile import build_profile
    from introspect.analysis.serving.plan import GpuBudget
    from introspect.analysis.serving.section import replan
    from introspect.documents.profile import ProfileDocument

    raw = json.loads(RAWS["kimi-k25-int4-8shards"])
    raw["files"]["config"]["text_config"]["kv_lora_rank"] = "512"  # quoted: MLA unknown
    profile = build_profile(raw)
    assert profile["architecture"]["kv_cache"] is None
    assert profile["architecture"]["invalid_config"]["unknown"]["kv_cache"] == ["text_config.kv_lora_rank"]
    plan = replan(ProfileDocument.model_validate(profile), GpuBudget(count=8, memory_bytes=141 * 2**30))
    assert plan.kv_rule is not None and "text_config.kv_lora_rank" in plan.kv_rule
    assert plan.layouts and all(item.kv_tokens_per_gpu is None for item in plan.layouts)
