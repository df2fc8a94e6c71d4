"""The tokenizer task (introspect.remote.tasks.tokenizer), run in real venvs in subprocesses."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from introspect.remote.facts.tokenizer.tokenizer_load import classify_error, dist_name
from tests.fixtures.kimi_model import KIMI_ADDED_TOKENS, build_kimi_model
from tests.tokenizer.conftest import ProbeRunner, run_probe

KIMI_SAMPLE = (
    "<|im_system|>system<|im_middle|>You are a helpful assistant.<|im_end|>"
    "<|im_user|>user<|im_middle|>What is 2 + 2?<|im_end|>"
    "<|im_assistant|>assistant<|im_middle|><think></think>2 + 2 = 4.<|im_end|>"
    "<|im_user|>user<|im_middle|>And 3 + 3?<|im_end|>"
    "<|im_assistant|>assistant<|im_middle|><think>"
)


def test_kimi_loads_with_its_own_class(kimi_loaded: dict[str, Any], kimi_model: Path) -> None:
    r = kimi_loaded
    assert r["error"] is None and r["loaded"] is True, r["error"]
    assert r["class"] == "TikTokenTokenizer" and r["is_fast"] is False
    assert r["module"].startswith("transformers_modules.")
    assert (r["vocab_size"], r["len"]) == (163840, 163840)
    assert r["bos"] == {"token": "[BOS]", "id": 163584}
    assert r["eos"] == {"token": "[EOS]", "id": 163585}
    assert r["pad"] == {"token": "[PAD]", "id": 163839}
    assert r["unk"] == {"token": "[UNK]", "id": 163838}
    assert r["mask"] is None
    specials = [{"token": c, "id": i} for i, (c, special) in sorted(KIMI_ADDED_TOKENS.items()) if special]
    assert r["special_tokens"] == specials
    assert r["added_tokens"] == len(KIMI_ADDED_TOKENS)
    check = r["added_tokens_check"]
    assert (check["checked"], check["mismatches"]) == (len(KIMI_ADDED_TOKENS), 0)
    think = next(i for i in check["items"] if i["id"] == 163607)
    assert think == {"id": 163607, "expected": "</think>", "id_to_token": "</think>", "token_to_id": 163607,
                     "decoded": "</think>", "ok": True}
    template = r["chat_template"]
    assert template["source"] == "chat_template.jinja"
    assert template["sha256"] == hashlib.sha256((kimi_model / "chat_template.jinja").read_bytes()).hexdigest()
    assert r["sample"] == {"text": KIMI_SAMPLE, "error": None}
    assert r["fact_errors"] == []
    assert r["transformers_version"]
    # The fixture must stay cheap to load: every probe test pays for it.
    assert r["load_seconds"] < 5


def test_no_tiktoken_is_a_classified_missing_package(kimi_no_tiktoken: dict[str, Any]) -> None:
    r = kimi_no_tiktoken
    assert r["loaded"] is False
    err = r["error"]
    assert err["type"] == "ImportError"
    assert err["cause"] == "missing-package" and err["missing_packages"] == ["tiktoken"]
    assert "pip install tiktoken" in err["message"]
    assert err["traceback"] and len(err["traceback"]) <= 8
    assert not any(set(line.strip()) <= set("^~") for line in err["traceback"])
    assert r["transformers_version"]  # transformers itself is there


def test_no_tiktoken_without_remote_code(kimi_model: Path, venv_no_tiktoken: Path, probe: ProbeRunner) -> None:
    """Without trust_remote_code transformers tries its own tiktoken conversion: still tiktoken."""
    r = probe(venv_no_tiktoken, kimi_model, trust=False, sample=False)
    assert r["loaded"] is False
    assert r["error"]["missing_packages"] == ["tiktoken"]


def test_remote_code_off_in_full_venv(kimi_converted: dict[str, Any]) -> None:
    """transformers either refuses or loads a converted tokenizer; either way it is reported."""
    r = kimi_converted
    if r["loaded"]:
        assert r["class"] != "TikTokenTokenizer"  # not the model's own code
        assert r["added_tokens_check"]["checked"] == len(KIMI_ADDED_TOKENS)
    else:
        assert r["error"]["cause"] == "remote-code-refused"


def test_missing_jinja2_fails_only_the_sample(
    kimi_model: Path, venv_without: Callable[[str], Path], probe: ProbeRunner
) -> None:
    r = probe(venv_without("jinja2"), kimi_model)
    assert r["loaded"] is True and r["error"] is None
    assert r["chat_template"]["source"] == "chat_template.jinja"
    assert r["sample"]["text"] is None
    assert r["sample"]["error"]["missing_packages"] == ["jinja2"]


def test_no_transformers(kimi_model: Path, venv_without: Callable[[str], Path], probe: ProbeRunner) -> None:
    r = probe(venv_without("transformers"), kimi_model)
    assert r["loaded"] is False and r["transformers_version"] is None
    assert r["error"]["missing_packages"] == ["transformers"]


def test_code_written_for_another_transformers(tmp_path: Path, venv_full: Path, probe: ProbeRunner) -> None:
    """Old K2-Thinking code imports bytes_to_unicode from a path transformers 5 removed."""
    model = build_kimi_model(tmp_path / "Kimi-K2-Thinking")
    code = model / "tokenization_kimi.py"
    code.write_text(
        code.read_text().replace(
            "from transformers.convert_slow_tokenizer import bytes_to_unicode",
            "from transformers.models.gpt2.tokenization_gpt2 import bytes_to_unicode",
        )
    )
    r = probe(venv_full, model, sample=False)
    import transformers

    if r["loaded"]:  # transformers 4.x still has the old path
        assert transformers.__version__.startswith("4.")
        return
    assert r["error"]["type"] == "ImportError"
    assert r["error"]["cause"] == "incompatible-code" and r["error"]["missing_packages"] == []


def test_dir_without_tokenizer_files(tmp_path: Path, venv_full: Path, probe: ProbeRunner) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    r = probe(venv_full, tmp_path, sample=False)
    assert r["loaded"] is False
    assert r["error"]["cause"] == "missing-files", r["error"]


def test_caches_stay_in_the_private_dir(kimi_model: Path, venv_full: Path, tmp_path: Path) -> None:
    """tiktoken caches even local files by path; the module cache holds the model's code."""
    cache = tmp_path / "cache"
    cache.mkdir()
    r = run_probe(venv_full, kimi_model, cache, sample=False)
    assert r["loaded"] is True
    assert any((cache / "tiktoken").iterdir())
    assert list((cache / "hf" / "modules").rglob("tokenization_kimi.py"))


# ---------------------------------------------------------------- classification, in-process


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:  # noqa: BLE001
        return caught


@pytest.mark.parametrize(
    ("exc", "cause", "missing"),
    [
        (ImportError("This modeling file requires the following packages that were not found in your "
                     "environment: tiktoken, blobfile. Run `pip install tiktoken blobfile`"),
         "missing-package", ["tiktoken", "blobfile"]),
        (ModuleNotFoundError("No module named 'google.protobuf'", name="google.protobuf"), "missing-package", ["protobuf"]),
        (ModuleNotFoundError("No module named 'yaml_nope'", name="yaml_nope"), "missing-package", ["yaml_nope"]),
        (ImportError("LlamaTokenizer requires the SentencePiece library but it was not found in your environment."),
         "missing-package", ["sentencepiece"]),
        (ImportError("apply_chat_template requires jinja2>=3.1.0 to be installed. Your version is 2.11"),
         "missing-package", ["jinja2>=3.1.0"]),
        (ValueError("`tiktoken` is required to read a `tiktoken` file. Install it with `pip install tiktoken_nope`."),
         "missing-package", ["tiktoken_nope"]),
        (ValueError("The repository /m contains custom code which must be executed to correctly load the model. "
                    "Please pass the argument `trust_remote_code=True` to allow custom code to be run."),
         "remote-code-refused", []),
        (ImportError("cannot import name 'bytes_to_unicode' from 'json'", name="json"), "incompatible-code", []),
        # A submodule gone from an installed package is a version problem, not a missing package.
        (ModuleNotFoundError("No module named 'json.nope'", name="json.nope"), "incompatible-code", []),
        (OSError("Can't load tokenizer for '/m'."), "missing-files", []),
        (RuntimeError("boom"), "exception", []),
    ],
)
def test_classify_error(exc: BaseException, cause: str, missing: list[str]) -> None:
    err = classify_error(_raised(exc))
    assert (err["cause"], err["missing_packages"]) == (cause, missing)
    assert err["type"] == type(exc).__name__
    assert err["traceback"]


def test_classify_follows_the_cause_chain() -> None:
    try:
        try:
            raise ModuleNotFoundError("No module named 'sentencepiece_nope'", name="sentencepiece_nope")
        except ImportError as inner:
            raise ValueError("could not load") from inner
    except ValueError as outer:
        err = classify_error(outer)
    assert err["missing_packages"] == ["sentencepiece_nope"] and err["type"] == "ValueError"


def test_dist_names() -> None:
    assert [dist_name(m) for m in ("google.protobuf", "yaml", "PIL.Image", "tiktoken", "Jinja2")] == [
        "protobuf", "pyyaml", "pillow", "tiktoken", "jinja2"]


def test_long_messages_are_cut() -> None:
    err = classify_error(_raised(RuntimeError("x" * 10000)))
    assert len(err["message"]) <= 2000


def test_a_directory_shadowing_a_missing_package_is_still_missing(
    kimi_model: Path, venv_no_tiktoken: Path, tmp_path: Path
) -> None:
    """A dir named like the package in the working directory imports as a namespace package:
    check_imports passes, then ``tiktoken.load`` is missing. Still the tiktoken package."""
    (tmp_path / "tiktoken").mkdir()  # e.g. a TIKTOKEN_CACHE_DIR under the cwd
    r = run_probe(venv_no_tiktoken, kimi_model, tmp_path, sample=False)
    assert r["loaded"] is False
    assert r["error"]["type"] == "ModuleNotFoundError"
    assert (r["error"]["cause"], r["error"]["missing_packages"]) == ("missing-package", ["tiktoken"])
