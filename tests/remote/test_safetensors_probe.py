"""facts.safetensors, shard_header, index: header-only reads, summarised groups, index summary, shard errors."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import pytest

from introspect.remote.facts.model import index
from introspect.remote.facts.model.safetensors import collect_safetensors
from introspect.remote.facts.model.shard_header import read_shard, summarize_header, template_of
from tests.fixtures.shards import (
    KIMI_K25_CONFIG,
    apparent_and_real_size,
    build_header,
    kimi_k25_int4_tensors,
    stored_element_count,
    write_raw_shard,
    write_shard,
)

MiB = 1024 * 1024


def _logical_from_groups(shards: list[dict]) -> int:
    """What the aggregator does with the summary: INT4 packed x8, scales/shapes excluded."""
    total = 0
    for shard in shards:
        for g in shard["groups"]:
            if g["template"].endswith((".weight_scale", ".weight_shape")):
                continue
            n = math.prod(g["shape"]) * g["count"]
            total += n * 8 if g["template"].endswith(".weight_packed") and g["dtype"] == "I32" else n
    return total


def test_template_of() -> None:
    assert template_of("model.layers.12.mlp.experts.7.down_proj.weight") == (
        "model.layers.#.mlp.experts.#.down_proj.weight", 12)
    assert template_of("lm_head.weight") == ("lm_head.weight", None)
    assert template_of("a.0x1.b2.03") == ("a.0x1.b2.#", 3)
    assert template_of("a.\u00b2.b") == ("a.\u00b2.b", None)  # unicode digits are not layer ids


def test_small_shard_groups(tmp_path: Path) -> None:
    tensors = [(f"model.layers.{layer}.mlp.experts.{e}.down_proj.weight", "BF16", [16, 8])
               for layer in (3, 1, 2) for e in range(4)]
    tensors += [("model.embed_tokens.weight", "BF16", [100, 16]), ("model.layers.1.norm.weight", "F32", [16])]
    header_len = write_shard(tmp_path / "model.safetensors", tensors, metadata={"format": "pt"})
    facts, errors = collect_safetensors(str(tmp_path))
    assert errors == []
    (shard,) = facts["shards"]
    assert shard["file"] == "model.safetensors"
    assert shard["header_len"] == header_len
    assert shard["bytes_read"] == 8 + header_len == facts["bytes_read"]
    assert shard["tensors"] == 14 == facts["tensors"]
    assert shard["metadata"] == {"format": "pt"}
    assert shard["error"] is None
    assert shard["size"] == os.path.getsize(tmp_path / "model.safetensors")
    assert shard["groups"] == [
        {"template": "model.embed_tokens.weight", "dtype": "BF16", "shape": [100, 16], "count": 1, "layer_ids": []},
        {"template": "model.layers.#.mlp.experts.#.down_proj.weight", "dtype": "BF16", "shape": [16, 8],
         "count": 12, "layer_ids": [1, 2, 3]},
        {"template": "model.layers.#.norm.weight", "dtype": "F32", "shape": [16], "count": 1, "layer_ids": [1]},
    ]
    assert facts["index"] is None


def test_same_template_different_shapes_are_separate_groups(tmp_path: Path) -> None:
    write_shard(tmp_path / "a.safetensors", [("layers.0.w", "BF16", [4, 4]), ("layers.1.w", "BF16", [4, 8]),
                                             ("layers.2.w", "F32", [4, 4])])
    (shard,) = collect_safetensors(str(tmp_path))[0]["shards"]
    assert [(g["dtype"], g["shape"], g["layer_ids"]) for g in shard["groups"]] == [
        ("BF16", [4, 4], [0]), ("BF16", [4, 8], [1]), ("F32", [4, 4], [2])]


def test_data_truncated_is_a_warning_but_header_counts(tmp_path: Path) -> None:
    write_shard(tmp_path / "model.safetensors", [("w", "F32", [1000, 1000])], data_len=1000)
    facts, errors = collect_safetensors(str(tmp_path))
    (shard,) = facts["shards"]
    assert shard["error"]["type"] == "data-truncated"
    assert shard["tensors"] == 1 and shard["groups"][0]["shape"] == [1000, 1000]
    assert [(e["type"], e["probe"]) for e in errors] == [("data-truncated", "safetensors")]
    assert errors[0]["path"] == str(tmp_path / "model.safetensors")


def test_entries_that_are_not_tensors(tmp_path: Path) -> None:
    header = json.dumps({
        "ok": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]},
        "no_dtype": {"shape": [2], "data_offsets": [0, 4]},
        "bad_shape": {"dtype": "F16", "shape": [-1], "data_offsets": [0, 4]},
        "bool_shape": {"dtype": "F16", "shape": [True], "data_offsets": [0, 4]},
        "bad_offsets": {"dtype": "F16", "shape": [2], "data_offsets": [4, 0]},
        "not_a_dict": 5,
        "__metadata__": "not a dict",
    }).encode()
    write_raw_shard(tmp_path / "m.safetensors", header, 4)
    (shard,) = collect_safetensors(str(tmp_path))[0]["shards"]
    assert shard["tensors"] == 1
    assert shard["metadata"] is None
    assert shard["error"]["type"] == "malformed-header"
    assert "5 header entries" in shard["error"]["message"]


def test_index_summary_and_missing_shard(tmp_path: Path) -> None:
    write_shard(tmp_path / "model-00001-of-00002.safetensors", [("a", "BF16", [2])])
    index = {"metadata": {"total_size": 8}, "weight_map": {
        "a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    facts, errors = collect_safetensors(str(tmp_path))
    assert facts["index"] == {"file": "model.safetensors.index.json", "total_size": 8, "weight_map_entries": 2,
                              "shards": ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"],
                              "missing_shards": ["model-00002-of-00002.safetensors"]}
    assert [e["type"] for e in errors] == ["missing-shard"]


@pytest.mark.parametrize("odd", [["x"], {"x": 1}, 7, None, True])
def test_index_values_that_are_no_shard_name_are_counted_not_listed(tmp_path: Path, odd: object) -> None:
    """A list or object among the weight_map's values (unhashable: the set of distinct values
    cannot be built in one go) or a number is an entry, never a shard."""
    write_shard(tmp_path / "model-00001-of-00001.safetensors", [("a", "BF16", [2])])
    index = {"weight_map": {"a": "model-00001-of-00001.safetensors", "b": odd, "c": "model-00001-of-00001.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    facts, _errors = collect_safetensors(str(tmp_path))
    assert facts["index"]["weight_map_entries"] == 3
    assert facts["index"]["shards"] == ["model-00001-of-00001.safetensors"] and facts["index"]["missing_shards"] == []


def test_malformed_index(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": "x"}}))
    facts, errors = collect_safetensors(str(tmp_path))
    assert facts["index"]["total_size"] is None and facts["index"]["weight_map_entries"] == 0
    assert [e["type"] for e in errors] == ["malformed-index"]
    (tmp_path / "model.safetensors.index.json").write_text("[]")
    facts, errors = collect_safetensors(str(tmp_path))
    assert facts["index"] is None
    assert [e["type"] for e in errors] == ["wrong-type"]


def test_no_shards(tmp_path: Path) -> None:
    assert collect_safetensors(str(tmp_path)) == ({"index": None, "shards": [], "bytes_read": 0, "tensors": 0}, [])


def test_symlinked_shards_in_hf_cache(tmp_path: Path) -> None:
    blobs = tmp_path / "blobs"
    snap = tmp_path / "snapshots" / "rev"
    blobs.mkdir()
    snap.mkdir(parents=True)
    header_len = write_shard(blobs / "deadbeef", [("x.0.w", "BF16", [64, 64])])
    os.symlink("../../blobs/deadbeef", snap / "model.safetensors")
    (shard,) = collect_safetensors(str(snap))[0]["shards"]
    assert shard["error"] is None
    assert shard["size"] == 8 + header_len + 64 * 64 * 2
    assert shard["groups"][0]["layer_ids"] == [0]


def test_workers_do_not_change_the_result(tmp_path: Path) -> None:
    for i in range(1, 6):
        write_shard(tmp_path / f"model-{i:05d}-of-00005.safetensors", [(f"layers.{i}.w", "BF16", [i, 3])])
    one = collect_safetensors(str(tmp_path), workers=1)
    many = collect_safetensors(str(tmp_path), workers=16)
    zero = collect_safetensors(str(tmp_path), workers=0)
    assert one == many == zero
    assert [s["file"] for s in one[0]["shards"]] == sorted(p.name for p in tmp_path.iterdir())


def test_summarize_header_direct() -> None:
    raw, _ = build_header([("layers.0.w", "BF16", [2, 2]), ("layers.1.w", "BF16", [2, 2])], {"k": "v"})
    summary = summarize_header(json.loads(raw))
    assert summary["tensors"] == 2 and summary["invalid"] == 0 and summary["data_end"] == 16
    assert summary["groups"][0]["count"] == 2 and summary["groups"][0]["layer_ids"] == [0, 1]


# --------------------------------------------------------------------------- 64-shard Kimi-K2.5 INT4


def _rchar() -> int | None:
    try:
        with open("/proc/self/io") as fh:
            for line in fh:
                if line.startswith("rchar:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def test_kimi_k25_sparse_checkpoint(kimi_checkpoint: tuple[Path, int]) -> None:
    path, logical = kimi_checkpoint
    shard_paths = sorted(path.glob("*.safetensors"))
    assert len(shard_paths) == 64 and shard_paths[0].name == "model-00001-of-000064.safetensors"
    apparent = sum(apparent_and_real_size(p)[0] for p in shard_paths)
    allocated = sum(apparent_and_real_size(p)[1] for p in shard_paths)
    assert apparent > 500 * 1024**3  # ~0.6 TB apparent: the real release's size
    assert allocated < 200 * MiB  # headers only: the data sections are holes

    before = _rchar()
    started = time.monotonic()
    facts, errors = collect_safetensors(str(path))
    elapsed = time.monotonic() - started
    after = _rchar()

    assert errors == []
    assert len(facts["shards"]) == 64
    for shard in facts["shards"]:
        assert shard["error"] is None
        assert shard["bytes_read"] == 8 + shard["header_len"]
        assert shard["bytes_read"] <= shard["header_len"] + 8 + MiB
        assert shard["size"] > shard["header_len"] + 8
    header_total = sum(s["header_len"] + 8 for s in facts["shards"])
    assert facts["bytes_read"] == header_total
    if before is not None and after is not None:
        # Independent of the probe's own accounting: the process read the headers and
        # the index, and nothing of the ~600 GB of (sparse) tensor data.
        index_size = (path / "model.safetensors.index.json").stat().st_size
        assert after - before <= header_total + index_size + 16 * MiB
    assert elapsed < 60

    config = json.loads(KIMI_K25_CONFIG.read_text())
    tensors = kimi_k25_int4_tensors(config)
    assert facts["tensors"] == len(tensors)
    assert _logical_from_groups(facts["shards"]) == logical
    assert abs(logical - 1.0264e12) / 1.0264e12 < 0.001
    stored = sum(math.prod(g["shape"]) * g["count"] for s in facts["shards"] for g in s["groups"])
    assert stored == stored_element_count(tensors)

    groups = [g for s in facts["shards"] for g in s["groups"]]
    down = [g for g in groups if g["template"] == "language_model.model.layers.#.mlp.experts.#.down_proj.weight_packed"]
    assert {(g["dtype"], tuple(g["shape"])) for g in down} == {("I32", (7168, 256))}
    assert sum(g["count"] for g in down) == 60 * 384
    assert sorted({i for g in down for i in g["layer_ids"]}) == list(range(1, 61))
    scale = [g for g in groups if g["template"].endswith("experts.#.gate_proj.weight_scale")]
    assert {(g["dtype"], tuple(g["shape"])) for g in scale} == {("BF16", (2048, 224))}
    dense = [g for g in groups if g["template"] == "language_model.model.layers.#.mlp.gate_proj.weight"]
    assert [(g["shape"], g["layer_ids"]) for g in dense] == [([18432, 7168], [0])]
    kv_b = [g for g in groups if g["template"].endswith("self_attn.kv_b_proj.weight")]
    assert sum(g["count"] for g in kv_b) == 61 and kv_b[0]["shape"] == [16384, 512]
    bias = [g for g in groups if g["template"].endswith("mlp.gate.e_score_correction_bias")]
    assert {g["dtype"] for g in bias} == {"F32"} and sum(g["count"] for g in bias) == 60

    index = facts["index"]
    assert index["weight_map_entries"] == len(tensors)
    assert len(index["shards"]) == 64 and index["missing_shards"] == []


def test_kimi_summary_is_compact(kimi_checkpoint: tuple[Path, int]) -> None:
    """The point of summarising: ~200k header entries ship as a few hundred KB."""
    facts, _ = collect_safetensors(str(kimi_checkpoint[0]))
    assert len(json.dumps(facts)) < 1 * MiB


def test_index_is_parsed_once_per_run(kimi_checkpoint: tuple[Path, int], monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = index._summarize_index
    monkeypatch.setattr(index, "_index_cache", {})
    monkeypatch.setattr(index, "_summarize_index", lambda *a: calls.append(a) or real(*a))
    first = index.summarize_index(str(kimi_checkpoint[0]))
    second = index.summarize_index(str(kimi_checkpoint[0]))
    assert first == second and len(calls) == 1


def test_read_shard_never_raises_on_directories(tmp_path: Path) -> None:
    (tmp_path / "x.safetensors").mkdir()
    shard = read_shard(str(tmp_path / "x.safetensors"))
    assert shard["error"]["type"] == "is-a-directory"
    assert shard["bytes_read"] == 0
