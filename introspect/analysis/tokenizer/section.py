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

from typing import Any

from introspect.analysis.findings import Finding
from introspect.analysis.tokenizer.added_tokens import judge_added_tokens
from introspect.analysis.tokenizer.tokenizer_agreement import disagreements, file_facts, native_load
from introspect.analysis.tokenizer.tokenizer_autotokenizer import (
    autotokenizer_block,
    autotokenizer_loaded,
    backing_files,
    native_block,
    stand_in_reason,
    unreported_failure,
)
from introspect.analysis.tokenizer.tokenizer_caps import cap_findings, with_totals
from introspect.analysis.tokenizer.tokenizer_fallback import NAMED, facts_from_files
from introspect.analysis.tokenizer.tokenizer_findings import (
    config_vocab_size,
    stand_in_finding,
    tokenizer_findings,
)
from introspect.remote.contract import as_dict

__all__ = ["analyze_tokenizer", "config_vocab_size", "facts_from_files", "tokenizer_section"]

FACTS = ("class", "vocab_size", "len", *NAMED, "special_tokens", "chat_template")


def analyze_tokenizer(
    tokenizer_files: dict[str, Any],
    tokenizer_probe: dict[str, Any] | None,
    *,
    config: dict[str, Any] | None,
    target: dict[str, Any],
    remote_code_allowed: bool,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(tokenizer section, findings in JSON form). Never raises on malformed raw facts."""
    section, findings = tokenizer_section(tokenizer_files, tokenizer_probe, config=config, target=target,
                                          remote_code_allowed=remote_code_allowed)
    return section, [f.to_json() for f in findings]


def tokenizer_section(
    tokenizer_files: Any,
    tokenizer_probe: Any,
    *,
    config: dict[str, Any] | None,
    target: dict[str, Any],
    remote_code_allowed: bool,
    model_files: Any = None,
) -> tuple[dict[str, Any], list[Finding]]:
    """(tokenizer section, typed findings). Never raises on malformed raw facts.

    ``model_files``: the raw ``files`` facts (their listing tells whether a tokenizer file exists)."""
    files = as_dict(tokenizer_files)
    probe = tokenizer_probe if isinstance(tokenizer_probe, dict) else None
    from_files = facts_from_files(files)
    stand_in = (stand_in_reason(probe, config_vocab=config_vocab_size(config)[0],
                                backing=backing_files(model_files)) if autotokenizer_loaded(probe) else None)
    if probe is not None and probe.get("loaded") and stand_in is None:
        section = _section_from_probe(probe, from_files)
        # The file-derived facts ride along, for the same-story check and for diff.
        section["from_files"] = file_facts(from_files)
    else:  # a stand-in's facts are the defaults of its class: none of them is taken
        section = _section_from_files(from_files, probe, stand_in=stand_in is not None)
    section = with_totals(section, probe, from_files)  # every capped list: <key>_total, <key>_truncated
    # What a pipeline's AutoTokenizer call does in that venv comes first, then the native load if any.
    block = autotokenizer_block(probe, target, remote_code_allowed, stand_in)
    section = {"autotokenizer": block, "native": native_block(probe), **section}
    findings = tokenizer_findings(section, files, config, target, remote_code_allowed) + cap_findings(section, target)
    findings += stand_in_finding(block, probe, target)
    if remote_code_allowed or not files.get("remote_code"):  # else transformers loaded another class
        findings += disagreements(section, as_dict(section.get("from_files")))
    findings += native_load(probe, target)
    findings += unreported_failure(block, probe, str(target.get("venv") or target.get("python") or "the target Python"))
    return section, findings


def _section_from_probe(probe: dict[str, Any], from_files: dict[str, Any]) -> dict[str, Any]:
    """Loaded: transformers' (or the layout library's) answers; a fact the probe failed to read,
    or one the layout's library has no notion of (a tiktoken Encoding's bos), comes from the files."""
    failed = {str(e.get("fact")) for e in probe.get("fact_errors") or [] if isinstance(e, dict)}
    failed.update(as_dict(native_block(probe)).get("unknown") or [])
    source = probe.get("source")
    loaded_by = source if isinstance(source, str) else "transformers"  # else the layout's own library
    values: dict[str, Any] = {}
    sources: dict[str, str | None] = {}
    for fact in FACTS:
        if fact in failed:
            values[fact] = from_files.get(fact)
            sources[fact] = "files" if values[fact] is not None else None
        else:
            values[fact] = _probe_fact(probe, fact)
            sources[fact] = loaded_by
    sample = as_dict(probe.get("sample"))
    section = _section(
        loaded=True,
        source=loaded_by,
        values=values,
        sources=sources,
        sample=sample.get("text") if isinstance(sample.get("text"), str) else None,
        sample_error=_error_summary(sample.get("error")),
        error=None,
        from_files=from_files,
        probe=probe,
    )
    # Texts the host cut (a huge template, a sample that rendered megabytes): their true size.
    template = as_dict(probe.get("chat_template"))
    for key, block in (("text", template), ("sample", sample)):
        if block.get("truncated") is True and isinstance(section["chat_template"], dict):
            section["chat_template"][f"{key}_size"] = block.get("size")
            section["chat_template"][f"{key}_truncated"] = True
    return section


def _probe_fact(probe: dict[str, Any], fact: str) -> Any:
    value = probe.get(fact)
    if fact == "chat_template":
        template = as_dict(value)
        if not isinstance(template.get("text"), str):
            return None
        return {"text": template["text"], "sha256": template.get("sha256"), "source": template.get("source")}
    if fact == "special_tokens":
        return [{"token": t.get("token"), "id": t.get("id")} for t in value or [] if isinstance(t, dict)]
    if fact in NAMED:
        return {"token": value.get("token"), "id": value.get("id")} if isinstance(value, dict) else None
    return value


def _section_from_files(from_files: dict[str, Any], probe: dict[str, Any] | None,
                        stand_in: bool = False) -> dict[str, Any]:
    values = {fact: from_files.get(fact) for fact in FACTS}
    sources: dict[str, str | None] = {fact: ("files" if values[fact] is not None else None) for fact in FACTS}
    section = _section(
        loaded=False,
        source="files",
        values=values,
        sources=sources,
        sample=None,
        sample_error=None,
        error=_error_summary(probe.get("error")) if probe else None,
        # A stand-in's added-token check compares the files with the stand-in: no verdict on the tokenizer.
        from_files=from_files,
        probe=None if stand_in else probe,
    )
    if stand_in and probe is not None:  # the load happened: its versions and time still stand
        section["transformers_version"] = probe.get("transformers_version")
        section["load_seconds"] = probe.get("load_seconds")
    return section


def _section(
    *,
    loaded: bool,
    source: str,
    values: dict[str, Any],
    sources: dict[str, str | None],
    sample: str | None,
    sample_error: dict[str, Any] | None,
    error: dict[str, Any] | None,
    from_files: dict[str, Any],
    probe: dict[str, Any] | None,
) -> dict[str, Any]:
    template = values.get("chat_template")
    template = template if isinstance(template, dict) else {}
    verdict = judge_added_tokens(probe.get("added_tokens_check")) if probe else None
    return {
        "loaded": loaded,
        "source": source,
        "class": values.get("class"),
        "declared_class": from_files.get("class"),
        "vocab_size": values.get("vocab_size"),
        "len": values.get("len"),
        **{attr: values.get(attr) for attr in NAMED},
        "special_tokens": values.get("special_tokens") or [],
        "chat_template": {
            "present": bool(template),
            "source": template.get("source"),
            "sha256": template.get("sha256"),
            "text": template.get("text"),
            "sample": sample,
            "sample_error": sample_error,
        },
        "error": error,
        "sources": sources,
        "files": from_files.get("vocab"),
        "added_tokens_check": {
            "checked": verdict.checked,
            "mismatches": verdict.mismatches,
            "items": verdict.disagree,
        }
        if verdict is not None
        else None,
        "transformers_version": probe.get("transformers_version") if probe else None,
        "load_seconds": probe.get("load_seconds") if probe else None,
    }


def _error_summary(error: Any) -> dict[str, Any] | None:
    if not isinstance(error, dict):
        return None
    return {
        "type": error.get("type"),
        "message": error.get("message"),
        "missing_packages": list(error.get("missing_packages") or []),
        "cause": error.get("cause"),
    }
