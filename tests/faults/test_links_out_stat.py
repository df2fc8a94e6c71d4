"""A link out of the model directory gives away nothing of its target: not its size, not its mtime.

The content of a linked secret never leaves the host (tests/faults/test_links_out.py); here the
calls that only stat (the hash section's skipped files and shard sizes, the tokenizer code's
module size, the cache fingerprint, the discovered model's size, the "too large" messages) are
held to the same rule, each target made with a size no file of the fixture has. Then
``introspect preflight``, which loads the tokenizer like the probe: a link out is refused with the
link named, and a model path that is not UTF-8 loads through its alias.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import assert_clean_error, run_cli, ssh_flags
from tests.faults.test_links_out import DOCKER, _linked_model, _secret, _written

# Sizes of the targets outside: above the 16 MiB JSON cap, and found in no fixture file.
BIG = 41_234_567
SHARD = 52_345_679
CODE = 3_456_789
TARGET_MTIME_NS = 1_111_111_111_222_333_444


def _sparse(path: Path, size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.truncate(size)  # sparse: the size is what matters, not the bytes
    os.utime(path, ns=(TARGET_MTIME_NS, TARGET_MTIME_NS))
    return path


def _link(model: Path, name: str, target: Path) -> Path:
    link = model / name
    if link.exists() or link.is_symlink():
        link.unlink()
    link.symlink_to(target)
    return link


def _no_size_of(text: str, *sizes: int) -> None:
    from introspect.cli.render_term import human_bytes

    for size in sizes:
        for shown in (str(size), f"{size:,}", human_bytes(size)):
            assert shown not in text, (shown, text[:2000])


# -- the remote side, in process -----------------------------------------------------------------

@pytest.fixture
def linked_dir(tmp_path: Path) -> tuple[Path, Path]:
    """A model dir with a big JSON file, a shard and a code module that all link out."""
    model, outside = tmp_path / "m", tmp_path / "outside"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama", "auto_map": {"AutoTokenizer": '
                                       '["tokenization_x.XTokenizer", null]}}')
    (model / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": 8}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                                       "b": "model-00002-of-00002.safetensors"}}))
    _sparse(model / "model-00001-of-00002.safetensors", 8)
    _link(model, "extra.json", _sparse(outside / "big.json", BIG))
    _link(model, "model-00002-of-00002.safetensors", _sparse(outside / "shard", SHARD))
    _link(model, "tokenization_x.py", _sparse(outside / "code.py", CODE))
    return model, outside


def test_hashes_neither_size_nor_hash_a_link_out(linked_dir):
    from introspect.remote.facts.model.hashes import collect_hashes

    model, _outside = linked_dir
    facts, errors = collect_hashes(str(model), json_cap=16 * 2**20)
    _no_size_of(json.dumps([facts, errors]), BIG, SHARD)
    assert "extra.json" not in facts["files"] and not facts["skipped"], facts
    weights = facts["weights"]
    assert weights["shards"] == {"model-00001-of-00002.safetensors": 8}, weights
    assert weights["missing_shards"] == [], weights  # there, not missing: named as a link out
    named = {e["path"] for e in errors if e["type"] == "link-outside"}
    assert named == {str(model / name) for name in ("extra.json", "model-00002-of-00002.safetensors",
                                                    "tokenization_x.py")}, errors
    assert "config.json" in facts["files"]  # the files inside are hashed as before


def test_tokenizer_code_module_is_there_but_not_sized(linked_dir):
    from introspect.remote.facts.tokenizer.tokenizer_code import remote_code

    model, _outside = linked_dir
    info, errors = remote_code(str(model), 16 * 2**20, None)
    assert info is not None
    slow = info["slow"]
    assert slow is not None and (slow["exists"], slow["size"], slow["sha256"]) == (True, None, None), slow
    _no_size_of(json.dumps([info, errors]), CODE)
    assert {e["type"] for e in errors} <= {"link-outside"}, errors


def test_too_large_messages_do_not_size_a_link_out(linked_dir):
    from introspect.remote import confine
    from introspect.remote.facts.model.custom_code import _read_code
    from introspect.remote.facts.tokenizer.sentencepiece_model import read_sentencepiece

    model, _outside = linked_dir
    confine.confine(str(model))  # what the model task does before any read
    for value, err in (_read_code(str(model / "tokenization_x.py"), 1024),
                       read_sentencepiece(str(model / "extra.json"), cap=1024)):
        assert value is None and err is not None and err["type"] == "link-outside", err
        _no_size_of(err["message"], BIG, CODE)


def test_fingerprint_ignores_the_target_but_not_the_link(linked_dir):
    from introspect.remote.facts.model.fingerprint import compute

    model, outside = linked_dir
    before = compute(str(model))["digest"]
    _sparse(outside / "big.json", BIG + 1)  # the target changes size and mtime: not the model's
    os.utime(outside / "shard", ns=(TARGET_MTIME_NS + 5, TARGET_MTIME_NS + 5))
    assert compute(str(model))["digest"] == before
    _link(model, "extra.json", outside / "shard")  # the link itself changes: so does the digest
    repointed = compute(str(model))["digest"]
    assert repointed != before
    inside = model / "inside.json"
    inside.write_text("{}")
    _link(model, "extra.json", inside)  # now a link inside: followed, its target counts
    followed = compute(str(model))["digest"]
    inside.write_text('{"k": 1}')
    assert compute(str(model))["digest"] != followed


def test_discovered_size_skips_a_link_out(tmp_path):
    from introspect.remote.facts.model.model_summary import dir_size

    model, outside = tmp_path / "m", tmp_path / "outside"
    model.mkdir()
    (model / "config.json").write_text("x" * 10)
    (model / "alias.json").symlink_to(model / "config.json")  # the same inode: counted once
    (model / "sub").mkdir()
    (model / "sub" / "a.bin").write_text("y" * 5)
    _link(model, "secret.bin", _sparse(outside / "secret", BIG))
    (model / "sub" / "up").symlink_to(outside, target_is_directory=True)
    assert dir_size(str(model)) == (15, 2, False)


def test_hub_snapshot_size_still_counts_its_blobs(tmp_path):
    from introspect.remote.facts.model.model_summary import dir_size

    repo = tmp_path / "models--org--name"
    blob = repo / "blobs" / "abc"
    blob.parent.mkdir(parents=True)
    blob.write_text("z" * 7)
    snapshot = repo / "snapshots" / "rev"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").symlink_to(os.path.relpath(blob, snapshot))
    _link(snapshot, "secret.bin", _sparse(tmp_path / "outside" / "secret", BIG))
    assert dir_size(str(snapshot)) == (7, 1, False)


# -- end to end: probe, discovery ----------------------------------------------------------------

def test_probe_output_carries_no_size_of_a_link_out(kimi_model, venv_full, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(kimi_model, model)
    outside = tmp_path / "outside"
    links = [_link(model, "extra.json", _sparse(outside / "big.json", BIG)),
             _link(model, "model-00001-of-000001.safetensors", _sparse(outside / "shard", SHARD)),
             _link(model, "tokenization_kimi.py", _sparse(outside / "code.py", CODE))]
    out, raw, cache = tmp_path / "profile.json", tmp_path / "raw.json", tmp_path / "cache"
    result = run_cli("probe", "--model", str(model), "--venv", str(venv_full), "--output", str(out),
                     "--save-raw", str(raw), "--no-model-code", env={"INTROSPECT_CACHE_DIR": str(cache)},
                     timeout=180)
    assert result.code == 1, (result.code, result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    written = _written(out, raw, cache)
    assert len(written) >= 3
    for text in [result.stdout, result.stderr] + [p.read_text(errors="replace") for p in written]:
        _no_size_of(text, BIG, SHARD, CODE)
        assert str(TARGET_MTIME_NS) not in text and str(outside) not in text
    profile = json.loads(out.read_text())
    for link in links:
        named = [f for f in profile["findings"] if f["code"] == "link-outside" and str(link) in f["message"]]
        assert len(named) == 1, (link, profile["findings"])
    hashes = json.loads(raw.read_text())["hashes"]
    assert not any(s["name"] == "extra.json" for s in hashes["skipped"]), hashes["skipped"]
    assert "model-00001-of-000001.safetensors" not in hashes["weights"]["shards"]


def test_models_size_skips_a_link_out(kimi_model, venv_full, tmp_path):
    root = tmp_path / "root"
    model = root / "Kimi"
    shutil.copytree(kimi_model, model)
    inside = run_cli("models", "--roots", str(root), "--venv", str(venv_full), "--json", timeout=120)
    assert inside.code == 0, inside.stderr[-2000:]
    _link(model, "secret.bin", _sparse(tmp_path / "outside" / "secret", BIG))
    linked = run_cli("models", "--roots", str(root), "--venv", str(venv_full), "--json", timeout=120)
    assert linked.code == 0, linked.stderr[-2000:]
    _no_size_of(linked.stdout + linked.stderr, BIG)
    sizes = [[m["size"] for h in r.json()["hosts"] for m in h["models"] if m["path"] == str(model)]
             for r in (inside, linked)]
    assert sizes[0] == sizes[1] and len(sizes[0]) == 1, sizes


# -- end to end: preflight -----------------------------------------------------------------------

def _preflight(model: str, venv: Path, cwd: Path):
    return run_cli("preflight", "--model", model, "--venv", str(venv), "--min-free-gb", "0", "--json",
                   cwd=cwd, timeout=300)


def _checks(result) -> dict:
    assert "Traceback" not in result.stderr, result.stderr
    return {c["name"]: c for c in result.json()["checks"]}


def test_preflight_refuses_a_link_out(kimi_model, venv_full, tmp_path):
    secret, marker = _secret(tmp_path, "tokenizer_config.json", DOCKER)
    model = _linked_model(kimi_model, tmp_path, "tokenizer_config.json", secret)
    (tmp_path / "cwd").mkdir()
    result = _preflight(str(model), venv_full, tmp_path / "cwd")
    assert result.code == 1, (result.code, result.stdout[-3000:], result.stderr[-2000:])
    for needle in (marker, str(secret.parent)):
        assert needle not in result.stdout + result.stderr, needle
    tok = _checks(result)["tokenizer"]
    assert tok["status"] == "fail", tok
    assert "outside the model directory" in tok["message"] and str(model / "tokenizer_config.json") in tok["message"]
    assert tok["evidence"]["error"]["cause"] == "link-outside"
    assert str(model) in tok["fix"] and "  # " in tok["fix"], tok["fix"]


def test_preflight_loads_a_non_utf8_model_path(kimi_model, venv_full, tmp_path):
    model = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"m\xff"))
    shutil.copytree(kimi_model, model)
    (tmp_path / "cwd").mkdir()
    result = _preflight(model, venv_full, tmp_path / "cwd")
    checks = _checks(result)
    tok = checks["tokenizer"]
    assert tok["status"] == "pass", tok
    assert tok["evidence"]["class"] == "TikTokenTokenizer" and tok["evidence"]["len"] == 163840
    assert checks["chat-template"]["status"] != "skipped", checks["chat-template"]
    assert result.json()["target"]["model_path"] == model


# -- the model-code witness refused by a link out --------------------------------------------------

def test_model_code_refused_by_a_link_out_says_which_fix():
    from introspect.analysis.profile import build_profile
    from tests.witnesses.test_witnesses import findings, raw_with

    refused = {"built": False, "params": None, "error": {
        "type": "LinkOutside", "cause": "link-outside", "stage": "config", "missing_packages": [],
        "message": "transformers would follow /models/m/config.json, a symbolic link that points outside the "
                   "model directory; the load was not run"}}
    raw = raw_with(refused)
    raw["target"]["model_path"] = "/models/m"
    [warning] = findings(build_profile(raw), "model-code-failed")
    assert "link-outside" in warning["message"] and "/models/m/config.json" in warning["message"]
    assert "replace each link with the model's own file in /models/m" in warning["fix"], warning
    crashed = raw_with(dict(refused, error=dict(refused["error"], cause="cuda-only", type="AssertionError")))
    [other] = findings(build_profile(crashed), "model-code-failed")
    assert "link" not in other["fix"]  # every other cause keeps the generic fix


# -- an interpreter that cannot be started: the fix is a command ----------------------------------

def _fix_line(result) -> str:
    fixes = [line[len("fix: "):] for line in result.stderr.splitlines() if line.startswith("fix: ")]
    assert len(fixes) == 1, result.stderr
    return fixes[0]


def test_missing_venv_fix_is_a_command(kimi_model, tmp_path):
    python = tmp_path / "no-venv" / "bin" / "python"
    result = run_cli("probe", "--model", str(kimi_model), "--venv", str(tmp_path / "no-venv"))
    assert_clean_error(result, 2, f"cannot run {python}")
    fix = _fix_line(result)
    assert fix.startswith(f"ls -l {python}  # ") and "--venv" in fix, fix


def test_unexecutable_interpreter_fix_is_a_command(kimi_model, tmp_path):
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\nexit 0\n")
    python.chmod(0o644)  # no execute bit: refused even to root
    result = run_cli("probe", "--model", str(kimi_model), "--venv", str(tmp_path / "venv"))
    assert_clean_error(result, 2, f"cannot execute {python}", "permission denied")
    fix = _fix_line(result)
    assert fix.startswith(f"ls -l {python}  # ") and "executable" in fix, fix


def test_bare_interpreter_name_fix_is_a_command(kimi_model):
    result = run_cli("probe", "--model", str(kimi_model), "--python", "no-such-python3-xyz")
    assert_clean_error(result, 2, "cannot run no-such-python3-xyz")
    assert _fix_line(result).startswith("command -v no-such-python3-xyz  # ")


@pytest.mark.ssh
def test_missing_venv_over_ssh_fix_is_a_command(sshd, client_keys, kimi_model, tmp_path):
    python = tmp_path / "no-venv" / "bin" / "python"
    result = run_cli("probe", *ssh_flags(sshd, client_keys), "--model", str(kimi_model),
                     "--venv", str(tmp_path / "no-venv"), timeout=120)
    assert_clean_error(result, 2, f"cannot run {python}")
    fix = _fix_line(result)
    assert fix.startswith(f"ls -l {python}  # ") and "--venv" in fix, fix
