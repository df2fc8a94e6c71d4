"""Shared fixtures of the engine and plan tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.fixtures.shards import write_kimi_k25_int4_checkpoint


@pytest.fixture(scope="module")
def kimi_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A profile of the Kimi-K2.5 INT4 checkpoint's 64 sparse shards, probed once per module."""
    model = tmp_path_factory.mktemp("k25") / "Kimi-K2.5-INT4"
    write_kimi_k25_int4_checkpoint(model, shards=64)
    out = model.parent / "profile.json"
    result = run_cli("probe", "--model", str(model), "--no-tokenizer", "--max-json-bytes", str(64 << 20),
                     "--output", str(out), "--json")
    assert out.is_file(), result.stderr[-2000:]
    return out
