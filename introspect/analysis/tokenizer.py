"""The profile's ``tokenizer`` section: loaded facts, or the same facts from raw files.

Pure: raw facts in (``tokenizer_files`` from ``introspect.remote.tokenizer_files``,
``tokenizer_probe`` from ``introspect.remote.tokenizer_probe``), section and findings
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
"""

from __future__ import annotations

from typing import Any

from introspect.analysis import tokenizer_agreement, tokenizer_layouts
from introspect.analysis.findings import finding, pip_fix

NAMED = ("bos", "eos", "pad", "unk", "mask")
FACTS = ("class", "vocab_size", "len", *NAMED, "special_tokens", "chat_template")
KIMI_PLACEHOLDER = "<|reserved_token_{id}|>"
TEMPLATE_ORDER = ("chat_template.jinja", "additional_chat_templates/", "tokenizer_config.json", "chat_template.json")
MAX_LISTED = 5

# Where a nested multimodal config keeps its language model's vocab_size.
TEXT_CONFIG_KEYS = ("text_config", "llm_config", "language_config", "text_model")


def analyze_tokenizer(
    tokenizer_files: dict[str, Any],
    tokenizer_probe: dict[str, Any] | None,
    *,
    config: dict[str, Any] | None,
    target: dict[str, Any],
    remote_code_allowed: bool,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(tokenizer section, findings). Never raises on malformed raw facts."""
    files = tokenizer_files if isinstance(tokenizer_files, dict) else {}
    probe = tokenizer_probe if isinstance(tokenizer_probe, dict) else None
    from_files = facts_from_files(files)
    if probe is not None and probe.get("loaded"):
        section = _section_from_probe(probe, from_files)
        # HOOK(tokenizers): the file-derived facts ride along, for the same-story check and diff.
        section["from_files"] = tokenizer_agreement.file_facts(from_files)
    else:
        section = _section_from_files(from_files, probe)
    findings = _findings(section, probe, files, config, target, remote_code_allowed)
    if remote_code_allowed or not files.get("remote_code"):  # else transformers loaded another class
        findings += tokenizer_agreement.disagreements(section, section.get("from_files") or {})
    findings += tokenizer_agreement.native_load(probe, target)
    return section, findings


# ---------------------------------------------------------------- fallback: facts from files


def facts_from_files(files: dict[str, Any]) -> dict[str, Any]:
    """Every tokenizer fact the raw files give, as the tokenizer class would compute it."""
    tok_config = _dict(files.get("tokenizer_config"))
    tok_json = _dict(files.get("tokenizer_json"))
    remote = _dict(files.get("remote_code"))
    added, conflicts = _added_tokens(tok_config, tok_json)
    vocab = _vocab(files, tok_json, remote, added)
    names = _id_to_token(added, vocab)
    lookup = {token: token_id for token_id, token in names.items()}
    for token, token_id in _dict(tok_json.get("vocab_lookup")).items():
        lookup.setdefault(token, token_id)  # an added token wins over a plain vocab entry
    named = {attr: _resolve(_named_token(attr, tok_config, _dict(files.get("special_tokens_map"))), lookup) for attr in NAMED}
    facts = {
        "class": tok_config.get("tokenizer_class") if isinstance(tok_config.get("tokenizer_class"), str) else None,
        "vocab_size": vocab["vocab_size"],
        "len": vocab["len"],
        **named,
        "special_tokens": _special_tokens(added, names, vocab),
        "chat_template": _effective_template(files.get("chat_templates")),
        "vocab": dict(vocab, added_token_conflicts=conflicts),
        "added_tokens": len(added),
    }
    # HOOK(tokenizers): sentencepiece, tekken, code-declared specials, class from layout.
    tokenizer_layouts.refine(files, facts, sorted(added))
    return facts


def _added_tokens(
    tok_config: dict[str, Any], tok_json: dict[str, Any]
) -> tuple[dict[int, dict[str, Any]], list[dict[str, Any]]]:
    """(id -> {content, special}, conflicts).

    tokenizer.json's added tokens first: a fast tokenizer takes its ids from there.
    added_tokens_decoder fills in (and is all a slow tokenizer has); an entry naming a
    token tokenizer.json already places at another id is a conflict, kept out.
    """
    out: dict[int, dict[str, Any]] = {}
    for item in tok_json.get("added_tokens") or []:
        if isinstance(item, dict) and isinstance(item.get("id"), int) and isinstance(item.get("content"), str):
            out[item["id"]] = {"content": item["content"], "special": bool(item.get("special"))}
    placed = {token["content"]: token_id for token_id, token in out.items()}
    conflicts: list[dict[str, Any]] = []
    for key, entry in _dict(tok_config.get("added_tokens_decoder")).items():
        token_id = _int(key)
        content = entry.get("content") if isinstance(entry, dict) else entry
        if token_id is None or not isinstance(content, str):
            continue
        elsewhere = placed.get(content)
        if (elsewhere is not None and elsewhere != token_id) or (token_id in out and out[token_id]["content"] != content):
            conflicts.append({"id": token_id, "content": content, "tokenizer_json_id": elsewhere})
            continue
        special = bool(entry.get("special")) if isinstance(entry, dict) else False
        out[token_id] = {"content": content, "special": special}
    return out, sorted(conflicts, key=lambda c: c["id"])


def _vocab(
    files: dict[str, Any], tok_json: dict[str, Any], remote: dict[str, Any], added: dict[int, dict[str, Any]]
) -> dict[str, Any]:
    """vocab_size and len, with the numbers they come from (shown in the profile)."""
    max_added = max(added, default=None)
    tiktoken = _main_tiktoken(files.get("tiktoken"), files.get("vocab_choice"))
    reserved = _reserved(remote)
    out: dict[str, Any] = {
        "kind": None,  # tiktoken-class | tiktoken-conversion | tokenizer.json
        "vocab_file": None,
        "base": None,
        "reserved": reserved,
        "reserved_start": None,
        "placeholder": None,
        "max_added_id": max_added,
        "vocab_size": None,
        "len": None,
    }
    if tiktoken is not None and isinstance(tiktoken.get("distinct_tokens"), int):
        base = tiktoken["distinct_tokens"]
        out.update(vocab_file=tiktoken.get("file"), base=base)
        if reserved:
            # tiktoken.Encoding: n_vocab = highest rank or special id, plus one; the class's
            # vocab (and so len()) covers every id below it.
            n_vocab = max(_int(tiktoken.get("max_rank")) or 0, base + reserved - 1) + 1
            placeholder = remote.get("placeholder") if isinstance(remote.get("placeholder"), str) else KIMI_PLACEHOLDER
            length = _len_with_added(n_vocab, added)
            out.update(kind="tiktoken-class", reserved_start=base, placeholder=placeholder, vocab_size=n_vocab, len=length)
        else:
            # No class to say how many ids it reserves: transformers' own tiktoken conversion
            # fills base..max(added id) with <|reserved_token_{id}|>, vocab_size = base.
            top = max(base, max_added + 1) if max_added is not None else base
            out.update(
                kind="tiktoken-conversion", vocab_size=base, len=top, reserved=top - base, reserved_start=base,
                placeholder=KIMI_PLACEHOLDER,
            )
    elif isinstance(tok_json.get("vocab_size"), int):
        size = tok_json["vocab_size"]
        out.update(kind="tokenizer.json", vocab_file="tokenizer.json", base=size, vocab_size=size, len=_len_with_added(size, added))
    return out


def _special_tokens(added: dict[int, dict[str, Any]], names: dict[int, str], vocab: dict[str, Any]) -> list[dict[str, Any]]:
    specials = {i: t["content"] for i, t in added.items() if t["special"]}
    if vocab.get("kind") == "tiktoken-conversion":
        # transformers' conversion adds the placeholders as special tokens; Kimi's own
        # class keeps them inside tiktoken only (not in added_tokens_decoder).
        specials.update({i: name for i, name in names.items() if i not in added})
    return [{"token": token, "id": token_id} for token_id, token in sorted(specials.items())]


def _main_tiktoken(entries: Any, chosen: Any = None) -> dict[str, Any] | None:
    candidates = [e for e in entries or [] if isinstance(e, dict)]
    for entry in candidates:  # HOOK(tokenizers): the file the remote side chose, and said why
        if isinstance(chosen, dict) and chosen.get("kind") == "tiktoken" and entry.get("file") == chosen.get("file"):
            return entry
    for entry in candidates:
        if entry.get("file") == "tiktoken.model":
            return entry
    return candidates[0] if candidates else None


def _reserved(remote: dict[str, Any]) -> int | None:
    count = _int(remote.get("num_reserved_special_tokens"))
    if count is None:
        return None
    return count + (_int(remote.get("reserved_extra")) or 0)


def _len_with_added(size: int, added: dict[int, dict[str, Any]]) -> int:
    return size + sum(1 for token_id in added if token_id >= size)


def _id_to_token(added: dict[int, dict[str, Any]], vocab: dict[str, Any]) -> dict[int, str]:
    names = {token_id: token["content"] for token_id, token in added.items()}
    start, count, placeholder = vocab.get("reserved_start"), vocab.get("reserved"), vocab.get("placeholder")
    if isinstance(start, int) and isinstance(count, int) and isinstance(placeholder, str):
        for token_id in range(start, start + count):
            names.setdefault(token_id, placeholder.replace("{id}", str(token_id)))
    return names


def _named_token(attr: str, tok_config: dict[str, Any], special_map: dict[str, Any]) -> str | None:
    key = attr + "_token"
    value = tok_config.get(key)
    if "added_tokens_decoder" not in tok_config and special_map.get(key) is not None:
        value = special_map.get(key)  # legacy layout: special_tokens_map.json wins
    if isinstance(value, dict):  # a serialised AddedToken
        value = value.get("content")
    return value if isinstance(value, str) else None


def _resolve(token: str | None, lookup: dict[str, int]) -> dict[str, Any] | None:
    if token is None:
        return None
    token_id = lookup.get(token)
    return {"token": token, "id": token_id if isinstance(token_id, int) else None}


def _effective_template(entries: Any) -> dict[str, Any] | None:
    """The template a plain apply_chat_template renders, by transformers' precedence."""
    templates = [e for e in entries or [] if isinstance(e, dict) and isinstance(e.get("text"), str)]
    for prefix in TEMPLATE_ORDER:
        group = [e for e in templates if str(e.get("source", "")).startswith(prefix)]
        if prefix == "chat_template.jinja" and group:
            # The .jinja file and additional templates load together as one named set.
            group += [e for e in templates if str(e.get("source", "")).startswith(TEMPLATE_ORDER[1])]
        if group:
            chosen = next((e for e in group if e.get("name") == "default"), group[0])
            return {"text": chosen["text"], "sha256": chosen.get("sha256"), "source": chosen.get("source")}
    return None


# ---------------------------------------------------------------- sections


def _section_from_probe(probe: dict[str, Any], from_files: dict[str, Any]) -> dict[str, Any]:
    """Loaded: transformers' answers; a fact the probe failed to read comes from the files."""
    failed = {str(e.get("fact")) for e in probe.get("fact_errors") or [] if isinstance(e, dict)}
    source = probe.get("source")
    loaded_by: str = source if isinstance(source, str) else "transformers"
    values: dict[str, Any] = {}
    sources: dict[str, str | None] = {}
    for fact in FACTS:
        if fact in failed:
            values[fact] = from_files.get(fact)
            sources[fact] = "files" if values[fact] is not None else None
        else:
            values[fact] = _probe_fact(probe, fact)
            sources[fact] = loaded_by  # HOOK(tokenizers): the layout's library when not transformers
    sample = _dict(probe.get("sample"))
    return _section(
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


def _probe_fact(probe: dict[str, Any], fact: str) -> Any:
    value = probe.get(fact)
    if fact == "chat_template":
        template = _dict(value)
        if not isinstance(template.get("text"), str):
            return None
        return {"text": template["text"], "sha256": template.get("sha256"), "source": template.get("source")}
    if fact == "special_tokens":
        return [{"token": t.get("token"), "id": t.get("id")} for t in value or [] if isinstance(t, dict)]
    if fact in NAMED:
        return {"token": value.get("token"), "id": value.get("id")} if isinstance(value, dict) else None
    return value


def _section_from_files(from_files: dict[str, Any], probe: dict[str, Any] | None) -> dict[str, Any]:
    values = {fact: from_files.get(fact) for fact in FACTS}
    sources: dict[str, str | None] = {fact: ("files" if values[fact] is not None else None) for fact in FACTS}
    return _section(
        loaded=False,
        source="files",
        values=values,
        sources=sources,
        sample=None,
        sample_error=None,
        error=_error_summary(probe.get("error")) if probe else None,
        from_files=from_files,
        probe=probe,
    )


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
    check = _dict(probe.get("added_tokens_check")) if probe else {}
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
            "checked": check.get("checked"),
            "mismatches": check.get("mismatches"),
            "items": [i for i in check.get("items") or [] if isinstance(i, dict) and not i.get("ok")],
        }
        if check
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


# ---------------------------------------------------------------- findings


def _findings(
    section: dict[str, Any],
    probe: dict[str, Any] | None,
    files: dict[str, Any],
    config: dict[str, Any] | None,
    target: dict[str, Any],
    remote_code_allowed: bool,
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    remote = _dict(files.get("remote_code"))
    who = _tokenizer_label(section, remote)
    if not remote_code_allowed and remote:
        out.append(_remote_code_disabled(section, remote))
    error = section.get("error")
    if error:
        out += _load_failure(error, who, target, remote_code_allowed, section)
    sample_error = _dict(section.get("chat_template")).get("sample_error")
    if sample_error:
        out += _sample_failure(sample_error, who, target)
    out += _mismatch(section)
    out += _file_conflicts(section)
    out += _vocab_vs_embedding(section, config)
    return out


def _tokenizer_label(section: dict[str, Any], remote: dict[str, Any]) -> str:
    slow = _dict(remote.get("slow")) or _dict(remote.get("fast"))
    if slow.get("class") and slow.get("file"):
        return f"the tokenizer ({slow['class']} from {slow['file']})"
    cls = section.get("class") or section.get("declared_class")
    return f"the tokenizer ({cls})" if cls else "the tokenizer"


def _where(target: dict[str, Any]) -> str:
    return str(target.get("venv") or target.get("python") or "the target Python")


def _remote_code_disabled(section: dict[str, Any], remote: dict[str, Any]) -> dict[str, Any]:
    module = _dict(remote.get("slow")) or _dict(remote.get("fast"))
    code = f"{module.get('file')} (sha256 {module.get('sha256')})" if module.get("file") else "its tokenizer code"
    if section.get("loaded"):
        what = f"transformers loaded {section.get('class')} instead of the model's own class"
    else:
        what = "the tokenizer facts come from the raw files"
    return finding(
        "info",
        "remote-code-disabled",
        f"remote code is not allowed for this target; {what}",
        f"review {code}, then probe again without --no-remote-code",
    )


def _load_failure(
    error: dict[str, Any], who: str, target: dict[str, Any], allowed: bool, section: dict[str, Any]
) -> list[dict[str, Any]]:
    packages = [p for p in error.get("missing_packages") or [] if isinstance(p, str) and p]
    if packages:
        return [_missing_package(pkg, who, target) for pkg in packages]
    if error.get("cause") == "remote-code-refused" and not allowed:
        return []  # expected: the remote-code-disabled finding says it
    first_line = str(error.get("message") or "").strip().splitlines()[:1]
    message = f"{who} did not load: {error.get('type')}: {first_line[0] if first_line else ''}".rstrip(": ")
    if section.get("vocab_size") is not None:
        message += "; the facts shown come from the raw files"
    return [finding("error", "tokenizer-load-failed", message, _load_fix(error, target))]


def _missing_package(package: str, who: str, target: dict[str, Any]) -> dict[str, Any]:
    where = _where(target)
    if any(op in package for op in ("<", ">", "=")):
        need = f"{package}, and {where} has an older version or none"
    else:
        need = f"{package}, not installed in {where}"
    return finding("error", "missing-package", f"{who} needs {need}", pip_fix(target, package), package=package)


def _load_fix(error: dict[str, Any], target: dict[str, Any]) -> str | None:
    cause = error.get("cause")
    model = target.get("model_path") or "the model directory"
    if cause == "missing-files":
        return f"check that the tokenizer files in {model} are complete (tokenizer_config.json and the vocab file)"
    if cause == "incompatible-code":
        return "the model's tokenizer code does not match this transformers version: update the code files or pin transformers"
    if cause == "remote-code-refused":
        return "allow remote code for this target (it is needed to load this tokenizer)"
    return None


def _sample_failure(error: dict[str, Any], who: str, target: dict[str, Any]) -> list[dict[str, Any]]:
    packages = [p for p in error.get("missing_packages") or [] if isinstance(p, str) and p]
    if packages:
        return [_missing_package(pkg, "the chat template", target) for pkg in packages]
    return [
        finding(
            "warning",
            "chat-template-render-failed",
            f"the chat template of {who} did not render the sample conversation: {error.get('type')}: {error.get('message')}",
            None,
        )
    ]


def _mismatch(section: dict[str, Any]) -> list[dict[str, Any]]:
    check = _dict(section.get("added_tokens_check"))
    bad = [i for i in check.get("items") or [] if isinstance(i, dict)]
    if not bad:
        return []
    shown = "; ".join(
        f"id {i.get('id')} is {i.get('expected')!r} in the files, loaded: id->{i.get('id_to_token')!r}, "
        f"token->{i.get('token_to_id')!r}, decode->{i.get('decoded')!r}"
        for i in bad[:MAX_LISTED]
    )
    more = f" (and {len(bad) - MAX_LISTED} more)" if len(bad) > MAX_LISTED else ""
    return [
        finding(
            "error",
            "special-token-mismatch",
            f"the loaded tokenizer ({section.get('class')}) disagrees with added_tokens_decoder of "
            f"tokenizer_config.json on {len(bad)} of {check.get('checked')} ids: {shown}{more}",
            "do not use ids from this load: load the tokenizer with the model's own class (trust_remote_code) "
            "or a transformers version that does not convert it, or make tokenizer.json and "
            "tokenizer_config.json agree",
            ids=[i.get("id") for i in bad],
        )
    ]


def _file_conflicts(section: dict[str, Any]) -> list[dict[str, Any]]:
    conflicts = _dict(section.get("files")).get("added_token_conflicts") or []
    if not conflicts:
        return []
    shown = "; ".join(
        f"{c.get('content')!r} is id {c.get('id')} in tokenizer_config.json, {c.get('tokenizer_json_id')} in tokenizer.json"
        for c in conflicts[:MAX_LISTED]
    )
    more = f" (and {len(conflicts) - MAX_LISTED} more)" if len(conflicts) > MAX_LISTED else ""
    return [
        finding(
            "warning",
            "added-tokens-conflict",
            f"tokenizer.json and tokenizer_config.json place {len(conflicts)} added tokens at different ids: {shown}{more}",
            "regenerate both files from one tokenizer (save_pretrained) so their ids agree",
        )
    ]


def _vocab_vs_embedding(section: dict[str, Any], config: dict[str, Any] | None) -> list[dict[str, Any]]:
    rows, where = config_vocab_size(config)
    size = section.get("len") if isinstance(section.get("len"), int) else section.get("vocab_size")
    if rows is None or not isinstance(size, int) or size <= rows:
        return []
    return [
        finding(
            "error",
            "vocab-exceeds-embedding",
            f"the tokenizer has {size} tokens (source: {section['sources'].get('len') or section['sources'].get('vocab_size')}) "
            f"but the embedding has {rows} rows ({where}); ids {rows}..{size - 1} would index past it",
            "use the tokenizer that belongs to this checkpoint, or never emit ids at or above " + str(rows),
        )
    ]


def config_vocab_size(config: dict[str, Any] | None) -> tuple[int | None, str | None]:
    """The embedding's row count from config.json (a nested text config when wrapped)."""
    if not isinstance(config, dict):
        return None, None
    if isinstance(config.get("vocab_size"), int):
        return config["vocab_size"], "config.json vocab_size"
    for key in TEXT_CONFIG_KEYS:
        nested = config.get(key)
        if isinstance(nested, dict) and isinstance(nested.get("vocab_size"), int):
            return nested["vocab_size"], f"config.json {key}.vocab_size"
    return None, None


# ---------------------------------------------------------------- tiny helpers


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None
