"""A non-Kimi layout: a fast tokenizer from tokenizer.json (built here with `tokenizers`).

Loaded facts and file facts must agree for the two layouts transformers reads:
the current one (added_tokens_decoder in tokenizer_config.json, inline template)
and the legacy one (special_tokens_map.json, chat_template.jinja). A tokenizer_config
whose ids disagree with tokenizer.json must be caught.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from introspect.analysis.tokenizer.section import analyze_tokenizer
from introspect.remote.facts.tokenizer.tokenizer_files import collect_tokenizer_files
from tests.tokenizer.conftest import ProbeRunner

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<pad>"]
CORPUS = ["The quick brown fox jumps over the lazy dog."] * 3 + ["Hello world, hello tokenizer!", "What is 2 + 2?"]
TARGET = {"host": None, "port": None, "user": None, "python": "python3", "venv": None, "model_path": None}
COMPARED = ("vocab_size", "len", "bos", "eos", "pad", "unk", "mask", "special_tokens")


def build_fast_model(dest: Path, *, legacy: bool = False, shift_ids: bool = False) -> Path:
    """A byte-level BPE (300 ids, specials 0..3) plus <mask> (300, special) and <tool> (301)."""
    dest.mkdir(parents=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(CORPUS, trainer)
    tok.post_processor = processors.TemplateProcessing(single="<|endoftext|> $A", special_tokens=[("<|endoftext|>", 0)])
    tok.add_special_tokens(["<mask>"])
    tok.add_tokens(["<tool>"])
    tok.save(str(dest / "tokenizer.json"))

    named = {"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>", "pad_token": "<pad>", "mask_token": "<mask>"}
    config: dict[str, Any] = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": None, **named}
    (dest / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 302}))
    if legacy:
        (dest / "special_tokens_map.json").write_text(json.dumps(named))
        (dest / "chat_template.jinja").write_text(CHATML)
        config = {"tokenizer_class": "PreTrainedTokenizerFast"}
    else:
        added = json.loads((dest / "tokenizer.json").read_text())["added_tokens"]
        # shift_ids: the files claim every added token one id higher than tokenizer.json has it.
        config["added_tokens_decoder"] = {
            str(t["id"] + (1 if shift_ids else 0)): {k: v for k, v in t.items() if k != "id"} for t in added
        }
        config["chat_template"] = CHATML
    (dest / "tokenizer_config.json").write_text(json.dumps(config))
    return dest


@pytest.mark.parametrize("legacy", [False, True], ids=["added_tokens_decoder", "legacy-special-tokens-map"])
def test_fast_fallback_equals_loaded(tmp_path: Path, venv_full: Path, probe: ProbeRunner, legacy: bool) -> None:
    model = build_fast_model(tmp_path / "fast", legacy=legacy)
    files, errors = collect_tokenizer_files(str(model), json_cap=1 << 24)
    assert errors == []
    summary = files["tokenizer_json"]
    assert (summary["model_type"], summary["vocab_size"], summary["max_vocab_id"]) == ("BPE", 300, 299)
    assert summary["post_processor"]["bos"] == {"token": "<|endoftext|>", "id": 0}
    assert summary["pre_tokenizer"] == "ByteLevel" and summary["merges"] > 0

    result = probe(venv_full, model)
    assert result["loaded"] is True, result["error"]
    assert result["is_fast"] is True
    config = json.loads((model / "config.json").read_text())
    loaded, loaded_findings = analyze_tokenizer(files, result, config=config, target=TARGET, remote_code_allowed=True)
    fallback, _ = analyze_tokenizer(files, None, config=config, target=TARGET, remote_code_allowed=True)

    assert loaded["source"] == "transformers" and fallback["source"] == "files"
    assert {k: fallback[k] for k in COMPARED} == {k: loaded[k] for k in COMPARED}
    assert (loaded["vocab_size"], loaded["len"]) == (300, 302)
    assert loaded["mask"] == {"token": "<mask>", "id": 300}
    assert loaded["unk"] is None
    assert fallback["chat_template"]["sha256"] == loaded["chat_template"]["sha256"]
    assert fallback["chat_template"]["source"] == loaded["chat_template"]["source"]
    assert loaded["chat_template"]["sample"].endswith("<|im_start|>assistant\n")
    assert loaded_findings == []


def test_ids_that_disagree_with_the_files_are_caught(tmp_path: Path, venv_full: Path, probe: ProbeRunner) -> None:
    """Every added_tokens_decoder id must map both ways and decode to its token."""
    model = build_fast_model(tmp_path / "shifted", shift_ids=True)
    files, _ = collect_tokenizer_files(str(model), json_cap=1 << 24)
    result = probe(venv_full, model, sample=False)
    assert result["loaded"] is True, result["error"]
    assert result["added_tokens_check"]["mismatches"] > 0
    section, findings = analyze_tokenizer(files, result, config=None, target=TARGET, remote_code_allowed=True)
    [mismatch] = [f for f in findings if f["code"] == "special-token-mismatch"]
    assert mismatch["severity"] == "error"
    assert "<|im_end|>" in mismatch["message"]
    assert section["added_tokens_check"]["items"]  # only the disagreeing ids are kept
    # From the files alone the disagreement shows too, and tokenizer.json (what a fast
    # tokenizer uses) decides the fallback's ids.
    fallback, file_findings = analyze_tokenizer(files, None, config=None, target=TARGET, remote_code_allowed=True)
    assert "added-tokens-conflict" in {f["code"] for f in file_findings}
    assert {k: fallback[k] for k in COMPARED} == {k: section[k] for k in COMPARED}
