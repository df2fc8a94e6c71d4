"""Big checkpoints are summarised in forked workers; the result is the same as one interpreter's."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from introspect.remote import contract
from introspect.remote.facts.model import safetensors, shard_header, shard_workers
from tests.fixtures.shards import write_kimi_k25_int4_checkpoint


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "m"
    write_kimi_k25_int4_checkpoint(path, shards=16)
    return path


def test_forked_workers_give_the_threaded_result(checkpoint, monkeypatch):
    monkeypatch.setattr(shard_workers, "fork_workers", lambda: 2)
    forked = shard_workers.read_in_processes(
        sorted(str(p) for p in checkpoint.glob("*.safetensors")), contract.DEFAULT_MAX_HEADER)
    assert forked is not None and len(forked) == 16
    facts, errors = safetensors.collect_safetensors(str(checkpoint))
    monkeypatch.setattr(safetensors, "FORK_MIN_SHARDS", 10**9)  # force the threaded path
    threaded, threaded_errors = safetensors.collect_safetensors(str(checkpoint))
    assert errors == threaded_errors == []
    assert json.dumps(facts, sort_keys=True) == json.dumps(threaded, sort_keys=True)
    assert [s["file"] for s in forked] == [s["file"] for s in threaded["shards"]]


def test_no_fork_falls_back_to_threads(checkpoint, monkeypatch):
    monkeypatch.setattr(shard_workers, "fork_workers", lambda: 0)
    assert shard_workers.read_in_processes([str(checkpoint / "x")] * 8, 1024) is None
    facts, errors = safetensors.collect_safetensors(str(checkpoint))
    assert len(facts["shards"]) == 16 and errors == []


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="ab.0123456789²_\n", min_size=1, max_size=24), min_size=1, max_size=30))
def test_bulk_templates_equal_one_by_one(names):
    templates, firsts = shard_header._templates(names)
    one_by_one = [shard_header.template_of(name) for name in names]
    assert templates == [t for t, _ in one_by_one]
    assert [int(f) if f else None for f in firsts] == [n for _, n in one_by_one]
