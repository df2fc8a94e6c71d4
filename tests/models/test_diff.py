"""diff_profiles (pure) and `introspect diff` on saved profile files (no host needed)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from introspect.analysis.diff.document import GROUPS, diff_profiles, flatten
from tests.conftest import assert_clean_error, run_cli

TEMPLATE = "{%- for m in messages -%}\n<|im_{{ m.role }}|>{{ m.content }}<|im_end|>\n{%- endfor -%}\n"


def profile() -> dict[str, Any]:
    return {
        "schema": "introspect.profile/v1",
        "target": {"host": "h1", "model_path": "/root/models/Kimi-K2.6"},
        "architecture": {
            "model_type": "kimi_k25", "num_layers": 61, "config_path": "/root/models/Kimi-K2.6/config.json",
            "moe": {"is_moe": True, "routed_experts": 384, "experts_per_token": 8},
            "layers": {"pattern": ["full_attention"] * 3, "kinds": {"full_attention": 3}},
            "params": {"total": 1_026_000_000_000, "config_estimate": {"total": 1_026_000_000_000}},
            "speculative": {"drafters": [{"path": "/root/models/d", "kind": "dflash", "block_size": 8}]},
            "evidence": {"moe": {"n_routed_experts": 384}}, "summary": {"size": "1.03T"},
        },
        "tokenizer": {
            "loaded": True, "source": "transformers", "class": "TikTokenTokenizer", "vocab_size": 163840,
            "bos": {"token": "[BOS]", "id": 163584}, "eos": {"token": "[EOS]", "id": 163585},
            "pad": None, "unk": None, "mask": None,
            "special_tokens": [{"token": "[BOS]", "id": 163584}, {"token": "<|im_end|>", "id": 163586}],
            "chat_template": {"present": True, "source": "chat_template.jinja", "sha256": "a" * 64, "text": TEMPLATE},
            "error": None,
        },
        "files": {"custom_code": [{"file": "tokenization_kimi.py", "sha256": "c" * 64}],
                  "hashes": {"files": {"config.json": {"sha256": "1" * 64, "size": 10},
                                       "chat_template.jinja": {"sha256": "2" * 64, "size": 99}},
                             "skipped": [{"name": "tiktoken.model", "size": 3 << 20}],
                             "weights": {"index": {"file": "model.safetensors.index.json", "sha256": "3" * 64,
                                                   "total_size": 5},
                                         "shards": {"model-00001-of-000064.safetensors": 100},
                                         "missing_shards": []}}},
        "environment": {"python_version": "3.11.7", "packages": {"transformers": "4.57.1", "tiktoken": "0.9.0"}},
    }


def keys(result: dict[str, Any], group: str) -> list[str]:
    return [c["key"] for c in result["groups"][group]["changes"]]


def test_identical_profiles() -> None:
    result = diff_profiles(profile(), profile())
    assert result["identical"] is True
    assert list(result["groups"]) == list(GROUPS)
    assert all(g["identical"] and not g["changes"] for g in result["groups"].values())
    assert result["labels"] == {"a": "h1:/root/models/Kimi-K2.6", "b": "h1:/root/models/Kimi-K2.6"}


def test_architecture_numbers_and_verdicts_by_key_path() -> None:
    b = profile()
    b["architecture"]["moe"]["routed_experts"] = 256
    b["architecture"]["layers"]["pattern"][1] = "sliding_attention"
    b["architecture"]["speculative"]["drafters"][0]["block_size"] = 16
    # Host-specific paths, evidence and the human summary are not differences of the model.
    b["architecture"]["config_path"] = "/data/elsewhere/config.json"
    b["architecture"]["speculative"]["drafters"][0]["path"] = "/data/d"
    b["architecture"]["evidence"] = {}
    b["architecture"]["summary"] = {"size": "0.7T"}
    result = diff_profiles(profile(), b)
    assert keys(result, "architecture") == ["layers.pattern", "moe.routed_experts",
                                            "speculative.drafters[0].block_size"]
    change = result["groups"]["architecture"]["changes"][1]
    assert (change["a"], change["b"]) == (384, 256)
    assert result["identical"] is False and result["groups"]["tokenizer"]["identical"]


def test_tokenizer_specials_ids_and_template_diff() -> None:
    b = profile()
    tok = b["tokenizer"]
    tok["eos"] = {"token": "<|im_end|>", "id": 163586}
    tok["special_tokens"] = [{"token": "[BOS]", "id": 163584}, {"token": "<|im_end|>", "id": 163587}]
    tok["chat_template"].update(sha256="b" * 64, text=TEMPLATE.replace("<|im_end|>", "<|im_end|>\\n"))
    group = diff_profiles(profile(), b, ["tokenizer"])["groups"]["tokenizer"]
    assert [c["key"] for c in group["changes"]] == ["eos.id", "eos.token", "special_tokens[163586]",
                                                    "special_tokens[163587]", "chat_template.sha256"]
    template = group["template_diff"]
    assert template["source_a"] == "chat_template.jinja" and template["sha256_b"] == "b" * 64
    minus = [line for line in template["lines"] if line.startswith("-") and not line.startswith("---")]
    plus = [line for line in template["lines"] if line.startswith("+") and not line.startswith("+++")]
    assert minus == ["-<|im_{{ m.role }}|>{{ m.content }}<|im_end|>"]
    assert plus == ["+<|im_{{ m.role }}|>{{ m.content }}<|im_end|>\\n"]


def test_template_without_text_is_a_note() -> None:
    b = profile()
    b["tokenizer"]["chat_template"] = {"present": True, "source": "chat_template.jinja", "sha256": "b" * 64}
    group = diff_profiles(profile(), b, ["tokenizer"])["groups"]["tokenizer"]
    assert group["template_diff"]["lines"] == [] and "no line diff" in group["notes"][0]


def test_files_hashes_index_and_shards() -> None:
    b = profile()
    hashes = b["files"]["hashes"]
    hashes["files"]["chat_template.jinja"]["sha256"] = "9" * 64
    hashes["weights"]["index"]["sha256"] = "8" * 64
    hashes["weights"]["shards"]["model-00001-of-000064.safetensors"] = 99
    b["files"]["custom_code"][0]["sha256"] = "d" * 64
    result = diff_profiles(profile(), b, ["files"])
    assert keys(result, "files") == ["sha256:chat_template.jinja", "sha256:tokenization_kimi.py",
                                     "weights.index.sha256", "weights.shards.model-00001-of-000064.safetensors"]
    assert "tiktoken.model" in result["groups"]["files"]["notes"][0]


def test_files_without_hashes_compare_custom_code_and_say_so() -> None:
    a, b = profile(), profile()
    del a["files"]["hashes"], b["files"]["hashes"]
    group = diff_profiles(a, b, ["files"])["groups"]["files"]
    assert group["identical"] and "either profile" in group["notes"][0]


def test_environment_versions_and_group_selection() -> None:
    b = profile()
    b["environment"]["packages"]["transformers"] = "5.24.0"
    b["environment"]["packages"]["tiktoken"] = None
    b["tokenizer"]["vocab_size"] = 1
    result = diff_profiles(profile(), b, ["environment"])
    assert list(result["groups"]) == ["environment"]
    assert keys(result, "environment") == ["packages.tiktoken", "packages.transformers"]
    assert diff_profiles(profile(), b, ["architecture", "files"])["identical"] is True
    with pytest.raises(ValueError, match="nonsense"):
        diff_profiles(profile(), b, ["nonsense"])


def test_malformed_profiles_never_raise() -> None:
    result = diff_profiles({"architecture": [1], "tokenizer": "x", "files": None}, {})
    assert result["identical"] is True
    assert flatten({"a": [{"b": 1}, {"c": [1, 2]}], "d": {}}) == {"a[0].b": 1, "a[1].c": [1, 2], "d": {}}


# --------------------------------------------------------------------------- CLI on saved files


@pytest.fixture
def saved(tmp_path: Path) -> tuple[Path, Path, Path]:
    a, b, same = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "same.json"
    changed = copy.deepcopy(profile())
    changed["tokenizer"]["chat_template"].update(sha256="b" * 64, text=TEMPLATE.replace("endfor", "endfor "))
    a.write_text(json.dumps(profile()))
    same.write_text(json.dumps(profile()))
    b.write_text(json.dumps(changed))
    return a, b, same


def test_cli_diff_saved_profiles(saved: tuple[Path, Path, Path], tmp_path: Path) -> None:
    a, b, same = saved
    result = run_cli("diff", str(a), str(b), cwd=tmp_path)
    assert result.code == 1, result.stderr
    assert "tokenizer: 1 difference" in result.stdout
    assert "chat template (chat_template.jinja) differs" in result.stdout
    assert "+{%- endfor  -%}" in result.stdout and "-{%- endfor -%}" in result.stdout
    assert "result: different (tokenizer)" in result.stdout
    result = run_cli("diff", str(a), str(same), cwd=tmp_path)
    assert result.code == 0 and "result: identical" in result.stdout
    result = run_cli("diff", str(a), str(b), "--only", "architecture", "--json", cwd=tmp_path)
    assert result.code == 0 and list(result.json()["groups"]) == ["architecture"]


def test_cli_diff_usage_errors(saved: tuple[Path, Path, Path], tmp_path: Path) -> None:
    a, _b, _same = saved
    assert_clean_error(run_cli("diff", str(a), "no-such-file", cwd=tmp_path), 2, "neither a saved profile")
    assert_clean_error(run_cli("diff", str(a), "host:relative/x/y", cwd=tmp_path), 2, "absolute model path")
    raw = tmp_path / "raw.json"
    raw.write_text(json.dumps({"schema": "introspect.raw/v1"}))
    assert_clean_error(run_cli("diff", str(a), str(raw), cwd=tmp_path), 2, "not an introspect profile")
    assert_clean_error(run_cli("diff", str(a), str(a), "--host", "x", cwd=tmp_path), 2, "not from --host")
    assert run_cli("diff", str(a), str(a), "--only", "bogus", cwd=tmp_path).code == 2
