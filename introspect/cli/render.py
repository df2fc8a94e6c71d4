"""The human report of a profile, rendered at the edge with rich.

Sections: Model, Architecture, Experts, Tokenizer, Chat template, Environment,
Engines, GPUs, Plan (render_serving.py), Findings. Everything shown comes from the profile document
(introspect/documents/profile.py); nothing is computed here beyond formatting.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from introspect.analysis.result import target_where
from introspect.cli.render_term import human_bytes, human_count, make_console
from introspect.documents.base import TokenId
from introspect.documents.profile import ProfileDocument
from introspect.documents.profile_architecture import Architecture
from introspect.documents.profile_tokenizer import Tokenizer
from introspect.remote.contract import JSONObject, as_dict

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _tok(value: TokenId | None) -> str:
    if value is None:
        return "-"
    return f"{escape(str(value.token))} ({value.id})"


def _kv(title: str) -> Table:
    """A ``key  value`` section: values fold at word boundaries, never inside a value (render_fold)."""
    from introspect.cli.render_fold import KVTable

    return KVTable(title)


def _row(table: Table, key: str, value: Any) -> None:
    if value is None or value == "" or value == []:
        return
    table.add_row(key, value if isinstance(value, str) else escape(str(value)))


def model_section(profile: ProfileDocument) -> Table:
    target, arch, files = profile.target, profile.architecture, profile.files
    table = _kv("Model")
    where = target_where(target.to_dict())
    _row(table, "path", f"{where}:{target.model_path}")
    if files.real_path and files.real_path != target.model_path:
        _row(table, "resolves to", files.real_path)
    types = arch.model_type
    if arch.text_model_type and arch.text_model_type != types:
        types = f"{types} (text model: {arch.text_model_type})"
    _row(table, "model type", types)
    _row(table, "architectures", ", ".join(map(str, arch.architectures or [])) or None)
    _row(table, "size on disk", human_bytes(files.total_size) if files.total_size else None)
    quant = arch.quantization
    if quant is not None:
        bits = f"{quant.bits}-bit " if quant.bits else ""
        group = f", group {quant.group_size}" if quant.group_size else ""
        _row(table, "quantization", f"{quant.method} {bits}{quant.format or ''}{group}".strip())
    _settings_rows(table, profile)
    return table


def _settings_rows(table: Table, profile: ProfileDocument) -> None:
    """Which inventory and remote-code policy applied, who chose them, and whether the cache answered."""
    settings = profile.settings
    if settings is not None and settings.inventory is not None:
        inventory = settings.inventory
        _row(table, "inventory", escape(f"{inventory.path} (from {inventory.where})"))
    if settings is not None:
        policy = settings.remote_code
        allowed = "allowed" if policy.value else "refused"
        _row(table, "model's own code", escape(f"{allowed} (from {policy.where})"))
    if profile.cache is not None and profile.cache.hit:
        _row(table, "cache", "hit: the model dir and interpreter are unchanged since the cached probe "
                             "(--refresh probes afresh)")


# The five questions users ask first, the summary key answering each, and the evidence group.
FIVE_QUESTIONS = (
    ("attention or hybrid?", "mixers", "layers"),
    ("MHA / GQA / MQA / MLA?", "attention", "attention"),
    ("MoE or dense?", "experts", "moe"),
    ("layers and parameters?", "size", "params"),
    ("speculative decoding?", "speculative", "speculative"),
)


def _evidence(arch: Architecture, group: str, limit: int = 4) -> str:
    keys = list(getattr(arch.evidence, group) or {})  # the config.json keys the fact was read from
    if not keys:
        return ""
    shown = ", ".join(keys[:limit]) + (f", +{len(keys) - limit}" if len(keys) > limit else "")
    return f"\n[dim]from {escape(shown)}[/dim]"


def architecture_section(profile: ProfileDocument) -> Table:
    arch = profile.architecture
    attn, layers, params, summary = arch.attention, arch.layers, arch.params, arch.summary
    table = _kv("Architecture")
    for question, key, group in FIVE_QUESTIONS:
        answer = getattr(summary, key)
        if answer:
            table.add_row(question, escape(str(answer)) + _evidence(arch, group))
    # The rows below add the numbers; those the plain-words answers already give are
    # shown only when a summary has no answer for them.
    kinds = layers.kinds or {}
    if not summary.mixers:
        mix = ", ".join(f"{count} {kind}" for kind, count in kinds.items())
        pure = "pure attention" if layers.pure_attention else "hybrid / non-attention"
        _row(table, "layers", f"{arch.num_layers} ({mix}; {pure})" if kinds else arch.num_layers)
    heads = f"{attn.num_heads} heads, {attn.num_kv_heads} KV heads, head_dim {attn.head_dim}"
    _row(table, "attention", f"{attn.type}: {heads}")
    if attn.type == "MLA":
        _row(table, "MLA ranks", f"q_lora {attn.q_lora_rank}, kv_lora {attn.kv_lora_rank}, "
             f"qk_nope {attn.qk_nope_head_dim}, qk_rope {attn.qk_rope_head_dim}, v {attn.v_head_dim}")
    _row(table, "sliding window", attn.sliding_window)
    _row(table, "hidden size", arch.hidden_size)
    _row(table, "vocab (embedding)", arch.vocab_size)
    _row(table, "max context", arch.max_context)
    if not summary.size:
        _row(table, "parameters", f"{human_count(params.total)} total, {human_count(params.active)} "
             f"active per token (from {params.source})")
    kv = arch.kv_cache
    if kv is not None and kv.bytes_per_token is not None:
        _row(table, "KV cache", f"{human_bytes(kv.bytes_per_token)} per token"
             + (f", {human_bytes(kv.state_bytes_per_sequence)} fixed state per sequence"
                if kv.state_bytes_per_sequence else ""))
    spec = arch.speculative
    if not summary.speculative:
        drafters = ", ".join(str(d.path) for d in spec.drafters) or "none found"
        _row(table, "speculative", f"MTP layers {spec.mtp_layers or 0}; drafters: {drafters}")
    return table


MOE_ROUTING = ("scoring_func", "topk_method", "routed_scaling_factor", "norm_topk_prob")


def experts_section(profile: ProfileDocument) -> Table:
    moe = profile.architecture.moe
    table = _kv("Experts")
    if not moe.is_moe:
        _row(table, "MoE", "no (dense)")
        return table
    _row(table, "routed experts", moe.routed_experts)
    _row(table, "shared experts", moe.shared_experts)
    _row(table, "experts per token", moe.experts_per_token)
    _row(table, "groups", f"n_group {moe.n_group}, topk_group {moe.topk_group}" if moe.n_group is not None else None)
    routing = {key: getattr(moe, key) for key in MOE_ROUTING}
    _row(table, "routing", ", ".join(f"{k}={v}" for k, v in routing.items() if v is not None) or None)
    _row(table, "expert FFN size", moe.moe_intermediate_size)
    _row(table, "MoE / dense layers", f"{moe.moe_layers} / {moe.dense_layers}")
    return table


def tokenizer_section(profile: ProfileDocument | JSONObject) -> Table:
    # Tests and older callers pass the JSON form: validate it once here.
    tok = (profile.tokenizer if isinstance(profile, ProfileDocument)
           else Tokenizer.model_validate(profile["tokenizer"]))
    table = _kv("Tokenizer")
    _autotokenizer_rows(table, tok)
    source = f"loaded with {tok.source or 'transformers'}" if tok.loaded else "from raw files (fallback)"
    _row(table, "source", f"{source}; class {tok.class_}")
    _row(table, "vocab size", f"{tok.vocab_size}" + (f" (len {tok.len})" if tok.len else ""))
    for name, token in (("bos", tok.bos), ("eos", tok.eos), ("pad", tok.pad), ("unk", tok.unk), ("mask", tok.mask)):
        table.add_row(name, _tok(token))
    specials = tok.special_tokens
    if specials:
        # The count is the list's true length: the host may have cut the list (special_tokens_truncated).
        total = max(tok.special_tokens_total, len(specials))
        shown = ", ".join(f"{escape(str(s.token))}={s.id}" for s in specials[:12])
        more = f" ... (+{total - min(len(specials), 12)} more)" if total > 12 else ""
        _row(table, f"special tokens ({total})", shown + more)
    err = tok.error
    if err is not None:
        _row(table, "load error", f"{err.type}: {err.message}")
    return table


PARTIAL_NAMES = {"special_tokens": "specials"}


def _autotokenizer_rows(table: Table, tok: Tokenizer) -> None:
    """First: does AutoTokenizer load in that venv; then what loaded the files instead, if anything."""
    auto = tok.autotokenizer
    if auto.ok is True and auto.stand_in is True:
        verdict = "[bold yellow]stand-in[/bold yellow] — " + escape(
            f"built {auto.class_} from model_type, not the model's tokenizer: {auto.stand_in_reason}")
    elif auto.ok is True:
        version = f", transformers {auto.transformers_version}" if auto.transformers_version else ""
        verdict = escape(f"loads ({auto.class_}{version})")
    elif auto.ok is False:
        packages = ", ".join(map(str, auto.missing_packages))
        lines = str(auto.message or "").strip().splitlines()
        detail = packages or (lines[0][:200] if lines else "")
        cause = f" ({auto.cause})" if auto.cause else ""
        verdict = "[bold red]FAILS[/bold red] — " + escape(f"{auto.type}: {detail}".rstrip(": ") + cause)
    else:
        verdict = escape(f"not judged: {auto.reason}")
    table.add_row("AutoTokenizer", verdict)
    native = as_dict(tok.native)  # the native loader's own record (sentencepiece, tiktoken, tekken)
    if native:
        read = f" from {', '.join(map(str, native['read']))}" if native.get("read") else ""
        partial = ", ".join(PARTIAL_NAMES.get(str(p), str(p)) for p in native.get("partial") or [])
        text = f"loaded instead by {native.get('loaded_by')} ({native.get('class')}){read}"
        text += f" — {partial} partial" if partial else ""
        _row(table, "native load", text)


def template_section(profile: ProfileDocument) -> Table:
    tpl = profile.tokenizer.chat_template
    table = _kv("Chat template")
    if not tpl.present:
        _row(table, "present", "no")
        return table
    _row(table, "source", tpl.source)
    _row(table, "sha256", tpl.sha256)
    sample = tpl.sample
    if isinstance(sample, str):
        _row(table, "sample", sample if len(sample) < 600 else sample[:600] + " ...")
    elif tpl.sample_error:
        err = tpl.sample_error
        _row(table, "sample", f"render failed: {err.get('type')}: {err.get('message')}")
    return table


def environment_section(profile: ProfileDocument) -> Table:
    env = profile.environment
    table = _kv("Environment")
    _row(table, "python", f"{env.python_version} ({env.python_executable})")
    _row(table, "venv", env.venv)
    if env.packages:
        shown = ", ".join(f"{name} {version or '[red]missing[/red]'}" for name, version in env.packages.items())
        table.add_row("packages", shown)
    if env.missing_modules:
        table.add_row("model code needs", "[red]" + escape(", ".join(env.missing_modules)) + " (missing)[/red]")
    return table


def findings_section(profile: ProfileDocument) -> Table:
    from introspect.cli.render_fold import KVTable

    table = KVTable("Findings", gap=1, key_style="")
    if not profile.findings:
        table.add_row("[green]ok[/green]", "no findings")
    for item in profile.findings:
        style = SEVERITY_STYLE.get(item.severity, "")
        text = f"[{style}]{escape(str(item.code))}[/{style}]: {escape(str(item.message))}"
        table.add_row(f"[{style}]{item.severity}[/{style}]", text)
    return table


SECTIONS = (model_section, architecture_section, experts_section, tokenizer_section, template_section,
            environment_section, findings_section)


def print_report(profile: ProfileDocument | Mapping[str, object], console: Console | None = None) -> None:
    """The human report of a profile: the profile JSON (as ``build_profile`` made it, or a cached
    one) is validated into its document once here."""
    from introspect.cli.fix_lines import print_report_fixes
    from introspect.cli.render_serving import serving_tables  # imports this module's helpers
    from introspect.cli.render_witnesses import witnesses_section

    document = profile if isinstance(profile, ProfileDocument) else ProfileDocument.model_validate(profile)
    console = console or make_console()
    tables = ([section(document) for section in SECTIONS[:2]] + [witnesses_section(document)]
              + [section(document) for section in SECTIONS[2:-1]] + serving_tables(document)
              + [SECTIONS[-1](document)])
    for table in tables:
        console.print(table, crop=False)  # a word wider than the terminal: left whole
        console.print()
    print_report_fixes(console, document)  # To fix: warnings and errors; Optional: info extras
