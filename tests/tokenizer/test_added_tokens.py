"""The one added-tokens check (facts.added_tokens), as the tokenizer task and preflight ask for it.

A real fast tokenizer (tokenizers + transformers, built in memory) against files that
name one of its added tokens right and one wrong.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from introspect.remote.facts.tokenizer import added_tokens
from introspect.remote.tasks import preflight, tokenizer

tokenizers = pytest.importorskip("tokenizers")
transformers = pytest.importorskip("transformers")


@pytest.fixture
def tok() -> Any:
    core = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0, "a": 1, "b": 2}, unk_token="[UNK]"))
    core.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]")
    fast.add_special_tokens({"additional_special_tokens": ["<|im_end|>"]})
    assert fast.convert_tokens_to_ids("<|im_end|>") == 3
    return fast


@pytest.fixture
def model(tmp_path: Path) -> Path:
    # id 3 is right; id 4 names a token the loaded tokenizer does not have.
    decoder = {"3": {"content": "<|im_end|>", "special": True}, "4": {"content": "<|wrong|>", "special": True}}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"added_tokens_decoder": decoder}))
    (tmp_path / "tokenizer.json").write_text(json.dumps({"added_tokens": [{"id": 3, "content": "<|im_end|>"}]}))
    return tmp_path


def test_tokenizer_task_view_reports_every_id(tok: Any, model: Path) -> None:
    check = tokenizer._check_added_tokens(tok, str(model), 1 << 20)
    assert check is not None
    assert (check["checked"], check["mismatches"]) == (2, 1)
    assert [(i["id"], i["ok"]) for i in check["items"]] == [(3, True), (4, False)]
    assert "sources" not in check and all("encoded" not in i for i in check["items"])


def test_preflight_view_keeps_the_mismatches_with_their_file(tok: Any, model: Path) -> None:
    check = preflight.check_added_tokens(tok, str(model))
    assert check is not None
    assert check["sources"] == ["tokenizer_config.json"]  # id 3 is in both files: the config wins
    assert (check["checked"], check["mismatches"]) == (2, 1)
    (item,) = check["items"]
    assert item["id"] == 4 and item["source"] == "tokenizer_config.json" and item["ok"] is False
    assert item["encoded"] != [4]


def test_tokenizer_config_wins_over_tokenizer_json(model: Path) -> None:
    (model / "tokenizer.json").write_text(json.dumps({"added_tokens": [{"id": 4, "content": "<|other|>"}]}))
    expected = added_tokens.expected_tokens(str(model), preflight.ADDED_TOKEN_SOURCES, 1 << 20)
    assert expected == {3: ("<|im_end|>", "tokenizer_config.json"), 4: ("<|wrong|>", "tokenizer_config.json")}


def test_no_file_names_tokens(tmp_path: Path) -> None:
    assert added_tokens.expected_tokens(str(tmp_path), preflight.ADDED_TOKEN_SOURCES, 1 << 20) is None
