"""The profile's ``tokenizer`` section: loaded facts, or the same facts from raw files.

Pure: raw facts in (``tokenizer_files`` from ``introspect.remote.facts.tokenizer.tokenizer_files``,
``tokenizer_probe`` from ``introspect.remote.tasks.tokenizer``), section and findings
out. When transformers loaded the tokenizer its answers are used; when it did not
(a missing package, remote code not allowed, a crash) the fallback recomputes the
same facts from the files the way the tokenizer class would, and ``sources`` says
which source each fact came from.

Fallback rules, mirroring the classes that read these files:

* tiktoken + remote code that reserves N special ids (Kimi's ``TikTokenTokenizer``):
  base = distinct tokens of the tiktoken file (tiktoken's loader keys by token), ids
  base .. base+N-1 are specials, named by ``added_tokens_decoder`` or else the code's
  placeholder (``<|reserved_token_{id}|>``); vocab_size = len = tiktoken's n_vocab.
  The model's own class decides these numbers, so they are computed this way even when
  remote code is not allowed (transformers' conversion would report vocab_size = base).
* tiktoken without such code: transformers' own conversion: vocab_size = base, ids
  base .. highest added id filled with the same placeholder, len = that top + 1.
* tokenizer.json: vocab_size = the model's vocab, len = vocab plus the added tokens
  whose ids lie past it (what ``len()`` of a fast tokenizer counts).
* Named tokens (bos/eos/pad/unk/mask): tokenizer_config.json; special_tokens_map.json
  only when tokenizer_config has no ``added_tokens_decoder`` (transformers' rule).
* Chat template: chat_template.jinja / additional_chat_templates over the inline
  template of tokenizer_config.json; chat_template.json (processors) last.
* sentencepiece, tekken, tiktoken with specials declared in code, and the class when
  tokenizer_config.json names none: :mod:`introspect.analysis.tokenizer.tokenizer_layouts`.

Where the tokenizer loaded, the file-derived facts ride along (``from_files``) and
each is compared with the loaded value (:mod:`introspect.analysis.tokenizer.tokenizer_agreement`).

The section opens with ``autotokenizer`` (did ``AutoTokenizer.from_pretrained`` load in that
venv, and if not: why and the fix) and ``native`` (what the layout's own library loaded
instead, read and could not know): :mod:`introspect.analysis.tokenizer.tokenizer_autotokenizer`.

A stand-in (AutoTokenizer built a tokenizer from ``model_type`` alone, in a directory without
tokenizer files: ``tokenizer_autotokenizer.stand_in_reason``) is not loaded: the section's facts
come from the files, ``loaded`` is false, and the ``tokenizer-stand-in`` warning says why.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, TypeVar

from introspect.analysis.findings import Finding
from introspect.analysis.list_caps import count
from introspect.analysis.result import TargetSection
from introspect.analysis.tokenizer.added_tokens import judge_added_tokens
from introspect.analysis.tokenizer.autotokenizer_verdict import (
    autotokenizer_loaded,
    backing_files,
    stand_in_reason,
)
from introspect.analysis.tokenizer.shapes import NAMED, FileFacts, NamedKey, Template, Token, shaped
from introspect.analysis.tokenizer.tokenizer_agreement import disagreements, file_facts, native_load
from introspect.analysis.tokenizer.tokenizer_autotokenizer import (
    autotokenizer_block,
    error_summary,
    native_block,
    unreported_failure,
)
from introspect.analysis.tokenizer.tokenizer_caps import (
    cap_findings,
    check_totals,
    damaged_check,
    special_totals,
)
from introspect.analysis.tokenizer.tokenizer_fallback import facts_from_files
from introspect.analysis.tokenizer.tokenizer_findings import (
    config_vocab_size,
    stand_in_finding,
    tokenizer_findings,
)
from introspect.documents.base import TokenId
from introspect.documents.profile_tokenizer import (
    AutoTokenizer,
    ChatTemplate,
    FromFiles,
    Sources,
    Tokenizer,
    TokenizerError,
    TokenizerFiles,
)
from introspect.remote.contract import (
    FilesFacts,
    JSONObject,
    LoadedChatTemplate,
    TokenizerFilesFacts,
    TokenizerProbe,
    as_dict,
)

__all__ = ["analyze_tokenizer", "config_vocab_size", "facts_from_files", "load_seconds", "tokenizer_section"]

FACTS = ("class", "vocab_size", "len", *NAMED, "special_tokens", "chat_template")
T = TypeVar("T")


def analyze_tokenizer(
    tokenizer_files: TokenizerFilesFacts | None,
    tokenizer_probe: TokenizerProbe | None,
    *,
    config: JSONObject | None,
    target: TargetSection,
    remote_code_allowed: bool,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(tokenizer section, findings) in the profile's JSON form (see :func:`tokenizer_section`)."""
    section, findings = tokenizer_section(tokenizer_files, tokenizer_probe, config=config, target=target,
                                          remote_code_allowed=remote_code_allowed)
    return section.to_dict(), [f.to_json() for f in findings]


def load_seconds(tokenizer_probe: object) -> int | float | None:
    """How long the load took: a timing of the profile, kept out of the section so that profiles diff cleanly."""
    seconds = as_dict(tokenizer_probe).get("load_seconds")
    return seconds if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) else None


def tokenizer_section(
    tokenizer_files: TokenizerFilesFacts | None,
    tokenizer_probe: TokenizerProbe | None,
    *,
    config: JSONObject | None,
    target: TargetSection,
    remote_code_allowed: bool,
    model_files: FilesFacts | None = None,
) -> tuple[Tokenizer, list[Finding]]:
    """(tokenizer section, typed findings). Missing or misshapen raw facts are read as absent; a value
    of a type the section's model cannot hold (a class name that is a number) raises pydantic's
    ``ValidationError``, which ``raw_guard.guarded`` turns into a ``raw-damaged`` finding.

    ``model_files``: the raw ``files`` facts (their listing tells whether a tokenizer file exists)."""
    files = shaped(tokenizer_files, TokenizerFilesFacts)
    probe = tokenizer_probe if isinstance(tokenizer_probe, dict) else None
    from_files = facts_from_files(files)
    stand_in = (stand_in_reason(probe, config_vocab=config_vocab_size(config)[0],
                                backing=backing_files(model_files)) if autotokenizer_loaded(probe) else None)
    # What a pipeline's AutoTokenizer call does in that venv comes first, then the native load if any.
    block = autotokenizer_block(probe, target, remote_code_allowed, stand_in)
    if probe is not None and probe.get("loaded") and stand_in is None:
        section = _section_from_probe(block, probe, from_files)
    else:  # a stand-in's facts are the defaults of its class: none of them is taken
        section = _section_from_files(block, from_files, probe, stand_in=stand_in is not None)
    findings = tokenizer_findings(section, files, config, target, remote_code_allowed) + cap_findings(section, target)
    findings += stand_in_finding(block, probe, target) + damaged_check(probe if stand_in is None else None)
    if remote_code_allowed or not files.get("remote_code"):  # else transformers loaded another class
        findings += disagreements(section, section.from_files)
    findings += native_load(probe, target)
    findings += unreported_failure(block, probe, str(target.get("venv") or target.get("python") or "the target Python"))
    return section, findings


@dataclass
class _Facts:
    """The section's facts, each from the load or (where the load did not give it) from the files,
    and the witness each came from (``sources``)."""

    class_: str | None
    vocab_size: int | None
    len: int | None
    named: dict[NamedKey, TokenId | None]
    special_tokens: list[TokenId]
    template: Template | None
    sources: dict[str, str | None] = field(default_factory=dict)


def _facts(probe: TokenizerProbe, from_files: FileFacts, from_files_only: Collection[str], loaded_by: str) -> _Facts:
    """Each fact of FACTS from the load, except those in ``from_files_only``."""
    sources: dict[str, str | None] = {}

    def pick(fact: str, loaded: T, files: T) -> T:
        if fact in from_files_only:
            sources[fact] = "files" if files is not None else None
            return files
        sources[fact] = loaded_by
        return loaded

    class_ = pick("class", probe.get("class"), from_files.get("class"))
    vocab_size = pick("vocab_size", probe.get("vocab_size"), from_files.get("vocab_size"))
    length = pick("len", probe.get("len"), from_files.get("len"))
    named = {attr: _token_id(pick(attr, _probe_token(probe.get(attr)), from_files.get(attr))) for attr in NAMED}
    specials = pick("special_tokens", [_probe_token(t) for t in probe.get("special_tokens") or [] if isinstance(t, dict)],
                    from_files.get("special_tokens"))
    template = pick("chat_template", _probe_template(probe.get("chat_template")), from_files.get("chat_template"))
    return _Facts(class_, vocab_size, length, named, [TokenId(token=t["token"], id=t["id"]) for t in specials or []
                                                      if t is not None], template, sources)


def _probe_token(value: object) -> Token | None:
    pair = value if isinstance(value, dict) else None
    return Token(token=pair.get("token"), id=pair.get("id")) if pair is not None else None


def _token_id(token: Token | None) -> TokenId | None:
    return TokenId(token=token["token"], id=token["id"]) if token is not None else None


def _probe_template(value: object) -> Template | None:
    template = shaped(value, LoadedChatTemplate)
    text = template.get("text")
    if not isinstance(text, str):
        return None
    return Template(text=text, sha256=template.get("sha256"), source=template.get("source"))


def _section_from_probe(block: AutoTokenizer, probe: TokenizerProbe, from_files: FileFacts) -> Tokenizer:
    """Loaded: transformers' (or the layout library's) answers; a fact the probe failed to read,
    or one the layout's library has no notion of (a tiktoken Encoding's bos), comes from the files."""
    failed = {str(e.get("fact")) for e in probe.get("fact_errors") or [] if isinstance(e, dict)}
    native = native_block(probe)
    failed.update(native["unknown"] if native is not None else [])
    source = probe.get("source")
    loaded_by = source if isinstance(source, str) else "transformers"  # else the layout's own library
    facts = _facts(probe, from_files, failed, loaded_by)
    template = _chat_template(facts.template, probe)
    # The file-derived facts ride along, for the same-story check and for diff.
    return _section(block, probe, facts, from_files, loaded=True, source=loaded_by, template=template, error=None,
                    check_probe=probe, from_files_block=file_facts(from_files))


def _section_from_files(block: AutoTokenizer, from_files: FileFacts, probe: TokenizerProbe | None,
                        stand_in: bool = False) -> Tokenizer:
    facts = _facts(shaped(None, TokenizerProbe), from_files, FACTS, "files")
    # A stand-in's added-token check compares the files with the stand-in: no verdict on the tokenizer.
    # Its load happened all the same: its transformers version stands.
    return _section(block, probe, facts, from_files, loaded=False, source="files",
                    template=_chat_template(facts.template, None),
                    error=error_summary(probe.get("error")) if probe else None,
                    check_probe=None if stand_in else probe, from_files_block=None)


def _section(block: AutoTokenizer, probe: TokenizerProbe | None, facts: _Facts, from_files: FileFacts, *,
             loaded: bool, source: str, template: ChatTemplate, error: TokenizerError | None,
             check_probe: TokenizerProbe | None, from_files_block: FromFiles | None) -> Tokenizer:
    """The section; ``check_probe``: the load whose added-tokens check is judged (none for a stand-in)."""
    sources = facts.sources
    # Every capped list: <key>_total, <key>_truncated, from the side the list came from.
    origin: TokenizerProbe | FileFacts = (probe if probe is not None and sources.get("special_tokens")
                                          not in ("files", None) else from_files)
    total, truncated = special_totals(facts.special_tokens, origin)
    if probe is not None and loaded:
        # A fact the probe did not report at all (a raw file of an older probe) gets no source:
        # the loss check (tokenizer_agreement) then reads no "none" into it.
        for fact in (*NAMED, "special_tokens"):
            if fact not in probe and sources.get(fact) not in ("files", None):
                sources[fact] = None
    verdict = judge_added_tokens(check_probe.get("added_tokens_check")) if check_probe else None
    native = native_block(probe)
    section = Tokenizer(
        autotokenizer=block,
        native=dict(native) if native is not None else None,
        loaded=loaded,
        source=source,
        class_=facts.class_,
        declared_class=from_files.get("class"),
        vocab_size=facts.vocab_size,
        len=facts.len,
        bos=facts.named["bos"], eos=facts.named["eos"], pad=facts.named["pad"], unk=facts.named["unk"],
        mask=facts.named["mask"],
        special_tokens=facts.special_tokens,
        special_tokens_total=total,
        special_tokens_truncated=truncated,
        chat_template=template,
        error=error,
        sources=Sources(class_=sources.get("class"), vocab_size=sources.get("vocab_size"), len=sources.get("len"),
                        bos=sources.get("bos"), eos=sources.get("eos"), pad=sources.get("pad"),
                        unk=sources.get("unk"), mask=sources.get("mask"),
                        special_tokens=sources.get("special_tokens"), chat_template=sources.get("chat_template")),
        # Validated from the TypedDict: its optional keys (choice, class_source, ...) stay unset when absent.
        files=TokenizerFiles.model_validate(from_files.get("vocab")),
        added_tokens_check=check_totals(verdict, probe) if verdict is not None and probe is not None else None,
        transformers_version=probe.get("transformers_version") if probe else None,
    )
    if from_files_block is not None:  # a loaded section only
        section.from_files = from_files_block
    return section


def _chat_template(template: Template | None, probe: TokenizerProbe | None) -> ChatTemplate:
    """The section's template; a loaded tokenizer's (``probe``) with its rendered sample."""
    sample = as_dict(probe.get("sample")) if probe is not None else {}
    text = sample.get("text")
    sample_error = error_summary(sample.get("error"))
    chat = ChatTemplate(
        present=template is not None,
        source=template["source"] if template else None,
        sha256=template["sha256"] if template else None,
        text=template["text"] if template else None,
        sample=text if isinstance(text, str) else None,
        sample_error=sample_error.to_dict() if sample_error is not None else None,
    )
    # Texts the host cut (a huge template, a sample that rendered megabytes): their true size.
    cut = shaped(probe.get("chat_template") if probe is not None else None, LoadedChatTemplate)
    if cut.get("truncated") is True:
        chat.text_size, chat.text_truncated = count(cut.get("size")), True
    if sample.get("truncated") is True:
        chat.sample_size, chat.sample_truncated = count(sample.get("size")), True
    return chat
