"""Fallback facts for the layouts transformers' files do not describe (pure, no I/O).

``introspect.analysis.tokenizer.tokenizer_fallback.facts_from_files`` covers tokenizer.json and tiktoken
with tokenizer_config.json; this module fills in what the raw files give for:

* sentencepiece (``tokenizer.model``, ``spiece.model``, ``*.model.v*``): vocab_size =
  len = the piece count (``SentencePieceProcessor.vocab_size()``); bos/eos/pad/unk by
  sentencepiece's rule (trainer spec pieces of CONTROL / UNKNOWN type); specials = the
  CONTROL and UNKNOWN pieces. With a tokenizer_config.json the named tokens come from it
  (resolved against the pieces) and len counts added tokens past the pieces, as for
  tokenizer.json. Class: ``SentencePieceTokenizer`` (mistral_common) for Mistral's
  ``tokenizer.model.v*``, else ``SentencePieceProcessor``.
* Mistral tekken (``tekken.json``): mistral_common's ``Tekkenizer``: vocab_size = len =
  default_vocab_size, specials = ids 0..num_special-1, bos/eos/pad/unk by name.
* tiktoken whose class lists its specials in code (Meta's Llama-3 ``Tokenizer``): the
  named list then the index placeholders fill ``base .. base + count - 1``; a dict
  literal gives explicit ids. vocab_size = len = base + the specials.
* class when tokenizer_config.json has none: the auto_map class, else the layout's.
"""

from __future__ import annotations

from introspect.analysis.tokenizer.shapes import FileFacts, NamedKey, Token, VocabFacts, shaped
from introspect.remote.contract import (
    RemoteCodeInfo,
    SentencepieceFile,
    TekkenSummary,
    TokenizerFilesFacts,
    TokenizerJsonSummary,
    VocabChoice,
    as_dict,
)

NAMED: tuple[NamedKey, ...] = ("bos", "eos", "pad", "unk")  # sentencepiece and tekken name no mask
LAYOUT_CLASS = {"tekken": "Tekkenizer", "sentencepiece": "SentencePieceProcessor", "tiktoken": "Encoding"}
MISTRAL_SP_CLASS = "SentencePieceTokenizer"


def refine(files: TokenizerFilesFacts, facts: FileFacts, added_ids: list[int]) -> None:
    """Fill ``facts`` (from facts_from_files) for the layouts above, in place.

    Raw facts from before these layouts were read (no ``vocab_choice``) are left as
    they were, so saved profiles rebuild unchanged.
    """
    choice = shaped(files.get("vocab_choice"), VocabChoice)
    if not choice:
        return
    facts["vocab"]["choice"] = choice
    tok_json = shaped(files.get("tokenizer_json"), TokenizerJsonSummary)
    kind = choice.get("kind")
    if facts.get("class") is None:
        facts["class"], facts["vocab"]["class_source"] = _class(files, choice)
    else:
        facts["vocab"]["class_source"] = "tokenizer_config.json"
    if isinstance(tok_json.get("vocab_size"), int):
        return  # tokenizer.json describes the vocabulary; it wins, as in transformers
    if kind == "tekken":
        _tekken(shaped(files.get("tekken"), TekkenSummary), facts)
    elif kind == "sentencepiece":
        entry = _entry(files.get("sentencepiece"), choice.get("file"))
        _sentencepiece(entry, files, facts, added_ids)
    elif kind == "tiktoken":
        _declared_specials(shaped(files.get("remote_code"), RemoteCodeInfo), facts)


def _class(files: TokenizerFilesFacts, choice: VocabChoice) -> tuple[str | None, str | None]:
    remote = shaped(files.get("remote_code"), RemoteCodeInfo)
    for side in ("slow", "fast"):
        ref = as_dict(remote.get(side))
        if isinstance(ref.get("class"), str) and ref.get("class"):
            return ref["class"], f"auto_map ({remote.get('auto_map_source')})"
    kind, file = choice.get("kind"), str(choice.get("file") or "")
    if kind == "sentencepiece" and ".model.v" in file:
        return MISTRAL_SP_CLASS, f"layout ({file})"
    if kind in LAYOUT_CLASS:
        return LAYOUT_CLASS[kind], f"layout ({file})"
    return None, None


def _token(value: object) -> Token | None:
    """A ``{"token", "id"}`` of the raw facts, or None."""
    pair = as_dict(value)
    return Token(token=pair.get("token"), id=pair.get("id")) if pair else None


def _tekken(tekken: TekkenSummary, facts: FileFacts) -> None:
    size = tekken.get("vocab_size")
    if not isinstance(size, int):
        return
    facts["vocab_size"] = facts["len"] = size
    facts["special_tokens"] = [Token(token=t.get("token"), id=t.get("id"))
                               for t in tekken.get("special_tokens") or [] if isinstance(t, dict)]
    for attr in NAMED:
        current = facts.get(attr)
        if current is None or current.get("id") is None:
            facts[attr] = _token(tekken.get(attr))
    facts["vocab"].update(VocabFacts(kind="tekken", vocab_file=tekken.get("file"), base=tekken.get("inner_vocab_size"),
                          vocab_size=size, len=size, reserved=tekken.get("default_num_special_tokens"),
                          reserved_start=0, version=tekken.get("version")))


def _sentencepiece(entry: SentencepieceFile, files: TokenizerFilesFacts, facts: FileFacts, added_ids: list[int]) -> None:
    pieces = entry.get("pieces")
    if not isinstance(pieces, int):
        return
    length = pieces + sum(1 for i in added_ids if i >= pieces)
    facts["vocab_size"], facts["len"] = pieces, length
    facts["vocab"].update(VocabFacts(kind="sentencepiece", vocab_file=entry.get("file"), base=pieces, vocab_size=pieces,
                          len=length, model_type=entry.get("model_type")))
    found = as_dict(entry.get("lookup"))
    config = as_dict(files.get("tokenizer_config"))
    for attr in NAMED:
        current = facts.get(attr)
        token = current.get("token") if isinstance(current, dict) else None
        if isinstance(current, dict) and isinstance(token, str) and current.get("id") is None \
                and isinstance(found.get(token), int):
            facts[attr] = Token(token=token, id=found[token])
        elif current is None and not config:
            facts[attr] = _token(entry.get(attr))
    if not config:
        facts["special_tokens"] = [Token(token=p.get("token"), id=p.get("id"))
                                   for p in entry.get("special_pieces") or []
                                   if isinstance(p, dict) and p.get("type") in ("control", "unknown")]
        # The remote reader ships at most MAX_LISTED_PIECES pieces; the type counts are of all of them.
        counts = as_dict(entry.get("types"))
        total = sum(n for kind, n in counts.items() if kind in ("control", "unknown") and isinstance(n, int))
        facts["special_tokens_total"] = max(total, len(facts["special_tokens"]))
        facts["special_tokens_truncated"] = facts["special_tokens_total"] > len(facts["special_tokens"])


def _declared_specials(remote: RemoteCodeInfo, facts: FileFacts) -> None:
    """Meta's layout: a named list, then index placeholders, after the base ranks (the class's
    source as the remote side scanned it: facts.static_specials)."""
    static = as_dict(remote.get("static"))
    vocab = facts["vocab"]
    base = vocab.get("base")
    named = static.get("named_specials")
    ids = as_dict(static.get("special_token_ids"))
    if not isinstance(base, int) or (not isinstance(named, list) and not ids):
        return
    reserved = as_dict(static.get("reserved"))
    table: dict[int, str] = {}
    if isinstance(named, list):
        count: int = reserved["count"] if isinstance(reserved.get("count"), int) else len(named)
        placeholder = as_dict(static.get("placeholder"))
        template, offset = placeholder.get("template"), placeholder.get("offset") or 0
        for index in range(count):
            if index < len(named):
                table[base + index] = named[index]
            elif isinstance(template, str) and placeholder.get("mode") == "index":
                table[base + index] = template.replace("{id}", str(offset + index - len(named)))
    for token, token_id in ids.items():
        if isinstance(token_id, int):
            table.setdefault(token_id, token)
    top = max(max(table) + 1, base) if table else base
    facts["vocab_size"] = facts["len"] = top
    facts["special_tokens"] = [Token(token=t, id=i) for i, t in sorted(table.items())]
    vocab.update(VocabFacts(kind="tiktoken-declared", vocab_size=top, len=top, reserved=len(table), reserved_start=base))
    by_token = {t: i for i, t in table.items()}
    named_ids = as_dict(static.get("named_ids"))
    for attr in NAMED:
        name = named_ids.get(attr)
        if name is not None and facts.get(attr) is None and name in by_token:
            facts[attr] = Token(token=name, id=by_token[name])


def _entry(entries: object, name: object) -> SentencepieceFile:
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("file") == name:
            return shaped(entry, SentencepieceFile)
    return SentencepieceFile()
