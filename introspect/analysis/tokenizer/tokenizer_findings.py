"""The tokenizer section's findings: load failures, missing packages, id disagreements, vocab vs embedding,
a stand-in tokenizer."""

from __future__ import annotations

from introspect.analysis.findings import Finding, Severity, pip_fix
from introspect.analysis.result import TargetSection
from introspect.analysis.tokenizer.autotokenizer_verdict import stand_in_fix
from introspect.analysis.tokenizer.shapes import shaped
from introspect.analysis.tokenizer.tokenizer_autotokenizer import (
    autotokenizer_fix,
    error_summary,
)
from introspect.analysis.tokenizer.tokenizer_limits import (
    LIMIT_CAUSES,
    load_limit_finding,
    sample_limit_finding,
    tiktoken_findings,
)
from introspect.documents.profile_tokenizer import AutoTokenizer, Tokenizer, TokenizerError
from introspect.remote.contract import (
    WRAPPER_TEXT_CONFIG_KEYS,
    JSONObject,
    ModuleInfo,
    RemoteCodeInfo,
    TokenizerFilesFacts,
    TokenizerProbe,
)

MAX_LISTED = 5


def _listed(items: list[str]) -> str:
    """The first MAX_LISTED items joined, and how many more there are."""
    more = f" (and {len(items) - MAX_LISTED} more)" if len(items) > MAX_LISTED else ""
    return "; ".join(items[:MAX_LISTED]) + more


def tokenizer_findings(
    section: Tokenizer,
    files: TokenizerFilesFacts,
    config: JSONObject | None,
    target: TargetSection,
    remote_code_allowed: bool,
) -> list[Finding]:
    out: list[Finding] = []
    remote = shaped(files.get("remote_code"), RemoteCodeInfo)
    who = _tokenizer_label(section, remote)
    if not remote_code_allowed and remote:
        out.append(_remote_code_disabled(section, remote))
    if section.error is not None:
        out += _load_failure(section.error, who, target, remote_code_allowed, section)
    sample_error = error_summary(section.chat_template.sample_error)
    if sample_error is not None and section.chat_template.sample_error:
        out += _sample_failure(sample_error, who, target)
    out += _mismatch(section)
    out += _file_conflicts(section)
    out += _vocab_vs_embedding(section, config)
    out += tiktoken_findings(files)
    return out


def _module(remote: RemoteCodeInfo) -> ModuleInfo:
    """The auto_map tokenizer class's module: the slow class's, else the fast one's."""
    return shaped(remote.get("slow"), ModuleInfo) or shaped(remote.get("fast"), ModuleInfo)


def _tokenizer_label(section: Tokenizer, remote: RemoteCodeInfo) -> str:
    module = _module(remote)
    if module.get("class") and module.get("file"):
        return f"the tokenizer ({module['class']} from {module['file']})"
    cls = section.class_ or section.declared_class
    return f"the tokenizer ({cls})" if cls else "the tokenizer"


def _where(target: TargetSection) -> str:
    return str(target.get("venv") or target.get("python") or "the target Python")


def _remote_code_disabled(section: Tokenizer, remote: RemoteCodeInfo) -> Finding:
    module = _module(remote)
    code = f"{module.get('file')} (sha256 {module.get('sha256')})" if module.get("file") else "its tokenizer code"
    if section.loaded:
        what = f"transformers loaded {section.class_} instead of the model's own class"
    else:
        what = "the tokenizer facts come from the raw files"
    return Finding(
        Severity.INFO,
        "remote-code-disabled",
        f"remote code is not allowed for this target; {what}",
        f"review {code}, then probe again without --no-remote-code",
    )


def _load_failure(
    error: TokenizerError, who: str, target: TargetSection, allowed: bool, section: Tokenizer
) -> list[Finding]:
    packages = [p for p in error.missing_packages or [] if isinstance(p, str) and p]
    if packages:
        return [_missing_package(pkg, who, target) for pkg in packages]
    if error.cause == "remote-code-refused" and not allowed:
        return []  # expected: the remote-code-disabled finding says it
    if error.cause in LIMIT_CAUSES:
        return [load_limit_finding(error, who, target)]
    first_line = str(error.message or "").strip().splitlines()[:1]
    message = f"{who} did not load: {error.type}: {first_line[0] if first_line else ''}".rstrip(": ")
    if section.vocab_size is not None:
        message += "; the facts shown come from the raw files"
    # The same fix as the section's autotokenizer block: what makes AutoTokenizer load.
    return [Finding(Severity.ERROR, "tokenizer-load-failed", message, autotokenizer_fix(error, target, None))]


def _missing_package(package: str, who: str, target: TargetSection) -> Finding:
    where = _where(target)
    if any(op in package for op in ("<", ">", "=")):
        need = f"{package}, and {where} has an older version or none"
    else:
        need = f"{package}, not installed in {where}"
    return Finding(Severity.ERROR, "missing-package", f"{who} needs {need}", pip_fix(target, package),
                   {"package": package})


def _sample_failure(error: TokenizerError, who: str, target: TargetSection) -> list[Finding]:
    packages = [p for p in error.missing_packages or [] if isinstance(p, str) and p]
    if packages:
        return [_missing_package(pkg, "the chat template", target) for pkg in packages]
    if error.cause in LIMIT_CAUSES:
        return [sample_limit_finding(error, who)]
    return [
        Finding(
            Severity.WARNING,
            "chat-template-render-failed",
            f"the chat template of {who} did not render the sample conversation: {error.type}: {error.message}",
            None,
        )
    ]


def _mismatch(section: Tokenizer) -> list[Finding]:
    """The section's check lists only the ids whose answers differ (tokenizer_caps.check_totals)."""
    check = section.added_tokens_check
    if check is None or not check.items:
        return []
    bad = check.items
    shown = _listed([
        f"id {i.get('id')} is {i.get('expected')!r} in the files, loaded: id->{i.get('id_to_token')!r}, "
        f"token->{i.get('token_to_id')!r}, decode->{i.get('decoded')!r}"
        for i in bad
    ])
    return [
        Finding(
            Severity.ERROR,
            "special-token-mismatch",
            f"the loaded tokenizer ({section.class_}) disagrees with added_tokens_decoder of "
            f"tokenizer_config.json on {len(bad)} of {check.checked} ids: {shown}",
            "do not use ids from this load: load the tokenizer with the model's own class (trust_remote_code) "
            "or a transformers version that does not convert it, or make tokenizer.json and "
            "tokenizer_config.json agree",
            {"ids": [i.get("id") for i in bad]},
        )
    ]


def _file_conflicts(section: Tokenizer) -> list[Finding]:
    conflicts = section.files.added_token_conflicts
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


def _vocab_vs_embedding(section: Tokenizer, config: JSONObject | None) -> list[Finding]:
    rows, where = config_vocab_size(config)
    size = section.len if isinstance(section.len, int) else section.vocab_size
    if rows is None or not isinstance(size, int) or size <= rows:
        return []
    return [
        Finding(
            Severity.ERROR,
            "vocab-exceeds-embedding",
            f"the tokenizer has {size} tokens (source: {section.sources.len or section.sources.vocab_size}) "
            f"but the embedding has {rows} rows ({where}); ids {rows}..{size - 1} would index past it",
            "use the tokenizer that belongs to this checkpoint, or never emit ids at or above " + str(rows),
        )
    ]


def stand_in_finding(block: AutoTokenizer, probe: TokenizerProbe | None, target: TargetSection) -> list[Finding]:
    """The warning for a stand-in: AutoTokenizer "loaded", but no tokenizer of this model."""
    if block.stand_in is not True:
        return []
    loaded = shaped(probe, TokenizerProbe)
    model = target.get("model_path")
    return [Finding(
        Severity.WARNING,
        "tokenizer-stand-in",
        f"AutoTokenizer built a stand-in {loaded.get('class') or 'tokenizer'} for {model or 'the model directory'} "
        f"from config.json's model_type, not the model's tokenizer: {block.stand_in_reason}; the tokenizer "
        "facts shown come from the files, and the drafter plan gives no mask or stop ids",
        stand_in_fix(model),
        {"len": loaded.get("len"), "class": loaded.get("class")},
    )]


def config_vocab_size(config: JSONObject | None) -> tuple[int | None, str | None]:
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
