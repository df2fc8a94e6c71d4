"""The regex fast path of the header summary equals the JSON path wherever it answers."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from introspect.remote.facts.model.header_scan import scan_header
from introspect.remote.facts.model.shard_header import parse_header, summarize_header

NAME_PARTS = ["model", "layers", "0", "12", "007", "mlp", "experts", "weight", "", "proj1", "²", "1e5", "a b"]
names = st.lists(st.sampled_from(NAME_PARTS), min_size=1, max_size=6).map(".".join) | st.text(max_size=12)
dims = st.lists(st.integers(min_value=0, max_value=2**40), max_size=4)
entries = st.tuples(st.sampled_from(["BF16", "F32", "I32", "F8_E4M3", "", "Ω"]), dims,
                    st.integers(min_value=0, max_value=2**50), st.integers(min_value=0, max_value=2**20))
metadata = st.none() | st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3) | st.integers()
separators = st.sampled_from([(",", ":"), (", ", ": "), (",\n", " : "), ("\t,", ":\r")])


def _header(tensors: dict, meta: object, where: int) -> dict:
    items = [(name, {"dtype": dtype, "shape": shape, "data_offsets": [begin, begin + size]})
             for name, (dtype, shape, begin, size) in tensors.items()]
    if meta is not None:
        items.insert(min(where, len(items)), ("__metadata__", meta))
    return dict(items)


def _json_path(text: str) -> dict | None:
    value, err = parse_header(text.encode("utf-8"))
    return None if value is None else summarize_header(value)


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(names, entries, min_size=1, max_size=25), metadata, st.integers(0, 30), separators,
       st.booleans())
def test_canonical_headers_take_the_fast_path_with_the_same_summary(tensors, meta, where, seps, ascii_only):
    header = _header(tensors, meta, where)
    text = json.dumps(header, separators=seps, ensure_ascii=ascii_only) + " " * where
    fast = scan_header(text)
    if "\\" in text:
        assert fast is None or fast == _json_path(text)  # escapes (names, dtypes) are left to the JSON path
    else:
        assert fast is not None and fast == _json_path(text)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(names, entries, min_size=1, max_size=8), metadata, st.integers(0, 8), st.data())
def test_any_mutation_is_answered_exactly_or_left_to_the_json_path(tensors, meta, where, data):
    text = json.dumps(_header(tensors, meta, where), separators=(",", ":"), ensure_ascii=False)
    at = data.draw(st.integers(0, len(text)))
    cut = data.draw(st.integers(0, 3))
    insert = data.draw(st.sampled_from(["", "0", "-", ",", "}", "{", '"', "\\", " ", "01", '"x":1,', "[", "]", "e5"]))
    mutated = text[:at] + insert + text[at + cut:]
    fast = scan_header(mutated)
    assert fast is None or fast == _json_path(mutated)


@pytest.mark.parametrize("text", [
    '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}',
    '{"a":{"dtype":"F32","shape":[01],"data_offsets":[0,4]}}',
    '{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}}',
    '{"a\\u0041":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}',
    '{"__metadata__":{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}}',
    '{"__metadata__":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}',
    '{"a":{"dtype":"F32","shape":[1,,2],"data_offsets":[0,4]}}',
    '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}}',
    '{}',
])
def test_what_the_fast_path_leaves_to_json(text: str) -> None:
    assert scan_header(text) is None


def test_reference_writer_header_with_metadata() -> None:
    text = ('{"__metadata__":{"format":"pt"},"model.layers.0.mlp.weight":{"dtype":"BF16","shape":[8,4],'
            '"data_offsets":[0,64]},"model.layers.1.mlp.weight":{"dtype":"BF16","shape":[8,4],"data_offsets":[64,128]},'
            '"lm_head.weight":{"dtype":"F32","shape":[],"data_offsets":[128,132]}}    ')
    fast = scan_header(text)
    assert fast == _json_path(text)
    assert fast is not None and fast["tensors"] == 3 and fast["data_end"] == 132
    assert fast["metadata"] == {"format": "pt"}
    assert [g["layer_ids"] for g in fast["groups"]] == [[], [0, 1]]


DIGITY = ["model", "layers", "0", "12", "007", "h2o", "2b", "w1", "proj1", "²", "", "1e5", "a b", "x.9"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.sampled_from(DIGITY), min_size=1, max_size=6).map(".".join) | st.text(max_size=10),
                max_size=30))
def test_templates_of_many_names_equal_the_one_name_reference(names: list[str]) -> None:
    """The joined two-pass form (shared by both header paths) against template_of, name by name."""
    from introspect.remote.facts.model.shard_header import _templates, template_of

    templates, firsts = _templates(names)
    expected = [template_of(name) for name in names]
    assert templates == [t for t, _ in expected]
    assert [int(f) if f else None for f in firsts] == [n for _, n in expected]
