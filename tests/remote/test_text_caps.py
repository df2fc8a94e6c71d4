"""Texts the probe returns are capped on the host, with the true size and a truncated flag:
a 2 MiB chat template is not shipped whole, a template rendering megabytes not either, an
error message carrying a whole file is cut; the profile says how big each really was."""

from __future__ import annotations

from introspect.analysis.tokenizer.section import tokenizer_section
from introspect.remote.facts.tokenizer.loaded_tokenizer import (
    SAMPLE_CAP,
    TEMPLATE_TEXT_CAP,
    chat_template,
    sample,
)
from introspect.remote.readers import sha256_text
from introspect.remote.runner import MAX_ERROR_MESSAGE, cap_messages


class HugeTokenizer:
    """A tokenizer whose template is 2 MiB and renders 1 MiB (the real API's two attributes)."""

    chat_template = "{# " + "x" * (2 << 20) + " #}"

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return "y" * (1 << 20)


def test_template_and_sample_are_cut_with_their_true_size(tmp_path):
    tok = HugeTokenizer()
    template = chat_template(tok, str(tmp_path), 1 << 20)
    assert template is not None
    assert len(template["text"]) == TEMPLATE_TEXT_CAP
    assert template["size"] == len(tok.chat_template) and template["truncated"] is True
    assert template["sha256"] == sha256_text(tok.chat_template)  # of the whole text: diffs stay right
    rendered = sample(tok)
    assert len(rendered["text"]) == SAMPLE_CAP and rendered["size"] == 1 << 20 and rendered["truncated"] is True

    probe = {"loaded": True, "chat_template": template, "sample": rendered, "class": "HugeTokenizer"}
    section, _ = tokenizer_section({}, probe, config=None, target={}, remote_code_allowed=True)
    shown = section.chat_template  # the typed section: the profile's schema has these keys
    assert shown.text_size == len(tok.chat_template) and shown.text_truncated is True
    assert shown.sample_size == 1 << 20 and shown.sample_truncated is True


def test_small_texts_carry_no_truncation_keys(tmp_path):
    class Small:
        chat_template = "{{ messages }}"

        def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
            return "hello"

    template = chat_template(Small(), str(tmp_path), 1 << 20)
    assert template is not None and "truncated" not in template and "size" not in template
    assert sample(Small()) == {"text": "hello", "error": None}


def test_error_messages_are_cut_with_their_true_size():
    errors = [{"type": "x", "message": "m" * 100000}, {"type": "y", "message": "short"}]
    cap_messages(errors)
    assert len(errors[0]["message"]) == MAX_ERROR_MESSAGE + 3
    assert errors[0]["message_size"] == 100000 and errors[0]["truncated"] is True
    assert errors[1] == {"type": "y", "message": "short"}
