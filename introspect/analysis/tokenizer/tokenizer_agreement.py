"""Does the files fallback tell the same story as the loaded tokenizer? (pure, no I/O)

Where transformers loaded the tokenizer, every fact the fallback computes from the raw
files is compared with the loaded value; each field that disagrees is one warning
naming the field, both values and the file the fallback read. A host that cannot load
the tokenizer gets the fallback's answers, so a disagreement here is a wrong answer
there. A fact the fallback cannot compute (null) is not a disagreement; a fact the
loaded tokenizer has none of while the files name one is a conversion's loss
(:mod:`introspect.analysis.tokenizer.tokenizer_losses`). Where either special-token list was cut
(``special_tokens_truncated``), only the ids both lists cover are compared.

The class name is not compared: transformers loads other classes than the files
declare without any wrong id (``PreTrainedTokenizerFast`` loads as ``TokenizersBackend``
in transformers 5, ``LlamaTokenizer`` as ``LlamaTokenizerFast``); the section shows both
(``class`` and ``declared_class``).
"""

from __future__ import annotations

from typing import Any

from introspect.analysis.findings import Finding, make
from introspect.analysis.result import TargetSection
from introspect.analysis.tokenizer.autotokenizer_verdict import autotokenizer_error
from introspect.analysis.tokenizer.shapes import NAMED, FileFacts, Token
from introspect.analysis.tokenizer.tokenizer_autotokenizer import (
    autotokenizer_fix,
    error_summary,
    native_block,
)
from introspect.analysis.tokenizer.tokenizer_caps import special_totals
from introspect.analysis.tokenizer.tokenizer_losses import conversion_losses
from introspect.documents.base import TokenId
from introspect.documents.profile_tokenizer import FromFiles, Tokenizer
from introspect.remote.contract import TokenizerProbe

MAX_SHOWN = 5


def file_facts(from_files: FileFacts) -> FromFiles:
    """The file-derived facts kept in a loaded profile, for this check and for ``diff``."""
    template = from_files.get("chat_template")
    vocab = from_files.get("vocab") or {}
    specials = [_token_id(t) for t in from_files.get("special_tokens") or []]
    total, truncated = special_totals([t for t in specials if t is not None], from_files)
    return FromFiles(
        class_=from_files.get("class"),
        vocab_size=from_files.get("vocab_size"),
        len=from_files.get("len"),
        bos=_token_id(from_files.get("bos")), eos=_token_id(from_files.get("eos")),
        pad=_token_id(from_files.get("pad")), unk=_token_id(from_files.get("unk")),
        mask=_token_id(from_files.get("mask")),
        special_tokens=[t for t in specials if t is not None],
        special_tokens_total=total,
        special_tokens_truncated=truncated,
        chat_template_sha256=template["sha256"] if template else None,
        chat_template_source=template["source"] if template else None,
        vocab_file=vocab.get("vocab_file"),
        vocab_kind=vocab.get("kind"),
    )


def _token_id(token: Token | None) -> TokenId | None:
    return TokenId(token=token["token"], id=token["id"]) if token is not None else None


def disagreements(section: Tokenizer, files: FromFiles | None) -> list[Finding]:
    """Warnings for a loaded section whose values differ from the file-derived ones."""
    if not section.loaded or files is None:
        return []
    vocab_file = files.vocab_file or "the vocabulary file"
    named_file = "tokenizer_config.json" if files.vocab_file not in ("tekken.json",) else vocab_file
    out: list[Finding] = []
    checks: list[tuple[str, Any, Any, str]] = [
        ("vocab_size", section.vocab_size, files.vocab_size, vocab_file), ("len", section.len, files.len, vocab_file)]
    checks += [(attr, _id(getattr(section, attr)), _id(getattr(files, attr)), named_file) for attr in NAMED]
    checks.append(("chat_template.sha256", section.chat_template.sha256, files.chat_template_sha256,
                   files.chat_template_source or "the template file"))
    for fact, loaded, fallback, source in checks:
        if loaded is not None and fallback is not None and loaded != fallback:
            out.append(_finding(fact, loaded, fallback, source))
    out += _specials(section, files, vocab_file)
    out += conversion_losses(section, files)
    return out


def _specials(section: Tokenizer, files: FromFiles, source: str) -> list[Finding]:
    a, b = _by_id(section.special_tokens), _by_id(files.special_tokens)
    # None on one side: a loss (tokenizer_losses) or nothing to compare, never a disagreement.
    if not a or not b:
        return []
    # A cut list covers ids up to its last one: past that, a missing id is the cut, not a difference.
    cut = [max(ids) for ids, truncated in ((a, section.special_tokens_truncated), (b, files.special_tokens_truncated))
           if truncated is True]
    bound = min(cut) if cut else None
    if bound is not None:
        a = {i: t for i, t in a.items() if i <= bound}
        b = {i: t for i, t in b.items() if i <= bound}
    if a == b:
        return []
    differ = sorted(i for i in set(a) | set(b) if a.get(i) != b.get(i))
    shown = ", ".join(f"id {i}: {a.get(i)!r} vs {b.get(i)!r}" for i in differ[:MAX_SHOWN])
    more = f" (and {len(differ) - MAX_SHOWN} more)" if len(differ) > MAX_SHOWN else ""
    within = f" (ids up to {bound}: a list was cut there)" if bound is not None else ""
    counts = [section.special_tokens_total, files.special_tokens_total]
    return [_finding("special_tokens", f"{counts[0]} specials", f"{counts[1]} specials", source,
                     detail=f"; {len(differ)} ids differ{within} (loaded vs files): {shown}{more}")]


def _finding(fact: str, loaded: Any, fallback: Any, source: str, detail: str = "") -> Finding:
    return make(
        "warning",
        "tokenizer-fallback-disagrees",
        f"the files fallback disagrees with the loaded tokenizer on {fact}: loaded {loaded!r}, "
        f"files {fallback!r} (read from {source}){detail}",
        "a host that cannot load this tokenizer would report the files' value: make the files agree "
        "with the tokenizer class (or report the case to introspect)",
        field=fact,
    )


def _by_id(tokens: list[TokenId]) -> dict[int, str]:
    return {t.id: str(t.token) for t in tokens if isinstance(t.id, int)}


def _id(value: TokenId | None) -> int | None:
    return value.id if value is not None else None


def native_load(probe: TokenizerProbe | None, target: TargetSection) -> list[Finding]:
    """AutoTokenizer failed; the probe loaded the files with the layout's own library instead.

    An error: a pipeline calls AutoTokenizer, not that library, so the facts shown (which
    still flow from the native load) are not what the pipeline would get: it gets an exception.
    """
    native = native_block(probe)
    if native is None or not isinstance(probe, dict):
        return []
    error = autotokenizer_error(probe)
    first = str(error.get("message") or "").strip().splitlines()[:1]
    cause = f"{error.get('type')}: {first[0] if first else ''}".rstrip(": ")
    where = target.get("venv") or target.get("python") or "the target Python"
    return [make(
        "error",
        "tokenizer-loaded-without-transformers",
        f"AutoTokenizer cannot load the tokenizer in {where} ({cause}; {error.get('cause') or 'exception'}); "
        f"the facts shown were loaded with {native['loaded_by']} ({native['class']}) instead",
        autotokenizer_fix(error_summary(error), target, native),
    )]
