"""The fallback: tokenizer facts from raw files must equal what the loaded tokenizer reports.

The key case: a venv without tiktoken cannot load Kimi's tokenizer; the
profile must still give vocab size, bos/eos ids, special tokens and the template
hash, identical to a venv that loads it, plus the missing-package finding and fix.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from introspect.analysis.tokenizer.section import analyze_tokenizer, config_vocab_size, facts_from_files
from introspect.remote.facts.tokenizer.tokenizer_files import collect_tokenizer_files
from tests.fixtures.kimi_model import build_kimi_model
from tests.tokenizer.conftest import ProbeRunner

COMPARED = ("vocab_size", "len", "bos", "eos", "pad", "unk", "mask", "special_tokens")
CAP = 1 << 24


def _target(venv: Path | None = None, python: str | None = None, model: Path | None = None) -> dict[str, Any]:
    return {"host": "127.0.0.1", "port": 22, "user": "root", "python": python,
            "venv": str(venv) if venv else None, "model_path": str(model) if model else None}


def _files(model: Path) -> dict[str, Any]:
    files, errors = collect_tokenizer_files(str(model), json_cap=CAP)
    assert errors == []
    return files


def _config(model: Path) -> dict[str, Any]:
    return json.loads((model / "config.json").read_text())


def _same_facts(fallback: dict[str, Any], loaded: dict[str, Any]) -> None:
    assert {k: fallback[k] for k in COMPARED} == {k: loaded[k] for k in COMPARED}
    assert fallback["chat_template"]["sha256"] == loaded["chat_template"]["sha256"]
    assert fallback["chat_template"]["source"] == loaded["chat_template"]["source"]
    assert fallback["chat_template"]["text"] == loaded["chat_template"]["text"]


def test_kimi_fallback_equals_loaded(
    kimi_model: Path, kimi_loaded: dict[str, Any], kimi_no_tiktoken: dict[str, Any],
    venv_full: Path, venv_no_tiktoken: Path,
) -> None:
    files, config = _files(kimi_model), _config(kimi_model)
    loaded, loaded_findings = analyze_tokenizer(
        files, kimi_loaded, config=config, target=_target(venv_full, model=kimi_model), remote_code_allowed=True)
    fallback, findings = analyze_tokenizer(
        files, kimi_no_tiktoken, config=config, target=_target(venv_no_tiktoken, model=kimi_model),
        remote_code_allowed=True)

    assert (loaded["loaded"], loaded["source"], loaded["class"]) == (True, "transformers", "TikTokenTokenizer")
    assert (fallback["loaded"], fallback["source"], fallback["class"]) == (False, "files", "TikTokenTokenizer")
    _same_facts(fallback, loaded)
    assert (fallback["vocab_size"], fallback["bos"]["id"], fallback["eos"]["id"]) == (163840, 163584, 163585)
    assert len(fallback["special_tokens"]) == 16
    assert fallback["chat_template"]["present"] and fallback["chat_template"]["sample"] is None
    assert loaded["chat_template"]["sample"].endswith("<|im_assistant|>assistant<|im_middle|><think>")

    assert set(loaded["sources"].values()) == {"transformers"}
    assert fallback["sources"] == {**dict.fromkeys(fallback["sources"], "files"), "mask": None}
    assert fallback["files"]["base"] == 163584 and fallback["files"]["reserved"] == 256

    assert fallback["error"] == {"type": "ImportError", "message": kimi_no_tiktoken["error"]["message"],
                                 "missing_packages": ["tiktoken"], "cause": "missing-package"}
    assert loaded_findings == []
    assert findings == [{
        "severity": "error",
        "code": "missing-package",
        "message": f"the tokenizer (TikTokenTokenizer from tokenization_kimi.py) needs tiktoken, "
                   f"not installed in {venv_no_tiktoken}",
        "fix": f"{venv_no_tiktoken}/bin/pip install tiktoken",
        "package": "tiktoken",
    }]


@pytest.mark.parametrize(
    ("variant", "options"),
    [("k2-instruct", {}), ("k2.6", {"template_in_config": True})],
    ids=["k2-instruct-flat-config", "k2.6-inline-template-too"],
)
def test_fallback_without_remote_code_equals_loaded(
    tmp_path: Path, venv_full: Path, probe: ProbeRunner, variant: str, options: dict[str, Any]
) -> None:
    model = build_kimi_model(tmp_path / variant, variant=variant, **options)
    files, config = _files(model), _config(model)
    result = probe(venv_full, model)
    assert result["loaded"] is True, result["error"]
    loaded, _ = analyze_tokenizer(files, result, config=config, target=_target(venv_full), remote_code_allowed=True)
    fallback, findings = analyze_tokenizer(files, None, config=config, target=_target(venv_full),
                                           remote_code_allowed=False)
    _same_facts(fallback, loaded)
    assert fallback["chat_template"]["source"] == "chat_template.jinja"  # the file wins over the inline copy
    assert [f["code"] for f in findings] == ["remote-code-disabled"]
    assert findings[0]["severity"] == "info" and "tokenization_kimi.py (sha256 " in findings[0]["fix"]


def test_kimi_linear_reserves_258_past_the_embedding(tmp_path: Path, venv_full: Path, probe: ProbeRunner) -> None:
    """Kimi-Linear's class reserves 256 + 2 ids: 163842 tokens for 163840 embedding rows."""
    model = build_kimi_model(tmp_path / "Kimi-Linear")
    code = model / "tokenization_kimi.py"
    source = code.read_text()
    assert "num_base_tokens + self.num_reserved_special_tokens)" in source
    code.write_text(source.replace("num_base_tokens + self.num_reserved_special_tokens)",
                                   "num_base_tokens + self.num_reserved_special_tokens + 2)"))
    files, config = _files(model), _config(model)
    result = probe(venv_full, model, sample=False)
    assert result["loaded"] is True, result["error"]
    loaded, loaded_findings = analyze_tokenizer(files, result, config=config, target=_target(venv_full),
                                                remote_code_allowed=True)
    fallback, fallback_findings = analyze_tokenizer(files, None, config=config, target=_target(venv_full),
                                                    remote_code_allowed=True)
    assert loaded["len"] == fallback["len"] == 163842
    _same_facts(fallback, loaded)
    for found in (loaded_findings, fallback_findings):
        [exceeds] = [f for f in found if f["code"] == "vocab-exceeds-embedding"]
        assert exceeds["severity"] == "error"
        assert "163842" in exceeds["message"] and "text_config.vocab_size" in exceeds["message"]


# ---------------------------------------------------------------- pure analysis, no tokenizer load


@pytest.fixture(scope="module")
def kimi_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _files(build_kimi_model(tmp_path_factory.mktemp("m") / "Kimi-K2.6"))


def _failed_probe(**error: Any) -> dict[str, Any]:
    base = {"type": "ImportError", "message": "boom", "cause": "exception", "missing_packages": []}
    return {"loaded": False, "error": {**base, **error}, "fact_errors": []}


def test_pip_fix_without_venv_uses_the_interpreter(kimi_files: dict[str, Any]) -> None:
    _, findings = analyze_tokenizer(
        kimi_files, _failed_probe(cause="missing-package", missing_packages=["tiktoken"]),
        config=None, target=_target(python="/opt/my py/bin/python3"), remote_code_allowed=True)
    [f] = findings
    assert f["fix"] == "'/opt/my py/bin/python3' -m pip install tiktoken"
    assert "not installed in /opt/my py/bin/python3" in f["message"]


def test_too_old_package_gets_a_versioned_fix(kimi_files: dict[str, Any]) -> None:
    probe = {"loaded": True, "class": "X", "fact_errors": [],
             "sample": {"text": None, "error": {"type": "ImportError", "message": "old",
                                                "missing_packages": ["jinja2>=3.1.0"]}}}
    _, findings = analyze_tokenizer(kimi_files, probe, config=None, target=_target(Path("/v")),
                                    remote_code_allowed=True)
    [f] = findings
    assert f["code"] == "missing-package" and f["fix"] == "/v/bin/pip install 'jinja2>=3.1.0'"


def test_other_load_failures(kimi_files: dict[str, Any]) -> None:
    section, findings = analyze_tokenizer(
        kimi_files, _failed_probe(type="ImportError", message="cannot import name 'x' from 'y'\nmore",
                                  cause="incompatible-code"),
        config=None, target=_target(Path("/v")), remote_code_allowed=True)
    [f] = findings
    assert (f["severity"], f["code"]) == ("error", "tokenizer-load-failed")
    assert "cannot import name 'x' from 'y'" in f["message"] and "more" not in f["message"]
    assert "raw files" in f["message"] and "transformers" in f["fix"]
    assert section["vocab_size"] == 163840  # the fallback still stands


def test_refused_remote_code_when_not_allowed_is_only_info(kimi_files: dict[str, Any]) -> None:
    _, findings = analyze_tokenizer(kimi_files, _failed_probe(type="ValueError", cause="remote-code-refused"),
                                    config=None, target=_target(), remote_code_allowed=False)
    assert [(f["severity"], f["code"]) for f in findings] == [("info", "remote-code-disabled")]


def test_a_fact_the_probe_could_not_read_comes_from_files(kimi_files: dict[str, Any]) -> None:
    probe = {"loaded": True, "class": "TikTokenTokenizer", "vocab_size": None, "len": 163840,
             "fact_errors": [{"fact": "vocab_size", "type": "NotImplementedError", "message": ""}],
             "special_tokens": [], "sample": None}
    section, _ = analyze_tokenizer(kimi_files, probe, config=None, target=_target(), remote_code_allowed=True)
    assert section["vocab_size"] == 163840 and section["sources"]["vocab_size"] == "files"
    assert section["sources"]["len"] == "transformers"


def test_sample_render_failure_is_a_warning(kimi_files: dict[str, Any]) -> None:
    probe = {"loaded": True, "class": "X", "fact_errors": [],
             "sample": {"text": None, "error": {"type": "TemplateError", "message": "boom", "missing_packages": []}}}
    section, findings = analyze_tokenizer(kimi_files, probe, config=None, target=_target(), remote_code_allowed=True)
    assert [(f["severity"], f["code"]) for f in findings] == [("warning", "chat-template-render-failed")]
    assert section["chat_template"]["sample_error"]["type"] == "TemplateError"


def test_placeholder_names_resolve_reserved_ids(kimi_files: dict[str, Any]) -> None:
    """A named token that is one of the unnamed reserved ids resolves through the placeholder."""
    files = copy.deepcopy(kimi_files)
    files["tokenizer_config"]["mask_token"] = "<|reserved_token_163589|>"
    facts = facts_from_files(files)
    assert facts["mask"] == {"token": "<|reserved_token_163589|>", "id": 163589}
    files["tokenizer_config"]["mask_token"] = "<|reserved_token_163840|>"  # past the reserved range
    assert facts_from_files(files)["mask"] == {"token": "<|reserved_token_163840|>", "id": None}


def test_tiktoken_without_reserving_code(kimi_files: dict[str, Any]) -> None:
    """No class to reserve ids: transformers' own conversion fills base..highest added id."""
    files = copy.deepcopy(kimi_files)
    files["remote_code"] = None
    files["tokenizer_config"]["unk_token"] = "<|reserved_token_163700|>"
    facts = facts_from_files(files)
    assert (facts["vocab_size"], facts["len"]) == (163584, 163840)
    assert facts["bos"] == {"token": "[BOS]", "id": 163584}
    assert facts["unk"] == {"token": "<|reserved_token_163700|>", "id": 163700}


def test_converted_kimi_without_remote_code_matches(kimi_model: Path, kimi_converted: dict[str, Any]) -> None:
    """When transformers converts tiktoken itself (no remote code), the conversion rule holds."""
    result = kimi_converted
    if not result["loaded"]:
        pytest.skip(f"this transformers does not convert tiktoken: {result['error']['message'][:200]}")
    files = _files(kimi_model)
    files["remote_code"] = None  # what transformers looks at without remote code
    facts = facts_from_files(files)
    assert (facts["vocab_size"], facts["len"]) == (result["vocab_size"], result["len"])
    assert facts["special_tokens"] == result["special_tokens"]


def test_config_vocab_size_locations() -> None:
    assert config_vocab_size({"vocab_size": 10}) == (10, "config.json vocab_size")
    assert config_vocab_size({"text_config": {"vocab_size": 7}}) == (7, "config.json text_config.vocab_size")
    assert config_vocab_size({"llm_config": {"vocab_size": 5}})[0] == 5
    assert config_vocab_size(None) == (None, None)
    assert config_vocab_size({"vocab_size": "x"}) == (None, None)


@pytest.mark.parametrize("garbage", [{}, {"tokenizer_config": [], "tiktoken": "x", "chat_templates": [1, None],
                                          "tokenizer_json": {"added_tokens": [{"id": "a"}]}, "remote_code": 5}])
def test_malformed_raw_facts_never_raise(garbage: dict[str, Any]) -> None:
    probe = {"loaded": True, "special_tokens": [None, 3], "bos": "x", "chat_template": "y",
             "added_tokens_check": {"items": [None]}, "sample": 4}
    for p in (None, probe, {"loaded": False, "error": "str"}):
        section, findings = analyze_tokenizer(garbage, p, config={"vocab_size": 1}, target={},
                                              remote_code_allowed=True)
        assert set(section) >= {"loaded", "source", "class", "vocab_size", "bos", "eos", "pad", "unk", "mask",
                                "special_tokens", "chat_template", "error", "sources", "len"}
        assert isinstance(findings, list)
