"""Mangled configs never crash the aggregator (hypothesis).

config.json is untrusted input from a remote host: keys go missing, values take
the wrong type, turn null, grow absurdly large, and a caller handing over Python
objects can even build a dict that contains itself. Whatever comes in, the
architecture analysis returns a JSON-serialisable section and a findings list,
without the last-resort ``analysis-failed`` finding (which would mean a verdict
module raised).
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from introspect.analysis.architecture.safetensors_count import count_safetensors
from introspect.analysis.architecture.section import analyze_architecture
from introspect.documents.profile_architecture import Quantization

DATA = Path(__file__).resolve().parents[1] / "data"
SEEDS = [json.loads(p.read_text()) for p in sorted((DATA / "realconfigs").glob("*/config.json"))]
SEEDS += [json.loads(p.read_text())["config"] for p in sorted((DATA / "families").glob("*.json"))]

KEYS = sorted(
    {key for seed in SEEDS for key in seed} | {key for seed in SEEDS for key in seed.get("text_config", {})}
)

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([0, 1, -1, 2**31, 2**63, 10**18, 10**400]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(
        ["linear_attention", "full_attention", "sliding_attention", "mamba", "hybrid", "M-*E", "sigmoid"]
    ),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=6)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), inner, max_size=6)
    ),
    max_leaves=25,
)


def _check(config: Any, **kwargs: Any) -> None:
    arch, findings = analyze_architecture(config, **kwargs)
    assert isinstance(arch, dict) and isinstance(findings, list)
    assert all(f["severity"] in ("error", "warning", "info") for f in findings)
    assert not [f for f in findings if f["code"] == "analysis-failed"], findings
    json.dumps(arch, allow_nan=False)  # plain, finite, acyclic JSON


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(config=JSON)
def test_arbitrary_json_never_raises(config: Any) -> None:
    _check(config)


@FUZZ
@given(
    seed=st.sampled_from(range(len(SEEDS))),
    drops=st.lists(st.sampled_from(KEYS), max_size=8),
    edits=st.dictionaries(st.sampled_from(KEYS), JSON, max_size=8),
    nested=st.booleans(),
)
def test_mangled_real_configs_never_raise(
    seed: int, drops: list[str], edits: dict[str, Any], nested: bool
) -> None:
    config = copy.deepcopy(SEEDS[seed])
    target = config["text_config"] if nested and isinstance(config.get("text_config"), dict) else config
    for key in drops:
        target.pop(key, None)
    target.update(edits)
    _check(config)


@FUZZ
@given(seed=st.sampled_from(range(len(SEEDS))), key=st.sampled_from(KEYS), value=SCALARS)
def test_one_wrong_value(seed: int, key: str, value: Any) -> None:
    config = copy.deepcopy(SEEDS[seed])
    config[key] = value
    if isinstance(config.get("text_config"), dict):
        config["text_config"][key] = value
    _check(config)


@FUZZ
@given(
    seed=st.sampled_from(range(len(SEEDS))),
    where=st.sampled_from(KEYS + ["text_config", "linear_attn_config"]),
)
def test_self_containing_dicts(seed: int, where: str) -> None:
    config = copy.deepcopy(SEEDS[seed])
    config[where] = config  # a dict that contains itself
    inner = config.get("text_config")
    if isinstance(inner, dict):
        inner["text_config"] = inner
        inner["quantization_config"] = {"config_groups": {"g": inner}}
    loop: list[Any] = []
    loop.append(loop)
    config["layer_types"] = loop
    _check(
        config,
        safetensors={"shards": [{"groups": [config]}]},
        drafters=[{"path": "d", "config": config}, config, None],
    )


@FUZZ
@given(safetensors=JSON, drafters=JSON)
def test_garbage_side_inputs(safetensors: Any, drafters: Any) -> None:
    _check(SEEDS[0], safetensors=safetensors, drafters=drafters)
    _check(None, safetensors=safetensors, drafters=drafters)


@FUZZ
@given(
    groups=st.lists(
        st.fixed_dictionaries(
            {
                "template": st.sampled_from(
                    ["model.layers.#.mlp.experts.#.w.weight_packed", "x.qweight", "a_blocks", "a_scales", "w"]
                ),
                "dtype": st.sampled_from(["I32", "U8", "BF16", "F8_E4M3", "??", 3]),
                "shape": st.lists(st.integers(min_value=-3, max_value=10**6), max_size=4) | SCALARS,
                "count": st.integers(min_value=-3, max_value=10**6) | SCALARS,
                "layer_ids": st.lists(st.integers(min_value=-3, max_value=100), max_size=4) | SCALARS,
            }
        ),
        max_size=8,
    )
)
def test_counter_on_garbage_groups(groups: list[dict[str, Any]]) -> None:
    four_bits = Quantization(method="unknown", bits=4, group_size=None, symmetric=None, format=None, targets=None,
                             ignore=None)
    result = count_safetensors({"shards": [{"groups": groups, "error": None}]}, four_bits, num_layers=3)
    assert result is not None and result.total >= 0


def test_none_and_non_objects_are_findings() -> None:
    arch, findings = analyze_architecture(None)
    assert [f["code"] for f in findings] == ["config-missing"]
    assert arch["num_layers"] is None
    for value in ([], "x", 3, 2.5, True, [{"model_type": "llama"}]):
        _, findings = analyze_architecture(value)
        assert [f["code"] for f in findings] == ["config-invalid"]


def test_huge_layer_count_is_refused_not_built() -> None:
    arch, findings = analyze_architecture(
        {"model_type": "llama", "num_hidden_layers": 10**15, "hidden_size": 4096}
    )
    assert arch["num_layers"] is None and arch["layers"]["pattern"] == []
    assert "layers-unknown" in [f["code"] for f in findings]


def test_nan_and_infinity_stay_out() -> None:
    config = {
        "model_type": "deepseek_v3",
        "num_hidden_layers": 2,
        "hidden_size": 8,
        "routed_scaling_factor": math.nan,
    }
    config |= {
        "n_routed_experts": 4,
        "num_experts_per_tok": math.inf,
        "num_attention_heads": 2,
        "vocab_size": 16,
    }
    arch, _ = analyze_architecture(config)
    assert arch["moe"]["routed_scaling_factor"] is None and arch["moe"]["experts_per_token"] is None
