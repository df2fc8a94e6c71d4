"""Model fixtures for the preflight tests: the Kimi fixture, broken in one way each, and a
small tokenizer.json model whose template has ``{% generation %}`` markers.

Variants are copies of ``build_kimi_model``'s output with one edit, so each fails
exactly one thing for a real reason that the loaded tokenizer exposes:

- ``shifted-ids``: the class keeps its own id table (as the real K2 code's layout does)
  while tokenizer_config.json's added_tokens_decoder has ``<think>``/``</think>`` one id
  higher, as an automatic conversion that shifts ids leaves it: ``decode([163607])``
  gives ``</think>`` where the files say ``<think>``.
- ``small-vocab``: config.json's text_config.vocab_size 163584 (the rank count), below
  the tokenizer's 163840 ids: the 256 special ids (and [UNK]) fall outside the embedding.
- ``chatml-template``: a ChatML template on Kimi's tokenizer: ``<|im_start|>`` is not a
  token of it, so the turn marker splits into pieces.
- ``no-eot-stop``: generation_config.json stops only on [EOS], not on ``<|im_end|>``
  which ends every turn.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tests.fixtures.kimi_model import KIMI_ADDED_TOKENS, NUM_RANKS

KIMI_VARIANTS = ("shifted-ids", "small-vocab", "chatml-template", "no-eot-stop")
SHIFTED = (163606, 163607)  # <think>, </think>

CHATML_TEMPLATE = """{%- for message in messages -%}
<|im_start|>{{ message['role'] }}
{{ message['content'] }}<|im_end|>
{% endfor -%}
{%- if add_generation_prompt -%}<|im_start|>assistant
{% endif -%}"""

# ChatML with transformers' {% generation %} markers around what the assistant says,
# so apply_chat_template(return_assistant_tokens_mask=True) can build the loss mask.
GENERATION_TEMPLATE = """{%- for message in messages -%}
{%- if message['role'] == 'assistant' -%}
<|im_start|>assistant
{% generation %}{{ message['content'] }}<|im_end|>{% endgeneration %}
{% else -%}
<|im_start|>{{ message['role'] }}
{{ message['content'] }}<|im_end|>
{% endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}<|im_start|>assistant
{% endif -%}"""

TINY_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>")
TINY_VOCAB_SIZE = 264  # 256 byte tokens + 4 specials, padded to a multiple of 8 as trainers do


def build_kimi_variant(base: Path, dest: Path, variant: str) -> Path:
    """Copy the Kimi fixture at ``base`` to ``dest`` and break it as ``variant`` says."""
    if variant not in KIMI_VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; one of {KIMI_VARIANTS}")
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(base, dest)
    {"shifted-ids": _shift_ids, "small-vocab": _small_vocab, "chatml-template": _chatml_template,
     "no-eot-stop": _no_eot_stop}[variant](dest)
    return dest


def _shift_ids(dest: Path) -> None:
    code_file = dest / "tokenization_kimi.py"
    code = code_file.read_text(encoding="utf-8")
    line = "special_tokens_mapping = {i: added_tokens_decoder[i].content for i in added_tokens_decoder}"
    assert line in code, "the Kimi fixture's tokenizer code changed; update this variant"
    table = {i: content for i, (content, _special) in KIMI_ADDED_TOKENS.items()}
    code_file.write_text(code.replace(line, f"special_tokens_mapping = {table!r}"), encoding="utf-8")
    config = _read(dest / "tokenizer_config.json")
    decoder = config["added_tokens_decoder"]
    moved = {str(int(k) + 1 if int(k) in SHIFTED else int(k)): v for k, v in decoder.items()}
    config["added_tokens_decoder"] = dict(sorted(moved.items(), key=lambda kv: int(kv[0])))
    _write(dest / "tokenizer_config.json", config)


def _small_vocab(dest: Path) -> None:
    config = _read(dest / "config.json")
    config["text_config"]["vocab_size"] = NUM_RANKS
    _write(dest / "config.json", config)


def _chatml_template(dest: Path) -> None:
    (dest / "chat_template.jinja").write_text(CHATML_TEMPLATE, encoding="utf-8")


def _no_eot_stop(dest: Path) -> None:
    gen = _read(dest / "generation_config.json")
    gen["eos_token_id"] = 163585
    _write(dest / "generation_config.json", gen)


def build_generation_marker_model(dest: Path) -> Path:
    """A small byte-level BPE model (tokenizer.json, no remote code) whose template has
    ``{% generation %}`` markers and whose tokenizer has a mask token."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    dest.mkdir(parents=True, exist_ok=True)
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tokenizer = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in TINY_SPECIALS])
    tokenizer.save(str(dest / "tokenizer.json"))
    _write(dest / "tokenizer_config.json", {
        "tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
        "mask_token": "<|mask|>", "model_max_length": 4096, "clean_up_tokenization_spaces": False})
    (dest / "chat_template.jinja").write_text(GENERATION_TEMPLATE, encoding="utf-8")
    _write(dest / "config.json", {
        "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "vocab_size": TINY_VOCAB_SIZE,
        "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "eos_token_id": 258, "tie_word_embeddings": True})
    _write(dest / "generation_config.json", {"eos_token_id": [256, 258], "pad_token_id": 256})
    return dest


def _read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _write(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
