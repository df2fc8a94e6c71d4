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
from introspect.analysis.list_caps import list_totals
from introspect.analysis.tokenizer.tokenizer_autotokenizer import (
    autotokenizer_error,
    autotokenizer_fix,
    native_block,
)
from introspect.analysis.tokenizer.tokenizer_losses import conversion_losses
from introspect.remote.contract import as_dict

NAMED = ("bos", "eos", "pad", "unk", "mask")
MAX_SHOWN = 5


def file_facts(from_files: dict[str, Any]) -> dict[str, Any]:
    """The file-derived facts kept in a loaded profile, for this check and for ``diff``."""
    template = as_dict(from_files.get("chat_template"))
    return {
        "class": from_files.get("class"),
        "vocab_size": from_files.get("vocab_size"),
        "len": from_files.get("len"),
        **{attr: from_files.get(attr) for attr in NAMED},
        "special_tokens": list(from_files.get("special_tokens") or []),
        **list_totals(from_files, "special_tokens"),
        "chat_template_sha256": template.get("sha256"),
        "chat_template_source": template.get("source"),
        "vocab_file": as_dict(from_files.get("vocab")).get("vocab_file"),
        "vocab_kind": as_dict(from_files.get("vocab")).get("kind"),
    }


def disagreements(section: dict[str, Any], files: dict[str, Any]) -> list[Finding]:
    """Warnings for a loaded section whose values differ from the file-derived ones."""
    if not section.get("loaded"):
        return []
    vocab_file = files.get("vocab_file") or "the vocabulary file"
    named_file = "tokenizer_config.json" if files.get("vocab_file") not in ("tekken.json",) else vocab_file
    out: list[Finding] = []
    checks = [(key, section.get(key), files.get(key), vocab_file) for key in ("vocab_size", "len")]
    checks += [(attr, _id(section.get(attr)), _id(files.get(attr)), named_file) for attr in NAMED]
    template = as_dict(section.get("chat_template"))
    checks.append(("chat_template.sha256", template.get("sha256"), files.get("chat_template_sha256"),
                   files.get("chat_template_source") or "the template file"))
    for field, loaded, fallback, source in checks:
        if loaded is not None and fallback is not None and loaded != fallback:
            out.append(_finding(field, loaded, fallback, source))
    out += _specials(section, files, vocab_file)
    out += conversion_losses(section, files)
    return out


def _specials(section: dict[str, Any], files: dict[str, Any], source: str) -> list[Finding]:
    a, b = _by_id(section.get("special_tokens")), _by_id(files.get("special_tokens"))
    # None on one side: a loss (tokenizer_losses) or nothing to compare, never a disagreement.
    if not a or not b:
        return []
    # A cut list covers ids up to its last one: past that, a missing id is the cut, not a difference.
    cut = [max(ids) for ids, facts in ((a, section), (b, files)) if facts.get("special_tokens_truncated") is True]
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
    counts = [list_totals(facts, "special_tokens")["special_tokens_total"] for facts in (section, files)]
    return [_finding("special_tokens", f"{counts[0]} specials", f"{counts[1]} specials", source,
                     detail=f"; {len(differ)} ids differ{within} (loaded vs files): {shown}{more}")]


def _finding(field: str, loaded: Any, fallback: Any, source: str, detail: str = "") -> Finding:
    return make(
        "warning",
        "tokenizer-fallback-disagrees",
        f"the files fallback disagrees with the loaded tokenizer on {field}: loaded {loaded!r}, "
        f"files {fallback!r} (read from {source}){detail}",
        "a host that cannot load this tokenizer would report the files' value: make the files agree "
        "with the tokenizer class (or report the case to introspect)",
        field=field,
    )


def _by_id(value: Any) -> dict[int, str]:
    out: dict[int, str] = {}
    for item in value or []:
        if isinstance(item, dict) and isinstance(item.get("id"), int):
            out[item["id"]] = str(item.get("token"))
    return out


def _id(value: Any) -> Any:
    return value.get("id") if isinstance(value, dict) else None


def native_load(probe: dict[str, Any] | None, target: dict[str, Any]) -> list[Finding]:
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
        autotokenizer_fix(error, target, native),
    )]
