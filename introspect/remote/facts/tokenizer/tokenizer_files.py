"""Section ``tokenizer_files``: tokenizer facts from the files of a model directory (no tokenizer library).

Runs on the host: standard library only, Python 3.8+. These facts feed the local
fallback (``introspect.analysis.tokenizer.section``) when the tokenizer cannot be loaded, so
they must be complete enough to rebuild vocab size, special tokens and template
without transformers. The shape is :class:`introspect.remote.contract.TokenizerFilesFacts`;
tokenizer.json, the vocabulary files and the tokenizer's code are read by their own
modules. Nothing here raises: each unreadable file becomes one error record ``{"probe": "tokenizer_files", "type", "message", "path"}`` and the rest stands.

Layout of the facts (absent file -> null / empty list, never an error)::

    {
      "tokenizer_config": {...} | null,     # raw tokenizer_config.json, minus "chat_template"
                                            # (moved to chat_templates, it can be 10s of KB)
      "special_tokens_map": {...} | null,   # raw special_tokens_map.json
      "chat_templates": [                   # every template found, files first
        {"source": "chat_template.jinja" | "additional_chat_templates/x.jinja"
                   | "tokenizer_config.json" | "chat_template.json",
         "name": "default" | <name>, "text": str, "sha256": str, "chars": int}
      ],
      "tokenizer_json": null | {            # tokenizer.json summarised, never shipped
        "file", "size", "sha256", "model_type", "vocab_size", "max_vocab_id", "merges",
        "added_tokens": [{"id", "content", "special"}],
        "normalizer", "pre_tokenizer", "decoder": type names (Sequence -> "Sequence[A,B]"),
        "post_processor": null | {"type", "single", "bos": {token, id} | null, "eos": ...},
        "vocab_lookup": {token: id}},      # the configs' named tokens found in the model vocab
      "tiktoken": [{"file", "size", "sha256", "entries", "distinct_tokens", "distinct_ranks",
                    "min_rank", "max_rank", "dense", "gaps", "duplicate_tokens",
                    "duplicate_ranks", "single_bytes", "malformed_lines",
                    "malformed_examples": [{"line", "reason"}]}],
      "sentencepiece": [{"file", "size", "sha256", ...}],  # sentencepiece_model.summarize_model
      "tekken": null | {...},               # tekken.summarize_tekken, plus file, size, sha256
      "remote_code": null | {               # the auto_map tokenizer class
        "auto_map": <raw AutoTokenizer value>, "auto_map_source": "tokenizer_config.json" | "config.json",
        "slow": null | {"ref", "module", "class", "file", "exists", "size", "sha256"},
        "fast": null | {...same...},
        "num_reserved_special_tokens": int | null,  # as declared in the code
        "reserved_extra": int,                     # "+ N" after it in range(...) (Kimi-Linear: 2)
        "reserved_declared_in": file | null,
        "placeholder": "<|reserved_token_{id}|>" | null,  # f-string naming unnamed reserved ids
        "static": {...}},                   # static_specials.scan_specials: what the code declares
      "vocab_choice": null | {"kind", "file", "reason", "candidates"},  # tokenizer_vocab_files.choose
    }
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, List, Optional, Tuple

from ...contract import (
    DEFAULT_JSON_CAP,
    TOKENIZER_JSON_CAP,
    ChatTemplateEntry,
    ErrorRecord,
    TokenizerFilesFacts,
    as_dict,
    error_record,
    tag,
)
from ...readers import read_json_capped, read_text_capped, sha256_text
from .tokenizer_code import remote_code
from .tokenizer_json import summarize_tokenizer_json
from .tokenizer_vocab_files import choose, collect_vocab_files

PROBE = "tokenizer_files"


def collect_tokenizer_files(model_path: str, *,
                            json_cap: int = DEFAULT_JSON_CAP) -> Tuple[TokenizerFilesFacts, List[ErrorRecord]]:
    """Every tokenizer fact the raw files of ``model_path`` give; see the module docstring."""
    facts = TokenizerFilesFacts(tokenizer_config=None, special_tokens_map=None, chat_templates=[],
                                tokenizer_json=None, tiktoken=[], sentencepiece=[], tekken=None, remote_code=None,
                                vocab_choice=None)
    errors: List[ErrorRecord] = []
    steps: Tuple[Tuple[str, Callable[[], None]], ...] = (
        ("tokenizer_config.json", lambda: _tokenizer_config(model_path, json_cap, facts, errors)),
        ("special_tokens_map.json", lambda: _special_tokens_map(model_path, json_cap, facts, errors)),
        ("chat_template", lambda: _template_files(model_path, json_cap, facts, errors)),
        # tokenizer.json is summarised here, never shipped, so it gets a larger cap than the JSON that travels.
        ("tokenizer.json", lambda: _tokenizer_json(model_path, max(json_cap, TOKENIZER_JSON_CAP), facts, errors)),
        ("tiktoken", lambda: _vocab_files(model_path, facts, errors)),
        ("remote_code", lambda: _remote_code(model_path, json_cap, facts, errors)),
        ("vocab_choice", lambda: _vocab_choice(facts)),
    )
    for name, step in steps:
        try:
            step()
        except Exception as exc:  # a bug in one step must not cost the other facts
            errors.append(_err("internal-error", "%s: %s: %s" % (name, type(exc).__name__, exc), model_path))
    return facts, errors


def _err(kind: str, message: str, path: Optional[str] = None) -> ErrorRecord:
    return error_record(kind, message, path, probe=PROBE)


def _present(path: str) -> bool:
    # lexists: a dangling link or a symlink loop is a present-but-broken file to report.
    return os.path.lexists(path)


def _read_json(path: str, cap: int, errors: List[ErrorRecord]) -> Any:
    if not _present(path):
        return None
    value, err = read_json_capped(path, cap)
    if err is not None:
        errors.append(tag(err, PROBE))
        return None
    return value


def _read_text(path: str, cap: int, errors: List[ErrorRecord]) -> Optional[str]:
    text, err = read_text_capped(path, cap)
    if err is not None:
        errors.append(tag(err, PROBE))
    return text


def _template_entry(source: str, name: str, text: str) -> ChatTemplateEntry:
    return ChatTemplateEntry(source=source, name=name, text=text, sha256=sha256_text(text), chars=len(text))


# ---------------------------------------------------------------- JSON configs and templates


def _tokenizer_config(path: str, cap: int, facts: TokenizerFilesFacts, errors: List[ErrorRecord]) -> None:
    config = _read_json(os.path.join(path, "tokenizer_config.json"), cap, errors)
    if config is None:
        return
    inline = config.pop("chat_template", None)  # can be 10s of KB: kept once, in chat_templates
    facts["tokenizer_config"] = config
    facts["chat_templates"].extend(_inline_templates(inline, "tokenizer_config.json"))


def _inline_templates(value: Any, source: str) -> List[ChatTemplateEntry]:
    """A chat_template value: a string, or a list of {"name", "template"} (named templates)."""
    if isinstance(value, str):
        return [_template_entry(source, "default", value)]
    out = []
    if isinstance(value, list):
        for item in value:
            if isinstance(item, dict) and isinstance(item.get("template"), str):
                out.append(_template_entry(source, str(item.get("name") or "default"), item["template"]))
    return out


def _special_tokens_map(path: str, cap: int, facts: TokenizerFilesFacts, errors: List[ErrorRecord]) -> None:
    facts["special_tokens_map"] = _read_json(os.path.join(path, "special_tokens_map.json"), cap, errors)


def _template_files(path: str, cap: int, facts: TokenizerFilesFacts, errors: List[ErrorRecord]) -> None:
    """chat_template.jinja, additional_chat_templates/*.jinja, chat_template.json.

    transformers reads the .jinja files before tokenizer_config.json's inline template;
    chat_template.json belongs to processors, kept for when nothing else exists.
    """
    found: List[ChatTemplateEntry] = []
    jinja = os.path.join(path, "chat_template.jinja")
    if _present(jinja):
        text = _read_text(jinja, cap, errors)
        if text is not None:
            found.append(_template_entry("chat_template.jinja", "default", text))
    extra_dir = os.path.join(path, "additional_chat_templates")
    if os.path.isdir(extra_dir):
        for name in sorted(os.listdir(extra_dir)):
            if not name.endswith(".jinja"):
                continue
            text = _read_text(os.path.join(extra_dir, name), cap, errors)
            if text is not None:
                found.append(_template_entry("additional_chat_templates/" + name, name[: -len(".jinja")], text))
    as_json = _read_json(os.path.join(path, "chat_template.json"), cap, errors)
    if as_json is not None:
        found.extend(_inline_templates(as_json.get("chat_template"), "chat_template.json"))
    # Files first: that is the order of precedence transformers applies.
    facts["chat_templates"] = found + facts["chat_templates"]


# ---------------------------------------------------------------- tokenizer.json, vocab files, code


def _tokenizer_json(path: str, cap: int, facts: TokenizerFilesFacts, errors: List[ErrorRecord]) -> None:
    file = os.path.join(path, "tokenizer.json")
    if not _present(file):
        return
    text = _read_text(file, cap, errors)
    if text is None:
        return
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        errors.append(_err("malformed-json", "%s: %s" % (file, exc), file))
        return
    if not isinstance(doc, dict):
        errors.append(_err("malformed-json", "%s holds a JSON %s, expected an object" % (file, type(doc).__name__),
                           file))
        return
    summary = summarize_tokenizer_json(doc, _named_token_strings(facts))
    summary["file"], summary["size"], summary["sha256"] = "tokenizer.json", len(text.encode("utf-8")), sha256_text(text)
    facts["tokenizer_json"] = summary


def _named_token_strings(facts: TokenizerFilesFacts) -> List[str]:
    """bos/eos/... strings the configs name, to look up in the vocab while we hold it."""
    out: List[str] = []
    for source in (facts["tokenizer_config"], facts["special_tokens_map"]):
        if not isinstance(source, dict):
            continue
        for key, value in source.items():
            if key.endswith("_token") and isinstance(value, dict):
                value = value.get("content")
            if key.endswith("_token") and isinstance(value, str) and value not in out:
                out.append(value)
    return out


def _vocab_files(path: str, facts: TokenizerFilesFacts, errors: List[ErrorRecord]) -> None:
    (tiktoken, sentencepiece, tekken), errs = collect_vocab_files(path, _named_token_strings(facts))
    facts["tiktoken"].extend(tiktoken)
    facts["sentencepiece"].extend(sentencepiece)
    facts["tekken"] = tekken
    errors.extend(errs)


def _vocab_choice(facts: TokenizerFilesFacts) -> None:
    """Which vocab file the fallback reads, and why; the class's vocab_files_names comes first."""
    static = as_dict(as_dict(facts["remote_code"]).get("static"))
    named = [v for v in as_dict(static.get("vocab_files")).values() if isinstance(v, str)]
    facts["vocab_choice"] = choose(facts, named)


def _remote_code(path: str, cap: int, facts: TokenizerFilesFacts, errors: List[ErrorRecord]) -> None:
    info, errs = remote_code(path, cap, facts["tokenizer_config"])
    facts["remote_code"] = info
    errors.extend(errs)
