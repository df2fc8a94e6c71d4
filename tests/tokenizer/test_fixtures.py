"""The test fixtures themselves: the Kimi model directory and the throwaway venvs."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from tests.fixtures.kimi_model import KIMI_ADDED_TOKENS, NUM_RANKS, VOCAB_SIZE, build_kimi_model
from tests.fixtures.venvs import make_venv


def test_kimi_fixture_layout(kimi_model: Path, tmp_path: Path) -> None:
    config = json.loads((kimi_model / "config.json").read_text())
    text = config["text_config"]
    assert config["model_type"] == "kimi_k25" and "num_hidden_layers" not in config
    assert (text["num_hidden_layers"], text["hidden_size"], text["vocab_size"]) == (61, 7168, VOCAB_SIZE)
    assert (text["q_lora_rank"], text["kv_lora_rank"], text["qk_nope_head_dim"], text["qk_rope_head_dim"],
            text["v_head_dim"], text["num_attention_heads"]) == (1536, 512, 128, 64, 128, 64)
    assert (text["n_routed_experts"], text["n_shared_experts"], text["num_experts_per_tok"]) == (384, 1, 8)

    lines = (kimi_model / "tiktoken.model").read_bytes().splitlines()
    assert len(lines) == NUM_RANKS == VOCAB_SIZE - 256
    tokens = [base64.b64decode(line.split()[0]) for line in lines]
    assert [int(line.split()[1]) for line in lines] == list(range(NUM_RANKS))
    assert tokens[:256] == [bytes([b]) for b in range(256)]  # any text encodes
    assert len(set(tokens)) == NUM_RANKS

    tok_config = json.loads((kimi_model / "tokenizer_config.json").read_text())
    assert tok_config["auto_map"] == {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]}
    decoder = {int(k): (v["content"], v["special"]) for k, v in tok_config["added_tokens_decoder"].items()}
    assert decoder == KIMI_ADDED_TOKENS
    code = (kimi_model / "tokenization_kimi.py").read_text()
    assert "import tiktoken" in code and "num_reserved_special_tokens = 256" in code
    assert "from .tool_declaration_ts import encode_tools_to_typescript_style" in code
    assert (kimi_model / "tool_declaration_ts.py").is_file()

    # Deterministic: the same bytes on every build.
    again = build_kimi_model(tmp_path / "again")
    for name in ("tiktoken.model", "tokenizer_config.json", "chat_template.jinja", "tokenization_kimi.py"):
        assert hashlib.sha256((again / name).read_bytes()).digest() == hashlib.sha256(
            (kimi_model / name).read_bytes()).digest(), name


def test_k2_instruct_variant(tmp_path: Path) -> None:
    model = build_kimi_model(tmp_path / "k2", variant="k2-instruct")
    assert json.loads((model / "config.json").read_text())["model_type"] == "kimi_k2"
    assert not (model / "tool_declaration_ts.py").exists()
    assert ".tool_declaration_ts" not in (model / "tokenization_kimi.py").read_text()
    with pytest.raises(ValueError):
        build_kimi_model(tmp_path / "x", variant="k3")


def test_make_venv_hides_excluded_distributions(venv_no_tiktoken: Path) -> None:
    python = venv_no_tiktoken / "bin" / "python"
    code = (
        "import importlib.metadata as md, importlib.util as u, sys\n"
        "print(sys.prefix)\n"
        "print(u.find_spec('tiktoken') is None, u.find_spec('tiktoken_ext') is None)\n"
        "print([d.metadata['Name'] for d in md.distributions() if d.metadata['Name'].lower() == 'tiktoken'])\n"
        "print(md.version('transformers'), u.find_spec('jinja2') is not None)\n"
    )
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert Path(out[0]) == venv_no_tiktoken  # a venv of its own, not the test interpreter's
    assert out[1] == "True True" and out[2] == "[]"
    assert out[3].split()[1] == "True" and out[3].split()[0]


def test_make_venv_refuses_unknown_names(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no-such-dist"):
        make_venv(tmp_path / "v", exclude={"no-such-dist"})
