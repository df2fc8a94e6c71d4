"""The tokenizer section's findings: load failures, missing packages, id disagreements, vocab vs embedding,
a stand-in tokenizer."""

from __future__ import annotations

from typing import Any

from introspect.analysis.findings import Finding, Severity, pip_fix
from introspect.analysis.tokenizer.added_tokens import judge_added_tokens
from introspect.analysis.tokenizer.tokenizer_autotokenizer import autotokenizer_fix, stand_in_fix
from introspect.analysis.tokenizer.tokenizer_limits import (
    LIMIT_CAUSES,
    load_limit_finding,
    sample_limit_finding,
    tiktoken_findings,
)
from introspect.remote.contract import WRAPPER_TEXT_CONFIG_KEYS, as_dict

MAX_LISTED = 5


def _listed(items: list[str]) -> str:
    """The first MAX_LISTED items joined, and how many more there are."""
    more = f" (and {len(items) - MAX_LISTED} more)" if len(items) > MAX_LISTED else ""
    return "; ".join(items[:MAX_LISTED]) + more


def tokenizer_findings(
    section: dict[str, Any],
    files: dict[str, Any],
    config: dict[str, Any] | None,
    target: dict[str, Any],
    remote_code_allowed: bool,
) -> list[Finding]:
    out: list[Finding] = []
    remote = as_dict(files.get("remote_code"))
    who = _tokenizer_label(section, remote)
    if not remote_code_allowed and remote:
        out.append(_remote_code_disabled(section, remote))
    error = section.get("error")
    if error:
        out += _load_failure(error, who, target, remote_code_allowed, section)
    sample_error = as_dict(section.get("chat_template")).get("sample_error")
    if sample_error:
        out += _sample_failure(sample_error, who, target)
    out += _mismatch(section)
    out += _file_conflicts(section)
    out += _vocab_vs_embedding(section, config)
    out += tiktoken_findings(files)
    return out


def _tokenizer_label(section: dict[str, Any], remote: dict[str, Any]) -> str:
    slow = as_dict(remote.get("slow")) or as_dict(remote.get("fast"))
    if slow.get("class") and slow.get("file"):
        return f"the tokenizer ({slow['class']} from {slow['file']})"
    cls = section.get("class") or section.get("declared_class")
    return f"the tokenizer ({cls})" if cls else "the tokenizer"


def _where(target: dict[str, Any]) -> str:
    return str(target.get("venv") or target.get("python") or "the target Python")


def _remote_code_disabled(section: dict[str, Any], remote: dict[str, Any]) -> Finding:
    module = as_dict(remote.get("slow")) or as_dict(remote.get("fast"))
    code = f"{module.get('file')} (sha256 {module.get('sha256')})" if module.get("file") else "its tokenizer code"
    if section.get("loaded"):
        what = f"transformers loaded {section.get('class')} instead of the model's own class"
    else:
        what = "the tokenizer facts come from the raw files"
    return Finding(
        Severity.INFO,
        "remote-code-disabled",
        f"remote code is not allowed for this target; {what}",
        f"review {code}, then probe again without --no-remote-code",
    )


def _load_failure(
    error: dict[str, Any], who: str, target: dict[str, Any], allowed: bool, section: dict[str, Any]
) -> list[Finding]:
    packages = [p for p in error.get("missing_packages") or [] if isinstance(p, str) and p]
    if packages:
        return [_missing_package(pkg, who, target) for pkg in packages]
    if error.get("cause") == "remote-code-refused" and not allowed:
        return []  # expected: the remote-code-disabled finding says it
    if error.get("cause") in LIMIT_CAUSES:
        return [load_limit_finding(error, who, target)]
    first_line = str(error.get("message") or "").strip().splitlines()[:1]
    message = f"{who} did not load: {error.get('type')}: {first_line[0] if first_line else ''}".rstrip(": ")
    if section.get("vocab_size") is not None:
        message += "; the facts shown come from the raw files"
    # The same fix as the section's autotokenizer block: what makes AutoTokenizer load.
    return [Finding(Severity.ERROR, "tokenizer-load-failed", message, autotokenizer_fix(error, target, None))]


def _missing_package(package: str, who: str, target: dict[str, Any]) -> Finding:
    where = _where(target)
    if any(op in package for op in ("<", ">", "=")):
        need = f"{package}, and {where} has an older version or none"
    else:
        need = f"{package}, not installed in {where}"
    return Finding(Severity.ERROR, "missing-package", f"{who} needs {need}", pip_fix(target, package),
                   {"package": package})


def _sample_failure(error: dict[str, Any], who: str, target: dict[str, Any]) -> list[Finding]:
    packages = [p for p in error.get("missing_packages") or [] if isinstance(p, str) and p]
    if packages:
        return [_missing_package(pkg, "the chat template", target) for pkg in packages]
    if error.get("cause") in LIMIT_CAUSES:
        return [sample_limit_finding(error, who)]
    return [
        Finding(
            Severity.WARNING,
            "chat-template-render-failed",
            f"the chat template of {who} did not render the sample conversation: {error.get('type')}: {error.get('message')}",
            None,
        )
    ]


def _mismatch(section: dict[str, Any]) -> list[Finding]:
    verdict = judge_added_tokens(section.get("added_tokens_check"))
    if verdict is None or not verdict.disagree:
        return []
    bad = verdict.disagree
    shown = _listed([
        f"id {i.get('id')} is {i.get('expected')!r} in the files, loaded: id->{i.get('id_to_token')!r}, "
        f"token->{i.get('token_to_id')!r}, decode->{i.get('decoded')!r}"
        for i in bad
    ])
    return [
        Finding(
            Severity.ERROR,
            "special-token-mismatch",
            f"the loaded tokenizer ({section.get('class')}) disagrees with added_tokens_decoder of "
            f"tokenizer_config.json on {len(bad)} of {verdict.checked} ids: {shown}",
            "do not use ids from this load: load the tokenizer with the model's own class (trust_remote_code) "
            "or a transformers version that does not convert it, or make tokenizer.json and "
            "tokenizer_config.json agree",
            {"ids": [i.get("id") for i in bad]},
        )
    ]


def _file_conflicts(section: dict[str, Any]) -> list[Finding]:
    conflicts = as_dict(section.get("files")).get("added_token_conflicts") or []
    if not conflicts:
        return []
    shown = _listed([
        f"{c.get('content')!r} is id {c.get('id')} in tokenizer_config.json, {c.get('tokenizer_json_id')} in tokenizer.json"
        for c in conflicts
    ])
    return [
        Finding(
            Severity.WARNING,
            "added-tokens-conflict",
            f"tokenizer.json and tokenizer_config.json place {len(conflicts)} added tokens at different ids: {shown}",
            "regenerate both files from one tokenizer (save_pretrained) so their ids agree",
        )
    ]


def _vocab_vs_embedding(section: dict[str, Any], config: dict[str, Any] | None) -> list[Finding]:
    rows, where = config_vocab_size(config)
    size = section.get("len") if isinstance(section.get("len"), int) else section.get("vocab_size")
    if rows is None or not isinstance(size, int) or size <= rows:
        return []
    return [
        Finding(
            Severity.ERROR,
            "vocab-exceeds-embedding",
            f"the tokenizer has {size} tokens (source: {section['sources'].get('len') or section['sources'].get('vocab_size')}) "
            f"but the embedding has {rows} rows ({where}); ids {rows}..{size - 1} would index past it",
            "use the tokenizer that belongs to this checkpoint, or never emit ids at or above " + str(rows),
        )
    ]


def stand_in_finding(block: dict[str, Any], probe: Any, target: dict[str, Any]) -> list[Finding]:
    """The warning for a stand-in: AutoTokenizer "loaded", but no tokenizer of this model."""
    if block.get("stand_in") is not True:
        return []
    probe = as_dict(probe)
    model = target.get("model_path")
    return [Finding(
        Severity.WARNING,
        "tokenizer-stand-in",
        f"AutoTokenizer built a stand-in {probe.get('class') or 'tokenizer'} for {model or 'the model directory'} "
        f"from config.json's model_type, not the model's tokenizer: {block.get('stand_in_reason')}; the tokenizer "
        "facts shown come from the files, and the drafter plan gives no mask or stop ids",
        stand_in_fix(model),
        {"len": probe.get("len"), "class": probe.get("class")},
    )]


def config_vocab_size(config: dict[str, Any] | None) -> tuple[int | None, str | None]:
    """The embedding's row count from config.json (a nested text config when wrapped)."""
    if not isinstance(config, dict):
        return None, None
    if isinstance(config.get("vocab_size"), int):
        return config["vocab_size"], "config.json vocab_size"
    # The contract's wrapper keys: every key a wrapper keeps its text model under.
    for key in WRAPPER_TEXT_CONFIG_KEYS:
        nested = config.get(key)
        if isinstance(nested, dict) and isinstance(nested.get("vocab_size"), int):
            return nested["vocab_size"], f"config.json {key}.vocab_size"
    return None, None
