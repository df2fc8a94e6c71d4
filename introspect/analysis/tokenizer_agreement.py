"""Does the files fallback tell the same story as the loaded tokenizer? (pure, no I/O)

Where transformers loaded the tokenizer, every fact the fallback computes from the raw
files is compared with the loaded value; each field that disagrees is one warning
naming the field, both values and the file the fallback read. A host that cannot load
the tokenizer gets the fallback's answers, so a disagreement here is a wrong answer
there. A fact the fallback cannot compute (null) is not a disagreement.

The class name is not compared: transformers loads other classes than the files
declare without any wrong id (``PreTrainedTokenizerFast`` loads as ``TokenizersBackend``
in transformers 5, ``LlamaTokenizer`` as ``LlamaTokenizerFast``); the section shows both
(``class`` and ``declared_class``).
"""

from __future__ import annotations

from typing import Any

from introspect.analysis.findings import Finding, make, pip_fix
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
        "chat_template_sha256": template.get("sha256"),
        "chat_template_source": template.get("source"),
        "vocab_file": as_dict(from_files.get("vocab")).get("vocab_file"),
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
    out += _specials(section.get("special_tokens"), files.get("special_tokens"), vocab_file)
    return out


def _specials(loaded: Any, fallback: Any, source: str) -> list[Finding]:
    a, b = _by_id(loaded), _by_id(fallback)
    # No specials at all on the loaded side is a probe that did not report them (an older
    # probe, a fact that raised), not a tokenizer without specials: nothing to compare.
    if not a or not b or a == b:
        return []
    differ = sorted(i for i in set(a) | set(b) if a.get(i) != b.get(i))
    shown = ", ".join(f"id {i}: {a.get(i)!r} vs {b.get(i)!r}" for i in differ[:MAX_SHOWN])
    more = f" (and {len(differ) - MAX_SHOWN} more)" if len(differ) > MAX_SHOWN else ""
    return [_finding("special_tokens", f"{len(a)} specials", f"{len(b)} specials", source,
                     detail=f"; {len(differ)} ids differ (loaded vs files): {shown}{more}")]


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
    """The probe loaded with the layout's own library because transformers could not."""
    if not isinstance(probe, dict) or not probe.get("loaded") or probe.get("source") in (None, "transformers"):
        return []
    error = as_dict(probe.get("transformers_error"))
    missing = [p for p in error.get("missing_packages") or [] if isinstance(p, str) and p]
    cause = f"{error.get('type')}: {str(error.get('message') or '').splitlines()[0] if error.get('message') else ''}"
    return [make(
        "warning",
        "tokenizer-loaded-without-transformers",
        f"transformers could not load the tokenizer ({cause.rstrip(': ')}); it was loaded with "
        f"{probe.get('source')} ({probe.get('class')}) instead",
        pip_fix(target, missing[0]) if missing else
        "serve it with a loader that reads this layout (vLLM: --tokenizer-mode mistral for Mistral files)",
    )]
