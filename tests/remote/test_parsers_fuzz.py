"""Property tests: the raw-file parsers never raise, whatever the bytes."""

from __future__ import annotations

import json
import os
import struct
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from introspect.remote.facts.model import custom_code, shard_header
from introspect.remote.facts.model import drafters as drafters_facts
from introspect.remote.facts.model.files import collect_files
from introspect.remote.facts.model.safetensors import collect_safetensors
from introspect.remote.facts.model.shard_header import parse_header, summarize_header, template_of

CAP = 1024 * 1024
FILE_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_scalars = st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats(
    allow_nan=False, allow_infinity=False) | st.text(max_size=20)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=5)
                           | st.dictionaries(st.text(max_size=12), inner, max_size=5), max_leaves=30)

tensor_entries = st.fixed_dictionaries(
    {},
    optional={
        "dtype": st.sampled_from(["BF16", "F32", "I32", "U8"]) | json_values,
        "shape": st.lists(st.integers(min_value=-3, max_value=2**40), max_size=4) | json_values,
        "data_offsets": st.lists(st.integers(min_value=-5, max_value=2**50), max_size=3) | json_values,
    },
)
tensor_names = st.lists(st.sampled_from(["model", "layers", "0", "12", "007", "mlp", "experts", "weight", ""]),
                        min_size=1, max_size=6).map(".".join) | st.text(max_size=30)
headers = st.dictionaries(tensor_names, tensor_entries | json_values, max_size=20)


@given(st.binary(max_size=2048))
def test_parse_header_random_bytes(raw: bytes) -> None:
    value, err = parse_header(raw)
    assert (value is None) != (err is None)
    if err is not None:
        assert err["type"] == "malformed-header"


@given(headers)
def test_summarize_header_random_entries(header: dict) -> None:
    summary = summarize_header(header)
    assert summary["tensors"] == sum(g["count"] for g in summary["groups"])
    assert summary["tensors"] + summary["invalid"] == len([k for k in header if k != "__metadata__"])
    for group in summary["groups"]:
        assert group["layer_ids"] == sorted(set(group["layer_ids"]))
    json.dumps(summary, allow_nan=False)


@given(st.text(max_size=80))
def test_template_of_replaces_only_digit_components(name: str) -> None:
    template, first = template_of(name)
    parts, tparts = name.split("."), template.split(".")
    assert len(parts) == len(tparts)
    numeric = [p for p in parts if p and all("0" <= c <= "9" for c in p)]
    assert tparts.count("#") - parts.count("#") == len(numeric)
    assert first == (int(numeric[0]) if numeric else None)


@given(st.binary(max_size=4096))
def test_scan_imports_random_source(source: bytes) -> None:
    result = custom_code.scan_imports(source)
    assert isinstance(result["imports"], list)


@given(st.text(max_size=400))
def test_scan_imports_random_text(source: str) -> None:
    custom_code.scan_imports(source.encode("utf-8"))


@given(json_values)
def test_config_walkers_random_json(value: object) -> None:
    custom_code.auto_map_references(value, "config.json:")
    drafters_facts.drafter_signals(value)
    custom_code.auto_map_references({"auto_map": value, "text_config": {"auto_map": value}}, "c:")
    for ref in ([value] if not isinstance(value, list) else value):
        custom_code.parse_class_reference(ref)


@FILE_SETTINGS
@given(st.binary(max_size=4096))
def test_random_bytes_as_config_json(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "config.json").write_bytes(content)
        Path(tmp, "tokenizer_config.json").write_bytes(content)
        facts, errors = collect_files(tmp, json_cap=CAP)
        assert facts["status"] == "ok"
        assert (facts["config"] is None) == any(Path(e["path"]).name == "config.json" for e in errors
                                                if e["type"] in ("malformed-json", "not-utf8", "wrong-type", "too-deep"))
        json.dumps(facts, allow_nan=False)
        assert all({"probe", "type", "message"} <= set(e) for e in errors)


@FILE_SETTINGS
@given(json_values)
def test_random_json_as_configs(value: object) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        text = json.dumps(value)
        for name in ("config.json", "tokenizer_config.json", "generation_config.json",
                     "preprocessor_config.json", "model.safetensors.index.json"):
            Path(tmp, name).write_text(text)
        facts, _errors = collect_files(tmp, json_cap=CAP)
        json.dumps(facts, allow_nan=False)
        st_facts, _ = collect_safetensors(tmp)
        json.dumps(st_facts, allow_nan=False)


@FILE_SETTINGS
@given(st.binary(max_size=4096))
def test_random_bytes_as_safetensors(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "model.safetensors").write_bytes(content)
        facts, errors = collect_safetensors(tmp, max_header=1024)
        (shard,) = facts["shards"]
        assert shard["bytes_read"] <= min(len(content), 8 + 1024)
        assert len(errors) == (0 if shard["error"] is None else 1)


@FILE_SETTINGS
@given(headers, st.integers(min_value=0, max_value=1 << 20))
def test_random_headers_with_valid_prefix(header: dict, data_len: int) -> None:
    raw = json.dumps(header).encode("utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "x.safetensors"), "wb") as fh:
            fh.write(struct.pack("<Q", len(raw)) + raw)
            fh.truncate(8 + len(raw) + data_len)
        facts, _errors = collect_safetensors(tmp)
        (shard,) = facts["shards"]
        assert shard["bytes_read"] == 8 + len(raw)
        assert shard["error"] is None or shard["error"]["type"] in ("malformed-header", "data-truncated")
        json.dumps(facts, allow_nan=False)


@FILE_SETTINGS
@given(st.binary(min_size=8, max_size=8), st.binary(max_size=256))
def test_random_length_prefix(prefix: bytes, rest: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "x.safetensors").write_bytes(prefix + rest)
        shard = shard_header.read_shard(os.path.join(tmp, "x.safetensors"))
        (declared,) = struct.unpack("<Q", prefix)
        assert shard["header_len"] == declared
        assert shard["bytes_read"] in (8, 8 + declared)
