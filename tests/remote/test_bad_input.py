"""Bad input: every case is a reported error record, never an exception."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest

from introspect.remote.facts.model.drafters import collect_drafters
from introspect.remote.facts.model.files import collect_files
from introspect.remote.facts.model.safetensors import collect_safetensors
from tests.fixtures.shards import build_header, write_raw_shard, write_shard

CAP = 16 * 1024 * 1024
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def _config_errors(model_dir: Path, content: bytes) -> tuple[dict, list[dict]]:
    (model_dir / "config.json").write_bytes(content)
    facts, errors = collect_files(str(model_dir), json_cap=CAP)
    assert facts["config"] is None
    assert facts["status"] == "ok"  # still a model dir: the other facts stand
    return facts, errors


@pytest.mark.parametrize(("content", "kind", "words"), [
    (b"", "malformed-json", "empty"),
    (b"   \n", "malformed-json", "empty"),
    (b'{"model_type": "llama", "hidden', "malformed-json", "config.json"),
    (b"[1, 2, 3]", "wrong-type", "holds a JSON array"),
    (b'"a string"', "wrong-type", "holds a JSON string"),
    (b"null", "wrong-type", "holds a JSON null"),
    (b'{"name": "caf\xe9"}', "not-utf8", "UTF-8"),
    (b"\xff\xfe{\x00\xff", "not-utf8", "UTF-8"),  # UTF-16 by its BOM, but an odd byte count
    (b"[" * 100000, "too-deep", "nested deeper than 64 levels"),  # never handed to the recursive parser
])
def test_bad_config_json(model_dir: Path, content: bytes, kind: str, words: str) -> None:
    _facts, errors = _config_errors(model_dir, content)
    assert [e["type"] for e in errors] == [kind]
    assert words in errors[0]["message"]
    assert errors[0]["path"] == str(model_dir / "config.json")
    assert errors[0]["probe"] == "files"


def test_nan_and_infinity_in_config_json_are_read_not_errors(model_dir: Path) -> None:
    # Python's json and transformers read them (configuration_utils.py _dict_from_json_file, line 1137);
    # the facts carry a strict-JSON marker the controller names (tests/remote/test_validators_constants.py).
    (model_dir / "config.json").write_bytes(b'{"model_type": "llama", "rope_theta": NaN, "x": [Infinity]}')
    facts, errors = collect_files(str(model_dir), json_cap=CAP)
    assert errors == []
    assert facts["config"]["rope_theta"] == {"__json_constant__": "NaN"}
    assert facts["config"]["x"] == [{"__json_constant__": "Infinity"}]
    json.dumps(facts, allow_nan=False)


def test_config_above_cap_is_refused_unread(model_dir: Path) -> None:
    path = model_dir / "config.json"
    with open(path, "wb") as fh:
        fh.write(b'{"a": 1}')
        fh.truncate(64 * 1024 * 1024)  # 64 MiB apparent, sparse
    _facts, errors = collect_files(str(model_dir), json_cap=CAP)
    assert [e["type"] for e in errors] == ["too-large"]
    assert "67108864 bytes" in errors[0]["message"]


def test_generation_config_errors_do_not_cost_config(model_dir: Path) -> None:
    (model_dir / "generation_config.json").write_text("[]")
    facts, errors = collect_files(str(model_dir), json_cap=CAP)
    assert facts["config"]["model_type"] == "llama"
    assert facts["generation_config"] is None
    assert [(e["type"], Path(e["path"]).name) for e in errors] == [("wrong-type", "generation_config.json")]


def test_missing_model_path(tmp_path: Path) -> None:
    facts, errors = collect_files(str(tmp_path / "no-such-model"), json_cap=CAP)
    assert facts["status"] == "not-found"
    assert [e["type"] for e in errors] == ["not-found"]
    assert facts["listing"] == [] and facts["config"] is None
    st_facts, st_errors = collect_safetensors(str(tmp_path / "no-such-model"))
    assert st_facts["shards"] == [] and [e["type"] for e in st_errors] == ["not-found"]
    assert collect_drafters(str(tmp_path / "no-such-model"), json_cap=CAP) == ([], [])


def test_model_path_is_a_file(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("{}")
    facts, errors = collect_files(str(path), json_cap=CAP)
    assert facts["status"] == "not-a-directory"
    assert [e["type"] for e in errors] == ["not-a-directory"]
    _st, st_errors = collect_safetensors(str(path))
    assert [e["type"] for e in st_errors] == ["not-a-directory"]  # ENOTDIR


def test_not_a_model_dir(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    facts, errors = collect_files(str(tmp_path), json_cap=CAP)
    assert facts["status"] == "not-a-model-dir"
    assert [e["type"] for e in errors] == ["not-a-model-dir"]
    assert [row["name"] for row in facts["listing"]] == ["notes.txt"]


def test_model_path_is_a_symlink_loop(tmp_path: Path) -> None:
    os.symlink(tmp_path / "b", tmp_path / "a")
    os.symlink(tmp_path / "a", tmp_path / "b")
    facts, errors = collect_files(str(tmp_path / "a"), json_cap=CAP)
    assert facts["status"] == "symlink-loop"
    assert [e["type"] for e in errors] == ["symlink-loop"]


def test_symlink_loops_inside_model_dir(model_dir: Path) -> None:
    os.symlink("loop-b", model_dir / "loop-a")
    os.symlink("loop-a", model_dir / "loop-b")
    os.symlink("self.safetensors", model_dir / "self.safetensors")
    os.symlink("generation_config.json", model_dir / "generation_config.json")
    facts, errors = collect_files(str(model_dir), json_cap=CAP)
    rows = {row["name"]: row for row in facts["listing"]}
    for name in ("loop-a", "loop-b", "self.safetensors", "generation_config.json"):
        assert rows[name]["kind"] == "broken"
        assert rows[name]["link_error"] == "symlink-loop"
    assert facts["config"]["model_type"] == "llama"
    types = sorted(e["type"] for e in errors)
    assert types == ["symlink-loop"] * 5  # four listing rows + reading generation_config.json
    st_facts, st_errors = collect_safetensors(str(model_dir))
    assert st_facts["shards"][0]["error"]["type"] == "symlink-loop"
    assert [e["type"] for e in st_errors] == ["symlink-loop"]


def test_unreadable_config_simulated_by_a_directory(model_dir: Path) -> None:
    """Tests run as root, where chmod 000 blocks nothing: a directory named config.json cannot be read."""
    (model_dir / "config.json").unlink()
    (model_dir / "config.json").mkdir()
    (model_dir / "model.safetensors").mkdir()
    facts, errors = collect_files(str(model_dir), json_cap=CAP)
    assert facts["status"] == "ok"
    assert [e["type"] for e in errors] == ["is-a-directory"]
    st_facts, st_errors = collect_safetensors(str(model_dir))
    assert st_facts["shards"][0]["error"]["type"] == "is-a-directory"
    assert [e["type"] for e in st_errors] == ["is-a-directory"]


@pytest.mark.skipif(IS_ROOT, reason="root reads files whatever their mode")
def test_unreadable_config_by_mode(model_dir: Path) -> None:
    path = model_dir / "config.json"
    path.chmod(0)
    try:
        _facts, errors = collect_files(str(model_dir), json_cap=CAP)
    finally:
        path.chmod(0o644)
    assert [e["type"] for e in errors] == ["permission-denied"]


@pytest.mark.skipif(IS_ROOT, reason="root lists directories whatever their mode")
def test_unreadable_model_dir_by_mode(model_dir: Path) -> None:
    model_dir.chmod(0)
    try:
        facts, errors = collect_files(str(model_dir), json_cap=CAP)
    finally:
        model_dir.chmod(0o755)
    assert facts["status"] == "permission-denied"
    assert [e["type"] for e in errors] == ["permission-denied"]


# --------------------------------------------------------------------------- safetensors


def _one_shard_error(model_dir: Path) -> dict:
    facts, errors = collect_safetensors(str(model_dir))
    (shard,) = facts["shards"]
    assert [e["type"] for e in errors] == [shard["error"]["type"]]
    assert errors[0]["probe"] == "safetensors"
    return shard


def test_safetensors_shorter_than_length_prefix(model_dir: Path) -> None:
    (model_dir / "model.safetensors").write_bytes(b"\x10\x00\x00")
    shard = _one_shard_error(model_dir)
    assert shard["error"]["type"] == "truncated-header"
    assert shard["bytes_read"] == 3 and shard["header_len"] is None


def test_safetensors_empty_file(model_dir: Path) -> None:
    (model_dir / "model.safetensors").write_bytes(b"")
    shard = _one_shard_error(model_dir)
    assert shard["error"]["type"] == "truncated-header" and shard["bytes_read"] == 0


def test_safetensors_truncated_header(model_dir: Path) -> None:
    header, _ = build_header([("a.0.w", "BF16", [4, 4])])
    with open(model_dir / "model.safetensors", "wb") as fh:
        fh.write(struct.pack("<Q", len(header)) + header[: len(header) // 2])
    shard = _one_shard_error(model_dir)
    assert shard["error"]["type"] == "truncated-header"
    assert shard["header_len"] == len(header)
    assert shard["bytes_read"] == 8  # the promised header is not there: nothing more is read
    assert shard["groups"] == []


@pytest.mark.parametrize("declared", [100 * 1024 * 1024 + 1, 2**40, 2**64 - 1])
def test_safetensors_absurd_header_length(model_dir: Path, declared: int) -> None:
    # The file really is big enough (sparse), so only the limit stops the read.
    write_raw_shard(model_dir / "model.safetensors", b"{}", 200 * 1024 * 1024, declared_len=declared)
    shard = _one_shard_error(model_dir)
    assert shard["error"]["type"] == "header-too-large"
    assert shard["bytes_read"] == 8
    assert shard["header_len"] == declared


def test_header_limit_is_configurable(model_dir: Path) -> None:
    write_shard(model_dir / "model.safetensors", [("w", "BF16", [2])])
    facts, errors = collect_safetensors(str(model_dir), max_header=8)
    assert facts["shards"][0]["error"]["type"] == "header-too-large"


@pytest.mark.parametrize(("header", "words"), [
    (b"[1, 2]", "list"),
    (b'"x"', "str"),
    (b"{not json", "not JSON"),
    (b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, NaN]}}', "not JSON"),
    (b"\xff\xfe\xfd", "not UTF-8"),
    (b"   ", "not JSON"),
])
def test_safetensors_header_not_an_object(model_dir: Path, header: bytes, words: str) -> None:
    write_raw_shard(model_dir / "model.safetensors", header, 16)
    shard = _one_shard_error(model_dir)
    assert shard["error"]["type"] == "malformed-header"
    assert words in shard["error"]["message"]
    assert shard["bytes_read"] == 8 + len(header)


def test_one_bad_shard_does_not_cost_the_others(model_dir: Path) -> None:
    write_shard(model_dir / "model-00001-of-00003.safetensors", [("layers.0.w", "BF16", [2, 2])])
    (model_dir / "model-00002-of-00003.safetensors").write_bytes(b"garbage!garbage")
    write_shard(model_dir / "model-00003-of-00003.safetensors", [("layers.1.w", "BF16", [2, 2])])
    facts, errors = collect_safetensors(str(model_dir))
    assert [s["tensors"] for s in facts["shards"]] == [1, 0, 1]
    assert len(errors) == 1 and errors[0]["path"].endswith("model-00002-of-00003.safetensors")


def test_special_characters_in_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Paths are data: quotes, $(), backticks, ; and newlines are plain characters."""
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "pwned"
    name = "m o d'el\"$(touch pwned)`touch pwned`;touch pwned\nx"
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "llama"}))
    write_shard(d / "model.safetensors", [("w", "BF16", [2])])
    facts, errors = collect_files(str(d), json_cap=CAP)
    assert errors == [] and facts["config"] == {"model_type": "llama"}
    st, st_errors = collect_safetensors(str(d))
    assert st_errors == [] and st["shards"][0]["tensors"] == 1
    assert not marker.exists()


def test_nul_in_path(tmp_path: Path) -> None:
    facts, errors = collect_files(str(tmp_path) + "/a\x00b", json_cap=CAP)
    assert facts["status"] == "not-found" and errors[0]["type"] == "not-found"
    _st, st_errors = collect_safetensors(str(tmp_path) + "/a\x00b")
    assert [e["type"] for e in st_errors] == ["not-found"]


AS_NOBODY_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from introspect.remote.facts.model import files, safetensors
out = {}
for name in ("readable", "locked"):
    path = sys.argv[2] + "/" + name
    out[name] = [files.collect_files(path, json_cap=1 << 20), safetensors.collect_safetensors(path)]
print(json.dumps(out))
"""


def _system_python_for_nobody() -> str | None:
    """An interpreter outside /root (mode 700) that an unprivileged user can run."""
    for exe in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(exe, os.X_OK):
            return exe
    return None


@pytest.mark.skipif(not IS_ROOT, reason="covered by the chmod tests above when not root")
def test_unreadable_files_as_unprivileged_user(tmp_path: Path) -> None:
    """As root, chmod 000 blocks nothing: run the probes as 'nobody' to see real EACCES."""
    exe = _system_python_for_nobody()
    if exe is None:
        pytest.skip("no system python3 runnable by an unprivileged user")
    base = Path(tempfile.mkdtemp(prefix="introspect-eacces-", dir="/tmp"))
    try:
        base.chmod(0o755)
        readable, locked = base / "readable", base / "locked"
        for d in (readable, locked):
            d.mkdir()
            (d / "config.json").write_text(json.dumps({"model_type": "llama"}))
        readable.chmod(0o755)
        (readable / "config.json").chmod(0)
        write_shard(readable / "model.safetensors", [("w", "BF16", [2])])
        (readable / "model.safetensors").chmod(0)
        locked.chmod(0)
        proc = subprocess.run([exe, "-B", "-c", AS_NOBODY_SCRIPT, str(Path(__file__).resolve().parents[2]),
                               str(base)], user=65534, group=65534, capture_output=True, text=True,
                              timeout=60, check=False, cwd="/")
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
    finally:
        for p in (base / "locked", base / "readable"):
            p.chmod(0o755)
        for p in base.glob("*/*"):
            p.chmod(0o644)
        shutil.rmtree(base)
    (files, ferrs), (st, serrs) = out["readable"]
    assert files["status"] == "ok" and files["config"] is None
    assert [e["type"] for e in ferrs] == ["permission-denied"]
    assert st["shards"][0]["error"]["type"] == "permission-denied"
    assert [e["type"] for e in serrs] == ["permission-denied"]
    (files, ferrs), (st, serrs) = out["locked"]
    assert files["status"] == "permission-denied"
    assert [e["type"] for e in ferrs] == ["permission-denied"]
    assert [e["type"] for e in serrs] == ["permission-denied"]


def test_overflowing_floats_stay_valid_json(model_dir: Path) -> None:
    (model_dir / "config.json").write_text('{"rope_theta": 1e400, "x": [-1e999]}')
    facts, errors = collect_files(str(model_dir), json_cap=CAP)
    assert errors == []
    json.dumps(facts, allow_nan=False)
    assert facts["config"]["rope_theta"] == "inf"
