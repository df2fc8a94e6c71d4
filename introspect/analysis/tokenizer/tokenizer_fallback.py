"""Tokenizer facts recomputed from the raw files, the way the tokenizer class would compute them.

Used when the tokenizer did not load on the target (a missing package, remote code
not allowed, a crash); the rules are listed in :mod:`introspect.analysis.tokenizer.section`.
Pure.
"""

from __future__ import annotations

from typing import Any

from introspect.analysis.tokenizer.shapes import (
    NAMED,
    AddedToken,
    Conflict,
    FileFacts,
    Template,
    Token,
    VocabFacts,
    shaped,
)
from introspect.analysis.tokenizer.tokenizer_layouts import refine as refine_layouts
from introspect.analysis.tokenizer.tokenizer_limits import plausible_rank
from introspect.remote.contract import (
    JSONObject,
    RemoteCodeInfo,
    TiktokenSummary,
    TokenizerFilesFacts,
    TokenizerJsonSummary,
    VocabChoice,
    as_dict,
)

KIMI_PLACEHOLDER = "<|reserved_token_{id}|>"
TEMPLATE_ORDER = ("chat_template.jinja", "additional_chat_templates/", "tokenizer_config.json", "chat_template.json")
# No class named anywhere: AutoTokenizer builds an empty config (model_type "") and takes the
# mapping's default, transformers 5's generic fast class
# (https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/models/auto/tokenization_auto.py#L1008);
# before transformers 5 the same default was named PreTrainedTokenizerFast.
TOKENIZER_JSON_CLASS = "TokenizersBackend"
TOKENIZER_JSON_CLASS_SOURCE = "tokenizer.json (no class named: transformers' default)"


def facts_from_files(tokenizer_files: TokenizerFilesFacts | None) -> FileFacts:
    """Every tokenizer fact the raw files give, as the tokenizer class would compute it."""
    files = shaped(tokenizer_files, TokenizerFilesFacts)
    tok_config = as_dict(files.get("tokenizer_config"))
    tok_json = shaped(files.get("tokenizer_json"), TokenizerJsonSummary)
    remote = shaped(files.get("remote_code"), RemoteCodeInfo)
    added, conflicts = _added_tokens(tok_config, tok_json)
    vocab = _vocab(files, tok_json, remote, added)
    vocab["added_token_conflicts"] = conflicts
    names = _id_to_token(added, vocab)
    lookup = {token: token_id for token_id, token in names.items()}
    for token, token_id in as_dict(tok_json.get("vocab_lookup")).items():
        lookup.setdefault(token, token_id)  # an added token wins over a plain vocab entry
    special_map = as_dict(files.get("special_tokens_map"))
    named = {attr: _resolve(_named_token(attr, tok_config, special_map), lookup) for attr in NAMED}
    declared = tok_config.get("tokenizer_class") if isinstance(tok_config.get("tokenizer_class"), str) else None
    default_class = None if declared is not None else tokenizer_json_class(files)
    facts: FileFacts = {
        "class": declared or default_class,
        "vocab_size": vocab["vocab_size"],
        "len": vocab["len"],
        "bos": named["bos"], "eos": named["eos"], "pad": named["pad"], "unk": named["unk"], "mask": named["mask"],
        "special_tokens": _special_tokens(added, names, vocab),
        "chat_template": _effective_template(files.get("chat_templates")),
        "vocab": vocab,
        "added_tokens": len(added),
    }
    refine_layouts(files, facts, sorted(added))  # sentencepiece, tekken, specials in code, class from layout
    if default_class is not None:
        facts["vocab"]["class_source"] = TOKENIZER_JSON_CLASS_SOURCE
    return facts


def tokenizer_json_class(files: TokenizerFilesFacts) -> str | None:
    """The class AutoTokenizer loads a tokenizer.json as when no file names one; None otherwise.

    A tokenizer.json wins over a tokenizer.model or ``*.tiktoken`` beside it (transformers reads
    it first); an auto_map class, or Mistral's own files (mistral_common's class), name another.
    """
    if not isinstance(as_dict(files.get("tokenizer_json")).get("vocab_size"), int) or files.get("remote_code"):
        return None
    choice = shaped(files.get("vocab_choice"), VocabChoice)
    if choice.get("kind") == "tekken" or ".model.v" in str(choice.get("file") or ""):
        return None
    return TOKENIZER_JSON_CLASS


def _added_tokens(tok_config: JSONObject, tok_json: TokenizerJsonSummary) -> tuple[dict[int, AddedToken], list[Conflict]]:
    """(id -> {content, special}, conflicts).

    tokenizer.json's added tokens first: a fast tokenizer takes its ids from there.
    added_tokens_decoder fills in (and is all a slow tokenizer has); an entry naming a
    token tokenizer.json already places at another id is a conflict, kept out.
    """
    out: dict[int, AddedToken] = {}
    for item in tok_json.get("added_tokens") or []:
        if isinstance(item, dict) and isinstance(item.get("id"), int) and isinstance(item.get("content"), str):
            out[item["id"]] = AddedToken(content=item["content"], special=bool(item.get("special")))
    placed = {token["content"]: token_id for token_id, token in out.items()}
    conflicts: list[Conflict] = []
    for key, entry in as_dict(tok_config.get("added_tokens_decoder")).items():
        token_id = _int(key)
        content = entry.get("content") if isinstance(entry, dict) else entry
        if token_id is None or not isinstance(content, str):
            continue
        elsewhere = placed.get(content)
        if (elsewhere is not None and elsewhere != token_id) or (token_id in out and out[token_id]["content"] != content):
            conflicts.append(Conflict(id=token_id, content=content, tokenizer_json_id=elsewhere))
            continue
        special = bool(entry.get("special")) if isinstance(entry, dict) else False
        out[token_id] = AddedToken(content=content, special=special)
    return out, sorted(conflicts, key=lambda c: c["id"])


def _vocab(
    files: TokenizerFilesFacts, tok_json: TokenizerJsonSummary, remote: RemoteCodeInfo, added: dict[int, AddedToken]
) -> VocabFacts:
    """vocab_size and len, with the numbers they come from (shown in the profile)."""
    max_added = max(added, default=None)
    tiktoken = _main_tiktoken(files.get("tiktoken"), files.get("vocab_choice"))
    reserved = _reserved(remote)
    out = VocabFacts(kind=None, vocab_file=None, base=None, reserved=reserved, reserved_start=None, placeholder=None,
                     max_added_id=max_added, vocab_size=None, len=None)
    # A tokenizer.json beside the ranks wins unless the tokenizer's own code reads the ranks:
    # transformers' fast class reads it first (tokenization_utils_tokenizers.py#L114, v5.24.0).
    json_wins = isinstance(tok_json.get("vocab_size"), int) and not remote
    distinct = tiktoken.get("distinct_tokens") if tiktoken is not None else None
    if tiktoken is not None and isinstance(distinct, int) and not json_wins:
        base = distinct
        out.update(VocabFacts(vocab_file=tiktoken.get("file"), base=base))
        if reserved:
            # tiktoken.Encoding: n_vocab = highest rank or special id, plus one; the class's
            # vocab (and so len()) covers every id below it.
            n_vocab = max(plausible_rank(tiktoken.get("max_rank")) or 0, base + reserved - 1) + 1
            placeholder = remote.get("placeholder")
            length = _len_with_added(n_vocab, added)
            out.update(VocabFacts(kind="tiktoken-class", reserved_start=base,
                       placeholder=placeholder if isinstance(placeholder, str) else KIMI_PLACEHOLDER,
                       vocab_size=n_vocab, len=length))
        else:
            # No class to say how many ids it reserves: transformers' own tiktoken conversion
            # fills base..max(added id) with <|reserved_token_{id}|>, vocab_size = base.
            top = max(base, max_added + 1) if max_added is not None else base
            out.update(VocabFacts(
                kind="tiktoken-conversion", vocab_size=base, len=top, reserved=top - base, reserved_start=base,
                placeholder=KIMI_PLACEHOLDER,
            ))
    elif isinstance(size := tok_json.get("vocab_size"), int):
        out.update(VocabFacts(kind="tokenizer.json", vocab_file="tokenizer.json", base=size, vocab_size=size,
                   len=_len_with_added(size, added)))
    return out


def _special_tokens(added: dict[int, AddedToken], names: dict[int, str], vocab: VocabFacts) -> list[Token]:
    specials = {i: t["content"] for i, t in added.items() if t["special"]}
    if vocab.get("kind") == "tiktoken-conversion":
        # transformers' conversion adds the placeholders as special tokens; Kimi's own
        # class keeps them inside tiktoken only (not in added_tokens_decoder).
        specials.update({i: name for i, name in names.items() if i not in added})
    return [Token(token=token, id=token_id) for token_id, token in sorted(specials.items())]


def _main_tiktoken(entries: object, chosen: object = None) -> TiktokenSummary | None:
    candidates = [shaped(e, TiktokenSummary) for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    choice = shaped(chosen, VocabChoice)
    for entry in candidates:  # the file the remote side chose, and said why
        if choice.get("kind") == "tiktoken" and entry.get("file") == choice.get("file"):
            return entry
    for entry in candidates:
        if entry.get("file") == "tiktoken.model":
            return entry
    return candidates[0] if candidates else None


def _reserved(remote: RemoteCodeInfo) -> int | None:
    count = _int(remote.get("num_reserved_special_tokens"))
    if count is None:
        return None
    return count + (_int(remote.get("reserved_extra")) or 0)


def _len_with_added(size: int, added: dict[int, AddedToken]) -> int:
    return size + sum(1 for token_id in added if token_id >= size)


def _id_to_token(added: dict[int, AddedToken], vocab: VocabFacts) -> dict[int, str]:
    names = {token_id: token["content"] for token_id, token in added.items()}
    start, count, placeholder = vocab.get("reserved_start"), vocab.get("reserved"), vocab.get("placeholder")
    if isinstance(start, int) and isinstance(count, int) and isinstance(placeholder, str):
        for token_id in range(start, start + count):
            names.setdefault(token_id, placeholder.replace("{id}", str(token_id)))
    return names


def _named_token(attr: str, tok_config: JSONObject, special_map: JSONObject) -> str | None:
    key = attr + "_token"
    value = tok_config.get(key)
    if "added_tokens_decoder" not in tok_config and special_map.get(key) is not None:
        value = special_map.get(key)  # legacy layout: special_tokens_map.json wins
    if isinstance(value, dict):  # a serialised AddedToken
        value = value.get("content")
    return value if isinstance(value, str) else None


def _resolve(token: str | None, lookup: dict[str, int]) -> Token | None:
    if token is None:
        return None
    token_id = lookup.get(token)
    return Token(token=token, id=token_id if isinstance(token_id, int) else None)


def _effective_template(entries: object) -> Template | None:
    """The template a plain apply_chat_template renders, by transformers' precedence."""
    listed = entries if isinstance(entries, list) else []
    templates = [e for e in listed if isinstance(e, dict) and isinstance(e.get("text"), str)]
    for prefix in TEMPLATE_ORDER:
        group = [e for e in templates if str(e.get("source", "")).startswith(prefix)]
        if prefix == "chat_template.jinja" and group:
            # The .jinja file and additional templates load together as one named set.
            group += [e for e in templates if str(e.get("source", "")).startswith(TEMPLATE_ORDER[1])]
        if group:
            chosen = next((e for e in group if e.get("name") == "default"), group[0])
            return Template(text=chosen["text"], sha256=chosen.get("sha256"), source=chosen.get("source"))
    return None


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None
