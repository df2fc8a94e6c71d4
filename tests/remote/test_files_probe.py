"""facts.files, listing, custom_code, drafters: model dir checks, listing, configs, custom code, drafters."""

from __future__ import annotations

import ast
import glob
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from introspect.remote.facts.model import custom_code, listing
from introspect.remote.facts.model import drafters as drafters_facts
from introspect.remote.facts.model.drafters import collect_drafters
from introspect.remote.facts.model.files import collect_files

REPO = Path(__file__).resolve().parents[2]
CAP = 16 * 1024 * 1024

TOKENIZATION_KIMI = b'''\
import os
import json
from logging import getLogger
from typing import Optional

import tiktoken
from tiktoken.load import load_tiktoken_bpe
from transformers import PreTrainedTokenizer
from transformers.utils import logging as hf_logging

from .tool_declaration_ts import encode_tools_to_typescript_style

try:
    import flash_attn  # optional accelerator
except ImportError:
    flash_attn = None


class TikTokenTokenizer(PreTrainedTokenizer):
    def helper(self):
        import jinja2
        return jinja2
'''

TOOL_DECLARATION = b'''\
import re
from . import helpers
from .helpers import fmt


def encode_tools_to_typescript_style(tools):
    return helpers.fmt(tools)
'''

HELPERS = b"import regex\n\ndef fmt(x):\n    return str(x)\n"


def _write_json(path: Path, value: object) -> None:
    path.write_text(json.dumps(value))


@pytest.fixture
def kimi_like(tmp_path: Path) -> Path:
    """A model dir with Kimi's tokenizer layout: auto_map list with null, a relative import chain."""
    d = tmp_path / "Kimi-K2.6"
    d.mkdir()
    _write_json(d / "config.json", {
        "model_type": "kimi_k25",
        "auto_map": {"AutoConfig": "configuration_kimi_k25.KimiK25Config",
                     "AutoModel": "moonshotai/Other-Repo--modeling_remote.RemoteModel"},
        "text_config": {"model_type": "kimi_k2",
                        "auto_map": {"AutoConfig": "configuration_deepseek.DeepseekV3Config"}},
    })
    _write_json(d / "generation_config.json", {"max_length": 262144, "eos_token_id": 163586})
    _write_json(d / "tokenizer_config.json", {
        "tokenizer_class": "TikTokenTokenizer",
        "auto_map": {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]},
    })
    (d / "tokenization_kimi.py").write_bytes(TOKENIZATION_KIMI)
    (d / "tool_declaration_ts.py").write_bytes(TOOL_DECLARATION)
    (d / "helpers.py").write_bytes(HELPERS)
    (d / "configuration_kimi_k25.py").write_bytes(b"from transformers import PretrainedConfig\n"
                                                  b"from .configuration_deepseek import DeepseekV3Config\n")
    (d / "configuration_deepseek.py").write_bytes(b"from transformers.configuration_utils import PretrainedConfig\n")
    (d / "tiktoken.model").write_bytes(b"IQ== 0\n")
    return d


def _code(facts: dict) -> dict[str, dict]:
    return {entry["file"]: entry for entry in facts["custom_code"]}


def test_configs_and_listing(kimi_like: Path) -> None:
    facts, errors = collect_files(str(kimi_like), json_cap=CAP)
    assert facts["status"] == "ok"
    assert facts["real_path"] == os.path.realpath(kimi_like)
    assert facts["config"]["model_type"] == "kimi_k25"
    assert facts["generation_config"] == {"max_length": 262144, "eos_token_id": 163586}
    assert facts["preprocessor_config_present"] is False
    assert facts["index"] is None
    rows = {row["name"]: row for row in facts["listing"]}
    assert rows["tiktoken.model"] == {"name": "tiktoken.model", "kind": "file", "size": 7, "link": None,
                                      "resolved": None, "link_error": None}
    assert facts["listing_total"] == len(os.listdir(kimi_like))
    assert facts["listing_truncated"] is False
    assert facts["total_size"] == sum(p.stat().st_size for p in kimi_like.iterdir())
    # Only the hub-repo reference is an error (its code is not in the dir).
    assert [e["type"] for e in errors] == ["remote-repo"]
    assert all(e["probe"] == "files" for e in errors)


def test_custom_code_follows_auto_map_and_relative_imports(kimi_like: Path) -> None:
    facts, _errors = collect_files(str(kimi_like), json_cap=CAP)
    code = _code(facts)
    assert set(code) == {"tokenization_kimi.py", "tool_declaration_ts.py", "helpers.py",
                         "configuration_kimi_k25.py", "configuration_deepseek.py", "modeling_remote.py"}
    tok = code["tokenization_kimi.py"]
    assert tok["sha256"] == hashlib.sha256(TOKENIZATION_KIMI).hexdigest()
    assert tok["size"] == len(TOKENIZATION_KIMI)
    assert tok["imports"] == ["jinja2", "tiktoken", "transformers"]  # stdlib dropped, top-level only
    assert tok["optional_imports"] == ["flash_attn"]
    assert tok["relative_imports"] == [".tool_declaration_ts"]
    assert tok["referenced_by"] == ["tokenizer_config.json:auto_map.AutoTokenizer"]
    assert tok["error"] is None
    tool = code["tool_declaration_ts.py"]
    assert tool["relative_imports"] == [".helpers"]
    assert tool["referenced_by"] == ["tokenization_kimi.py"]
    assert code["helpers.py"]["imports"] == ["regex"]
    # Reached twice: from config.json's nested text_config and from configuration_kimi_k25.py.
    assert sorted(code["configuration_deepseek.py"]["referenced_by"]) == [
        "config.json:text_config.auto_map.AutoConfig", "configuration_kimi_k25.py"]
    remote = code["modeling_remote.py"]
    assert remote["repo"] == "moonshotai/Other-Repo"
    assert remote["error"]["type"] == "remote-repo"
    assert facts["auto_map_sources"] == {"config.json": None, "tokenizer_config.json": None}


def test_missing_custom_code_is_reported(model_dir: Path) -> None:
    _write_json(model_dir / "tokenizer_config.json",
                {"auto_map": {"AutoTokenizer": ["tokenization_gone.Tok", "tokenization_gone_fast.Fast"]}})
    facts, errors = collect_files(str(model_dir), json_cap=CAP)
    code = _code(facts)
    assert code["tokenization_gone.py"]["error"]["type"] == "missing-custom-code"
    assert code["tokenization_gone_fast.py"]["sha256"] is None
    assert sorted(e["type"] for e in errors) == ["missing-custom-code"] * 2


def test_custom_code_with_syntax_error_still_hashed(model_dir: Path) -> None:
    _write_json(model_dir / "config.json", {"auto_map": {"AutoModel": "modeling_x.M"}})
    (model_dir / "modeling_x.py").write_bytes(b"def broken(:\n")
    facts, errors = collect_files(str(model_dir), json_cap=CAP)
    entry = _code(facts)["modeling_x.py"]
    assert entry["sha256"] == hashlib.sha256(b"def broken(:\n").hexdigest()
    assert entry["error"]["type"] == "syntax-error"
    assert [e["type"] for e in errors] == ["syntax-error"]


def test_auto_map_cannot_name_paths_outside(model_dir: Path) -> None:
    _write_json(model_dir / "config.json", {"auto_map": {"A": "../../etc/passwd.X", "B": "os.path.X", "C": 7}})
    facts, _ = collect_files(str(model_dir), json_cap=CAP)
    assert [e["file"] for e in facts["custom_code"]] == ["os/path.py"]


@pytest.mark.parametrize(("ref", "expected"), [
    ("tokenization_kimi.TikTokenTokenizer", (None, "tokenization_kimi")),
    ("org/repo--tokenization_kimi.TikTokenTokenizer", ("org/repo", "tokenization_kimi")),
    ("pkg.mod.Class", (None, "pkg.mod")),
    ("NoDot", None), (None, None), ("", None), ("../x.Y", None), (3, None),
])
def test_parse_class_reference(ref: object, expected: object) -> None:
    assert custom_code.parse_class_reference(ref) == expected


def test_scan_imports_levels_and_guards() -> None:
    src = (b"import a.b.c, d as e\nfrom f.g import h\nfrom ..up import z\nfrom . import y\n"
           b"try:\n    import opt\nexcept ImportError:\n    import fallback\n")
    result = custom_code.scan_imports(src)
    assert result["imports"] == ["a", "d", "f", "fallback"]
    assert result["optional_imports"] == ["opt"]
    assert sorted(result["relative"]) == [(1, None, ["y"]), (2, "up", ["z"])]
    assert result["error"] is None


def test_relative_import_above_model_dir_not_followed(model_dir: Path) -> None:
    _write_json(model_dir / "config.json", {"auto_map": {"AutoModel": "modeling_x.M"}})
    (model_dir / "modeling_x.py").write_text("from ..outside import secret\nfrom .sub import thing\n")
    (model_dir / "sub").mkdir()
    (model_dir / "sub" / "__init__.py").write_text("import numpy\n")
    (model_dir.parent / "outside.py").write_text("import evil\n")
    facts, _ = collect_files(str(model_dir), json_cap=CAP)
    code = _code(facts)
    assert set(code) == {"modeling_x.py", "sub/__init__.py"}
    assert code["sub/__init__.py"]["imports"] == ["numpy"]


def test_is_stdlib() -> None:
    for name in ("os", "json", "typing", "__future__", "asyncio", "distutils", "sys"):
        assert custom_code.is_stdlib(name)
    for name in ("tiktoken", "transformers", "jinja2", "regex"):
        assert not custom_code.is_stdlib(name)


def test_hf_cache_snapshot_symlinks(tmp_path: Path) -> None:
    repo = tmp_path / "models--moonshotai--Kimi-K2.6"
    blobs = repo / "blobs"
    snap = repo / "snapshots" / "abc123"
    blobs.mkdir(parents=True)
    snap.mkdir(parents=True)
    (blobs / "c0ffee").write_text(json.dumps({"model_type": "kimi_k25"}))
    (blobs / "bead").write_bytes(b"x" * 12345)
    os.symlink("../../blobs/c0ffee", snap / "config.json")
    os.symlink("../../blobs/bead", snap / "tiktoken.model")
    os.symlink("../../blobs/not-downloaded", snap / "tokenizer.json")
    facts, errors = collect_files(str(snap), json_cap=CAP)
    assert facts["config"] == {"model_type": "kimi_k25"}
    rows = {row["name"]: row for row in facts["listing"]}
    tik = rows["tiktoken.model"]
    assert (tik["kind"], tik["size"], tik["link"]) == ("file", 12345, "../../blobs/bead")
    assert tik["resolved"] == str((blobs / "bead").resolve())
    assert rows["tokenizer.json"]["kind"] == "broken"
    assert rows["tokenizer.json"]["link_error"] == "dangling"
    assert [e["type"] for e in errors] == ["dangling-symlink"]
    assert facts["total_size"] == 12345 + (blobs / "c0ffee").stat().st_size


def test_listing_is_bounded(model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(30):
        (model_dir / f"f{i:02d}.bin").write_bytes(b"")
    monkeypatch.setattr(listing, "MAX_LISTING", 10)
    facts, _ = collect_files(str(model_dir), json_cap=CAP)
    assert len(facts["listing"]) == 10
    assert facts["listing_total"] == 31
    assert facts["listing_truncated"] is True
    monkeypatch.setattr(listing, "MAX_SCAN_NAMES", 20)
    facts, _ = collect_files(str(model_dir), json_cap=CAP)
    assert facts["listing_total"] == 20 and facts["listing_truncated"] is True


def test_index_summary(kimi_checkpoint: tuple[Path, int]) -> None:
    path, _count = kimi_checkpoint
    facts, errors = collect_files(str(path), json_cap=CAP)
    # The real config's auto_map names modeling code the fixture does not ship.
    assert {e["type"] for e in errors} == {"missing-custom-code"}
    index = facts["index"]
    assert index["file"] == "model.safetensors.index.json"
    assert len(index["shards"]) == 64 and index["missing_shards"] == []
    assert index["shards"][0] == "model-00001-of-000064.safetensors"
    assert index["weight_map_entries"] > 200000
    assert isinstance(index["total_size"], int)


def test_model_dir_markers(tmp_path: Path) -> None:
    d = tmp_path / "weights-only"
    d.mkdir()
    (d / "model.safetensors").write_bytes(b"")
    facts, errors = collect_files(str(d), json_cap=CAP)
    assert facts["status"] == "ok"
    assert [e["type"] for e in errors] == ["missing-config"]


# --------------------------------------------------------------------------- drafters


def _dflash_config() -> dict:
    return {"architectures": ["DFlashDraftModel"], "block_size": 8, "mask_token_id": 163838,
            "target_layer_ids": [1, 12, 24, 35, 47, 58], "num_hidden_layers": 6}


def test_drafters_siblings_and_children(kimi_like: Path) -> None:
    root = kimi_like.parent
    (root / "Kimi-K2.6-DFlash").mkdir()
    _write_json(root / "Kimi-K2.6-DFlash" / "config.json", _dflash_config())
    (kimi_like / "eagle3").mkdir()
    _write_json(kimi_like / "eagle3" / "config.json",
                {"architectures": ["LlamaForCausalLMEagle3"], "draft_vocab_size": 32000})
    (root / "llama").mkdir()
    _write_json(root / "llama" / "config.json", {"architectures": ["LlamaForCausalLM"], "block_size": 4})
    (root / "broken").mkdir()
    (root / "broken" / "config.json").write_text("{nope")
    (root / "loose-file.txt").write_text("x")
    drafters, errors = collect_drafters(str(kimi_like), json_cap=CAP)
    assert errors == []
    by_name = {Path(d["path"]).name: d for d in drafters}
    assert set(by_name) == {"Kimi-K2.6-DFlash", "eagle3"}
    dflash = by_name["Kimi-K2.6-DFlash"]
    assert dflash["relation"] == "sibling"
    assert dflash["config"]["mask_token_id"] == 163838
    assert "target_layer_ids" in dflash["matched"] and "block_size+mask_token_id" in dflash["matched"]
    assert by_name["eagle3"]["relation"] == "child"
    assert "draft_vocab_size" in by_name["eagle3"]["matched"]


def test_drafter_signals() -> None:
    assert drafters_facts.drafter_signals({"eagle_config": {}}) == ["eagle_config"]
    assert drafters_facts.drafter_signals({"dflash_config": {"target_layer_ids": [1]}}) == [
        "dflash_config", "dflash_config.target_layer_ids"]
    assert drafters_facts.drafter_signals({"model_type": "deepseek_v3",
                                        "architectures": ["DeepseekV3ForCausalLM"]}) == []
    assert drafters_facts.drafter_signals({"architectures": ["DeepseekV3ForCausalLMNextN"]}) == [
        "architectures:DeepseekV3ForCausalLMNextN"]
    assert drafters_facts.drafter_signals([1, 2]) == []


def test_drafter_scan_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "target"
    model.mkdir()
    _write_json(model / "config.json", {"model_type": "llama"})
    for i in range(20):
        (tmp_path / f"other{i:02d}").mkdir()
    (tmp_path / "zz-dflash").mkdir()  # sorts last by name, but its name hints a drafter
    _write_json(tmp_path / "zz-dflash" / "config.json", _dflash_config())
    monkeypatch.setattr(drafters_facts, "MAX_DRAFTER_ENTRIES", 5)
    drafters, errors = collect_drafters(str(model), json_cap=CAP)
    assert [Path(d["path"]).name for d in drafters] == ["zz-dflash"]
    assert [e["type"] for e in errors] == ["scan-truncated"]


def test_drafters_of_missing_model_path(tmp_path: Path) -> None:
    assert collect_drafters(str(tmp_path / "nope"), json_cap=CAP) == ([], [])


# --------------------------------------------------------------------------- Python 3.8


REMOTE_FILES = sorted(glob.glob(str(REPO / "introspect" / "remote" / "*.py")))


@pytest.mark.parametrize("path", REMOTE_FILES, ids=os.path.basename)
def test_remote_modules_parse_as_python38(path: str) -> None:
    source = Path(path).read_text()
    ast.parse(source, filename=path, feature_version=(3, 8))


def _python38() -> str | None:
    candidates = [os.environ.get("INTROSPECT_PY38", "")]
    candidates += sorted(glob.glob("/root/.pyenv/versions/3.8*/bin/python3.8"))
    candidates += ["/usr/bin/python3.8", "/usr/local/bin/python3.8"]
    for exe in candidates:
        if exe and os.access(exe, os.X_OK):
            return exe
    return None


PY38_SCRIPT = """
import json, sys
from introspect.remote.facts.host import environment
from introspect.remote.facts.model import drafters as drafters_facts, files as files_facts, safetensors
model = sys.argv[1]
files, e1 = files_facts.collect_files(model, json_cap=1 << 24)
drafters, e2 = drafters_facts.collect_drafters(model, json_cap=1 << 24)
st, e3 = safetensors.collect_safetensors(model, workers=4)
env, e4 = environment.collect_environment(["tiktoken", "json"])
print(json.dumps({"version": list(sys.version_info[:2]), "files": files, "st": st, "env": env,
                  "errors": e1 + e2 + e3 + e4}))
"""


def test_probes_run_under_python38(kimi_like: Path) -> None:
    exe = _python38()
    if exe is None:
        pytest.skip("no Python 3.8 interpreter here (set INTROSPECT_PY38)")
    from tests.fixtures.shards import write_shard

    write_shard(kimi_like / "model.safetensors", [("model.layers.0.mlp.down_proj.weight", "BF16", [8, 4])])
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([exe, "-B", "-c", PY38_SCRIPT, str(kimi_like)],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["version"] == [3, 8]
    assert out["files"]["status"] == "ok"
    assert {c["file"] for c in out["files"]["custom_code"]} >= {"tokenization_kimi.py", "helpers.py"}
    assert out["st"]["shards"][0]["groups"][0]["template"] == "model.layers.#.mlp.down_proj.weight"
    assert out["env"]["python_version"].startswith("3.8.")
    assert out["env"]["modules"]["json"]["available"] is True
    assert [e["type"] for e in out["errors"]] == ["remote-repo"]


def test_relative_imports_missing_and_namespace(model_dir: Path) -> None:
    _write_json(model_dir / "config.json", {"auto_map": {"AutoModel": "modeling_x.M"}})
    (model_dir / "modeling_x.py").write_text("from .gone import y\nfrom .nsdir import z\n")
    (model_dir / "nsdir").mkdir()  # namespace package: no __init__.py
    facts, errors = collect_files(str(model_dir), json_cap=CAP)
    code = _code(facts)
    assert code["modeling_x.py"]["relative_imports"] == [".gone", ".nsdir"]
    assert set(code) == {"modeling_x.py", "gone.py"}
    assert code["gone.py"]["error"]["type"] == "missing-custom-code"
    assert code["gone.py"]["referenced_by"] == ["modeling_x.py"]
    assert [e["type"] for e in errors] == ["missing-custom-code"]
