"""The hub cache reader and the "resolve" task, on a cache layout built by the test.

Two revisions of one repo, as huggingface_hub writes them: blobs named by hash,
snapshot files as relative symlinks into ``blobs/``, ``refs/main`` and a tag.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from introspect.client.hub import is_repo_id, resolve_model
from introspect.errors import ModelPathError
from introspect.remote.facts.model import hf_cache
from introspect.remote.tasks import resolve
from introspect.transport.local import LocalExecutor
from tests.models import NEW_COMMIT, OLD_COMMIT, REPO_ID, add_revision, repo_dir

CONFIG = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2}


def _files(template: str) -> dict[str, bytes]:
    return {"config.json": json.dumps(CONFIG).encode(), "chat_template.jinja": template.encode(),
            "tokenizer_config.json": b"{}", "nested/extra.json": b'{"x": 1}'}


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    root = tmp_path / "hub"
    now = time.time()
    add_revision(root, REPO_ID, OLD_COMMIT, _files("old {{ x }}"), refs=("v1.0",), mtime=now - 3600)
    add_revision(root, REPO_ID, NEW_COMMIT, _files("new {{ x }}"), refs=("main",), mtime=now)
    add_revision(root, "other-org/Other", "abcdef0123456789abcdef0123456789abcdef01", _files("x"), refs=("main",))
    return root


def _resolve(cache: Path, spec: str) -> dict:
    return resolve.run({"spec": spec, "cache_dir": str(cache)})


def test_layout_is_real_symlinks_into_blobs(cache: Path) -> None:
    snapshot = repo_dir(cache, REPO_ID) / "snapshots" / NEW_COMMIT
    link = snapshot / "config.json"
    assert link.is_symlink() and os.readlink(link).startswith("../../blobs/")
    assert os.readlink(snapshot / "nested" / "extra.json").startswith("../../../blobs/")
    assert json.loads(link.read_text()) == CONFIG


def test_newest_snapshot_by_default(cache: Path) -> None:
    out = _resolve(cache, REPO_ID)
    assert out["errors"] == []
    assert out["path"] == str(repo_dir(cache, REPO_ID) / "snapshots" / NEW_COMMIT)
    assert (out["commit"], out["revision"], out["refs"]) == (NEW_COMMIT, "main", ["main"])
    assert [r["commit"] for r in out["cached_revisions"]] == [NEW_COMMIT, OLD_COMMIT]


def test_newest_follows_mtime_not_name(cache: Path) -> None:
    snapshots = repo_dir(cache, REPO_ID) / "snapshots"
    future = time.time() + 3600
    os.utime(snapshots / OLD_COMMIT, (future, future))
    assert _resolve(cache, REPO_ID)["commit"] == OLD_COMMIT


@pytest.mark.parametrize("rev", ["v1.0", OLD_COMMIT, OLD_COMMIT[:4], OLD_COMMIT[:12].upper()])
def test_by_ref_or_commit_prefix(cache: Path, rev: str) -> None:
    out = _resolve(cache, f"{REPO_ID}@{rev}")
    assert out["errors"] == [] and out["commit"] == OLD_COMMIT
    assert out["path"].endswith("/snapshots/" + OLD_COMMIT)
    assert out["revision"] == rev


def test_ref_name_wins_over_hex_prefix(cache: Path) -> None:
    ref = repo_dir(cache, REPO_ID) / "refs" / "3333"
    ref.write_text(OLD_COMMIT)  # a tag that looks like a prefix of the newer commit
    assert _resolve(cache, f"{REPO_ID}@3333")["commit"] == OLD_COMMIT


def test_unknown_revision_lists_cached_ones(cache: Path) -> None:
    out = _resolve(cache, f"{REPO_ID}@v9")
    assert out["path"] is None
    [err] = out["errors"]
    assert err["type"] == "revision-not-cached"
    assert "v9" in err["message"]
    assert f"{NEW_COMMIT[:12]} (main)" in err["message"] and f"{OLD_COMMIT[:12]} (v1.0)" in err["message"]
    assert len(out["cached_revisions"]) == 2


def test_ambiguous_prefix_and_dangling_ref(cache: Path) -> None:
    add_revision(cache, REPO_ID, "1111999999999999999999999999999999999999", _files("third"))
    err = _resolve(cache, f"{REPO_ID}@1111")["errors"][0]
    assert "ambiguous" in err["message"]
    (repo_dir(cache, REPO_ID) / "refs" / "gone").write_text("f" * 40)
    err = _resolve(cache, f"{REPO_ID}@gone")["errors"][0]
    assert "not cached" in err["message"] and "ffffffffffff" in err["message"]


def test_repo_not_cached_names_the_cache_and_what_is_there(cache: Path) -> None:
    out = _resolve(cache, "moonshotai/Kimi-K2.5")
    [err] = out["errors"]
    assert err["type"] == "not-cached"
    assert str(cache) in err["message"] and REPO_ID in err["message"]
    missing = _resolve(cache / "nowhere", REPO_ID)["errors"][0]
    assert "there is no hub cache" in missing["message"]


@pytest.mark.parametrize("spec", ["", "a/b/c", "org/../x", "org/name@", "org/na me"])
def test_bad_specs(cache: Path, spec: str) -> None:
    out = _resolve(cache, spec)
    assert out["path"] is None and out["errors"][0]["type"] == "bad-spec"


def test_cache_location_follows_the_environment() -> None:
    assert hf_cache.cache_dir("/x/hub", {"HF_HUB_CACHE": "/y"}) == "/x/hub"
    assert hf_cache.cache_dir(None, {"HF_HUB_CACHE": "/y", "HF_HOME": "/z"}) == "/y"
    assert hf_cache.cache_dir(None, {"HUGGINGFACE_HUB_CACHE": "/legacy"}) == "/legacy"
    assert hf_cache.cache_dir(None, {"HF_HOME": "/z"}) == "/z/hub"
    assert hf_cache.cache_dir(None, {"XDG_CACHE_HOME": "/c"}) == "/c/huggingface/hub"
    assert hf_cache.cache_dir(None, {}) == os.path.expanduser("~/.cache/huggingface/hub")


def test_list_repos_and_folder_names(cache: Path) -> None:
    (cache / "datasets--org--data").mkdir()
    (cache / ".locks").mkdir()
    repos, errors = hf_cache.list_repos(str(cache))
    assert errors == [] and [r["repo_id"] for r in repos] == [REPO_ID, "other-org/Other"]
    assert hf_cache.repo_folder_name("org/name") == "models--org--name"
    assert hf_cache.parse_repo_folder("models--org--name") == ("model", "org/name")
    assert hf_cache.parse_repo_folder("blobs") is None


@pytest.mark.parametrize(("spec", "expected"), [
    ("moonshotai/Kimi-K2.6", True), ("moonshotai/Kimi-K2.6@main", True), ("org/name@refs/pr/1", True),
    ("org/name@0123abcd", True), ("/root/models/x", False), ("./models/x", False), ("~/models/x", False),
    ("models", False), ("a/b/c", False), ("org/name@", False), ("org/..", False), ("", False),
])
def test_is_repo_id(spec: str, expected: bool) -> None:
    assert is_repo_id(spec) is expected


def test_resolve_model_through_the_shipped_task(cache: Path) -> None:
    with LocalExecutor() as executor:
        path, facts = resolve_model(executor, sys.executable, f"{REPO_ID}@v1.0", 30, cache_dir=str(cache))
        assert path.endswith(OLD_COMMIT) and facts["repo_id"] == REPO_ID
        with pytest.raises(ModelPathError) as info:
            resolve_model(executor, sys.executable, f"{REPO_ID}@nope", 30, cache_dir=str(cache))
    err = info.value
    assert err.exit_code == 2 and err.stage == "resolve"
    assert OLD_COMMIT[:12] in err.message and NEW_COMMIT[:12] in err.message
    assert f"{REPO_ID}@main" in err.hint
