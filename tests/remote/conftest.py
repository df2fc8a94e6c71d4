"""Shared fixtures of the remote-probe tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures.shards import write_kimi_k25_int4_checkpoint


@pytest.fixture(scope="session")
def kimi_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """The 64-shard sparse Kimi-K2.5 INT4 checkpoint (written once) and its logical count."""
    model_dir = tmp_path_factory.mktemp("kimi") / "Kimi-K2.5"
    count = write_kimi_k25_int4_checkpoint(model_dir)
    return model_dir, count


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    """A minimal model directory with a config.json."""
    path = tmp_path / "model"
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    return path
