"""The "discover" task and the listing summary: a plain models root, the HF cache, drafters,
a symlink loop and an unreadable directory, none of which may stop the walk."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from introspect.client.discover import discover_facts, summarize_model
from introspect.remote.facts.model import hashes as hashes_facts
from introspect.remote.tasks import discover as discover_probe
from introspect.transport.local import LocalExecutor
from tests.fixtures.kimi_model import build_kimi_model
from tests.models import NEW_COMMIT, OLD_COMMIT, REPO_ID, add_revision, files_of

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

DFLASH = {"architectures": ["DFlashDraftModel"], "model_type": "qwen3", "num_hidden_layers": 6,
          "hidden_size": 7168, "block_size": 8,
          "dflash_config": {"mask_token_id": 163838, "target_layer_ids": [1, 12, 24, 35, 47, 58]}}
EAGLE3 = {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3", "draft_vocab_size": 32000,
          "speculators_config": {"algorithm": "eagle3",
                                 "verifier": {"name_or_path": "moonshotai/Kimi-K2.6",
                                              "architectures": ["KimiK25ForConditionalGeneration"]}},
          "transformer_layer_config": {"num_hidden_layers": 1, "hidden_size": 7168, "vocab_size": 163840}}


def _write_config(path: Path, config: Any) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config) if not isinstance(config, str) else config)
    return path


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """models/ with Kimi, two drafters, a deep model, a broken config, a symlink loop; and a hub cache."""
    base = tmp_path_factory.mktemp("discover")
    models = base / "models"
    kimi = build_kimi_model(models / "Kimi-K2.6")
    _write_config(models / "drafters" / "Kimi-K2.6-DFlash", DFLASH)
    _write_config(models / "drafters" / "Kimi-K2.6-EAGLE3", EAGLE3)
    _write_config(models / "a" / "b" / "c" / "d" / "deep", {"model_type": "gpt2", "n_layer": 12})
    _write_config(models / "broken", "{not json")
    _write_config(models / "not-a-model", {"name": "some tool's settings"})
    (models / "loop").mkdir()
    (models / "loop" / "back").symlink_to("..")          # back to an ancestor
    (models / "self").symlink_to("self")                  # ELOOP on stat
    (models / "Kimi-alias").symlink_to("Kimi-K2.6")       # the same model reached twice
    cache = base / "hub"
    files = files_of(kimi)
    add_revision(cache, REPO_ID, OLD_COMMIT, files, refs=("v1",), mtime=time.time() - 3600)
    changed = dict(files, **{"chat_template.jinja": files["chat_template.jinja"] + b"\n{# edited #}\n"})
    add_revision(cache, REPO_ID, NEW_COMMIT, changed, refs=("main",))
    return {"base": base, "models": models, "kimi": kimi, "cache": cache}


def _discover(tree: dict[str, Path], **extra: Any) -> dict[str, Any]:
    request = {"roots": [str(tree["models"])], "hf_cache": str(tree["cache"]), "max_depth": 4,
               "use_hf_scanner": True}
    request.update(extra)
    return json.loads(json.dumps(discover_probe.run(request)))  # what crosses the wire


def _by_path(facts: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["path"]: m for m in facts["models"]}


def test_plain_root_lists_models_with_digest_size_and_tokenizer(tree: dict[str, Path]) -> None:
    facts = _discover(tree)
    models = _by_path(facts)
    kimi = models[str(tree["kimi"])]
    assert kimi["source"] == "dir" and kimi["repo_id"] is None
    assert kimi["digest"]["model_type"] == "kimi_k25" and kimi["digest"]["text_model_type"] == "kimi_k2"
    assert kimi["digest"]["num_layers"] == 61 and kimi["digest"]["quant_method"] == "compressed-tensors"
    assert kimi["config"]["model_type"] == "kimi_k25"  # small enough to ship
    assert kimi["size"] == sum(p.stat().st_size for p in tree["kimi"].rglob("*") if p.is_file())
    assert kimi["tokenizer"]["layout"] == "tiktoken + remote code"
    assert kimi["tokenizer"]["class"] == "TikTokenTokenizer"
    assert kimi["aliases"] == [str(tree["models"] / "Kimi-alias")]
    assert kimi["drafter"] is None
    assert str(tree["models"] / "not-a-model") not in models
    broken = models[str(tree["models"] / "broken")]
    assert broken["config_error"]["type"] == "malformed-json" and broken["digest"] == {}


def test_depth_is_bounded(tree: dict[str, Path]) -> None:
    deep = str(tree["models"] / "a" / "b" / "c" / "d" / "deep")
    assert deep in _by_path(_discover(tree, max_depth=5))
    assert deep not in _by_path(_discover(tree, max_depth=3))


def test_symlink_loops_are_reported_and_skipped(tree: dict[str, Path]) -> None:
    facts = _discover(tree)
    loops = sorted(e["path"] for e in facts["errors"] if e["type"] == "symlink-loop")
    assert loops == [str(tree["models"] / "loop" / "back"), str(tree["models"] / "self")]
    assert all(e["probe"] == "discover" for e in facts["errors"])
    assert not facts["truncated"]


@pytest.mark.parametrize("scanner", [True, False])
def test_hf_cache_revisions_with_repo_id(tree: dict[str, Path], scanner: bool) -> None:
    facts = _discover(tree, use_hf_scanner=scanner)
    assert facts["hf_cache"]["scanner"] == ("huggingface_hub" if scanner else "stdlib")
    cached = [m for m in facts["models"] if m["source"] == "hf-cache"]
    assert [(m["repo_id"], m["commit"], m["revision"]) for m in cached] == [
        (REPO_ID, NEW_COMMIT, "main"), (REPO_ID, OLD_COMMIT, "v1")]
    new = cached[0]
    assert new["path"].endswith("/snapshots/" + NEW_COMMIT)
    assert new["digest"]["num_layers"] == 61 and new["tokenizer"]["layout"] == "tiktoken + remote code"
    # Snapshot files are links into blobs/: each revision's size is its blobs, once.
    snapshot_files = [p for p in Path(new["path"]).rglob("*") if p.is_file()]
    assert new["size"] == sum(p.stat().st_size for p in snapshot_files)


def test_a_root_inside_the_cache_gives_the_same_entries(tree: dict[str, Path]) -> None:
    facts = _discover(tree, roots=[str(tree["cache"])], hf_cache=str(tree["base"] / "no-cache"))
    assert facts["hf_cache"]["exists"] is False
    assert sorted(m["repo_id"] for m in facts["models"]) == [REPO_ID, REPO_ID]


def test_drafters_with_their_targets(tree: dict[str, Path]) -> None:
    models = _by_path(_discover(tree))
    dflash = models[str(tree["models"] / "drafters" / "Kimi-K2.6-DFlash")]
    eagle = models[str(tree["models"] / "drafters" / "Kimi-K2.6-EAGLE3")]
    assert "dflash_config.target_layer_ids" in dflash["drafter"]["signals"]
    assert dflash["drafter"]["target"] is None
    assert eagle["drafter"]["target"] == "moonshotai/Kimi-K2.6"
    assert eagle["drafter"]["target_key"] == "speculators_config.verifier.name_or_path"
    assert summarize_model(dflash)["drafter"]["kind"] == "dflash"
    summary = summarize_model(eagle)
    assert summary["drafter"]["kind"] == "eagle3" and summary["drafter"]["target"] == "moonshotai/Kimi-K2.6"


def test_missing_roots_required_or_optional(tree: dict[str, Path]) -> None:
    facts = _discover(tree, roots=[str(tree["base"] / "nope")], optional_roots=[str(tree["base"] / "nope2")])
    assert [r["status"] for r in facts["roots"]] == ["not-found", "not-found"]
    assert [e["type"] for e in facts["errors"]] == ["not-found"]


def test_summary_of_kimi(tree: dict[str, Path]) -> None:
    entry = _by_path(_discover(tree))[str(tree["kimi"])]
    row = summarize_model(entry)
    assert row["name"] == str(tree["kimi"])
    assert (row["model_type"], row["text_model_type"], row["layers"]) == ("kimi_k25", "kimi_k2", 61)
    assert 0.97e12 < row["params_total"] < 1.08e12 and 30e9 < row["params_active"] < 35e9
    assert row["quantization"].startswith("compressed-tensors 4-bit")
    assert row["tokenizer"] == "tiktoken + remote code" and row["drafter"] is None


def test_summary_without_shipped_config_uses_the_digest() -> None:
    entry = {"path": "/m/big", "config": None, "size": 10,
             "digest": {"model_type": "llama", "num_layers": 32, "quant_method": "fp8", "mtp_layers": 0},
             "tokenizer": {"layout": "tokenizer.json"}, "repo_id": "org/big", "commit": "ab" * 20,
             "revision": "main"}
    row = summarize_model(entry)
    assert (row["model_type"], row["layers"], row["quantization"]) == ("llama", 32, "fp8")
    assert row["params_total"] is None and row["name"] == f"org/big@main ({'ab' * 4})"
    assert summarize_model({})["name"] == "None"  # malformed entries never raise


def test_hashes_mode(tree: dict[str, Path]) -> None:
    out = discover_probe.run({"mode": "hashes", "model_path": str(tree["kimi"]), "json_cap": 1 << 20})
    hashes = out["hashes"]
    assert {"config.json", "chat_template.jinja", "tokenization_kimi.py", "tokenizer_config.json"} <= set(hashes["files"])
    assert "tiktoken.model" in {s["name"] for s in hashes["skipped"]}  # above the 1 MiB cap
    assert out["errors"] == []


def test_collect_hashes_weights_never_read(tmp_path: Path) -> None:
    model = _write_config(tmp_path / "m", {"model_type": "llama"})
    index = {"metadata": {"total_size": 123}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                                              "b": "model-00002-of-00002.safetensors"}}
    (model / "model.safetensors.index.json").write_text(json.dumps(index))
    shard = model / "model-00001-of-00002.safetensors"
    with open(shard, "wb") as fh:
        fh.truncate(5 * 1024**3)  # sparse: reading it would take seconds and gigabytes
    hashes, errors = hashes_facts.collect_hashes(str(model), json_cap=1 << 20)
    assert errors == []
    weights = hashes["weights"]
    assert weights["index"]["total_size"] == 123 and len(weights["index"]["sha256"]) == 64
    assert weights["shards"] == {"model-00001-of-00002.safetensors": 5 * 1024**3}
    assert weights["missing_shards"] == ["model-00002-of-00002.safetensors"]
    assert "model.safetensors.index.json" in hashes["files"]


def test_discover_through_the_shipped_task(tree: dict[str, Path]) -> None:
    with LocalExecutor() as executor:
        facts = discover_facts(executor, sys.executable, [str(tree["models"])], hf_cache=str(tree["cache"]))
    assert len([m for m in facts["models"] if m["source"] == "hf-cache"]) == 2
    assert {e["type"] for e in facts["errors"]} == {"symlink-loop"}


# --------------------------------------------------------------------------- unreadable dirs

AS_NOBODY = """
import json, sys
sys.path.insert(0, sys.argv[1])
from introspect.remote.tasks import discover as discover_probe
print(json.dumps(discover_probe.run({"roots": [sys.argv[2]], "hf_cache": "/nonexistent", "max_depth": 3})))
"""


def _locked_tree(base: Path) -> tuple[Path, Path]:
    base.chmod(0o755)
    root = base / "models"
    _write_config(root / "readable", {"model_type": "llama", "num_hidden_layers": 2})
    locked = root / "locked"
    _write_config(locked / "hidden-model", {"model_type": "llama"})
    root.chmod(0o755)
    (root / "readable").chmod(0o755)
    locked.chmod(0)
    return root, locked


def test_unreadable_dir_is_reported_and_skipped() -> None:
    """As root, chmod 000 blocks nothing: the walk then runs as 'nobody' to meet a real EACCES."""
    exe = "/usr/bin/python3" if IS_ROOT else sys.executable
    if IS_ROOT and not os.access(exe, os.X_OK):
        pytest.skip("no system python3 runnable by an unprivileged user")
    base = Path(tempfile.mkdtemp(prefix="introspect-discover-", dir="/tmp"))
    try:
        root, locked = _locked_tree(base)
        repo = str(Path(__file__).resolve().parents[2])
        extra = {"user": 65534, "group": 65534} if IS_ROOT else {}
        proc = subprocess.run([exe, "-B", "-c", AS_NOBODY, repo, str(root)], capture_output=True, text=True,
                              timeout=60, check=False, cwd="/", **extra)
        assert proc.returncode == 0, proc.stderr
        facts = json.loads(proc.stdout)
    finally:
        locked.chmod(0o755)
        shutil.rmtree(base)
    assert [m["path"] for m in facts["models"]] == [str(root / "readable")]
    [err] = facts["errors"]
    assert (err["type"], err["path"]) == ("permission-denied", str(locked))
