"""Issue 3 through the CLI: `introspect probe --model DIR --json` on real configs and on a
64-shard, 1T-parameter sparse checkpoint read over SSH (headers only)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, run_cli, ssh_flags
from tests.fixtures.shards import write_kimi_k25_int4_checkpoint
from tests.inprocess import run_main

REALCONFIGS = sorted(p for p in (REPO / "tests/data/realconfigs").iterdir() if p.is_dir())


def _kinds(profile: dict) -> dict:
    return profile["architecture"]["layers"]["kinds"]


# --no-model-code: what these tests assert (the config rules' verdicts, the safetensors headers)
# is the same with the config-class witness on (checked on all the real configs), and the witness
# costs ~2 CPU-s per probe; it runs on every real config in tests/witnesses/test_meta_models.py
# and through the CLI in tests/witnesses/test_probe_witnesses.py. The CLI runs in this process
# (tests/inprocess.py): its imports cost ten times the probe of one config.json.
@pytest.mark.parametrize("folder", REALCONFIGS, ids=lambda p: p.name)
def test_probe_json_on_real_configs(folder: Path, tmp_path):
    model = tmp_path / folder.name
    model.mkdir()
    shutil.copy(folder / "config.json", model / "config.json")
    result = run_main("probe", "--model", str(model), "--json", "--no-tokenizer", "--no-model-code")
    assert "Traceback" not in result.stderr
    profile = result.json()
    arch = profile["architecture"]
    expected = yaml.safe_load((folder / "expected.yaml").read_text())["expected"]
    assert arch["num_layers"] == expected["layer_counts"]["total"]
    assert sum(_kinds(profile).values()) == expected["layer_counts"]["total"]
    assert arch["layers"]["pure_attention"] is (not expected["is_hybrid"] and expected["attention_type"] != "none")
    assert arch["moe"]["is_moe"] is expected["is_moe"]
    if expected["is_moe"]:
        assert arch["moe"]["routed_experts"] == expected["routed_experts"]
        assert arch["moe"]["experts_per_token"] == expected["experts_per_token"]
        assert arch["moe"]["shared_experts"] == expected["shared_experts"]
        assert arch["moe"]["moe_layers"] == expected["moe_layers"]
    heads = expected.get("num_attention_heads")
    if heads is not None:
        assert arch["attention"]["num_heads"] == heads
    kind = str(expected["attention_type"]).split()[0]
    assert arch["attention"]["type"] == ("none" if kind == "none" else kind)


@pytest.mark.ssh
def test_safetensors_headers_of_1t_sparse_checkpoint_over_ssh(sshd, client_keys, venv_full, tmp_path):
    model = tmp_path / "Kimi-K2.5-int4"
    logical = write_kimi_k25_int4_checkpoint(model)
    result = run_cli("probe", *ssh_flags(sshd, client_keys), "--model", str(model), "--venv", str(venv_full),
                     "--json", "--no-tokenizer", "--no-model-code")
    assert "Traceback" not in result.stderr
    profile = result.json()
    params = profile["architecture"]["params"]
    assert params["source"] == "safetensors"
    assert params["safetensors"]["shards"] == 64
    assert params["safetensors"]["total"] == logical  # exact: packed INT4 counted as logical params
    assert not [f for f in profile["findings"] if f["code"] in ("params-mismatch", "weights-layer-mismatch")]
    assert profile["architecture"]["confirmed_by_weights"] == {"moe_layers": True, "mla_layers": True}
    shards = sorted(model.glob("*.safetensors"))
    read = profile["files"]["safetensors_bytes_read"]
    header_sizes = sum(8 + int.from_bytes(s.open("rb").read(8), "little") for s in shards)
    assert read == header_sizes  # the 8-byte length and the header of each shard, nothing more
    assert read / len(shards) < 1024 * 1024
