"""The human report of a profile, rendered at the edge with rich.

Sections: Model, Architecture, Experts, Tokenizer, Chat template, Environment,
Engines, GPUs, Plan (render_serving.py), Findings. Everything shown comes from the profile dict; nothing is computed
here beyond formatting.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from introspect.analysis.result import target_where
from introspect.cli.render_term import human_bytes, human_count, make_console
from introspect.remote.contract import as_dict

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _tok(value: Any) -> str:
    value = as_dict(value)
    if not value:
        return "-"
    return f"{escape(str(value.get('token')))} ({value.get('id')})"


def _kv(title: str) -> Table:
    """A ``key  value`` section: values fold at word boundaries, never inside a value (render_fold)."""
    from introspect.cli.render_fold import KVTable

    return KVTable(title)


def _row(table: Table, key: str, value: Any) -> None:
    if value is None or value == "" or value == []:
        return
    table.add_row(key, value if isinstance(value, str) else escape(str(value)))


def model_section(profile: dict[str, Any]) -> Table:
    target, arch, files = as_dict(profile.get("target")), as_dict(profile.get("architecture")), as_dict(profile.get("files"))
    table = _kv("Model")
    where = target_where(target)
    _row(table, "path", f"{where}:{target.get('model_path')}")
    if files.get("real_path") and files.get("real_path") != target.get("model_path"):
        _row(table, "resolves to", files.get("real_path"))
    types = arch.get("model_type")
    if arch.get("text_model_type") and arch.get("text_model_type") != types:
        types = f"{types} (text model: {arch.get('text_model_type')})"
    _row(table, "model type", types)
    _row(table, "architectures", ", ".join(map(str, arch.get("architectures") or [])) or None)
    _row(table, "size on disk", human_bytes(files.get("total_size")) if files.get("total_size") else None)
    quant = as_dict(arch.get("quantization"))
    if quant:
        bits = f"{quant.get('bits')}-bit " if quant.get("bits") else ""
        group = f", group {quant.get('group_size')}" if quant.get("group_size") else ""
        _row(table, "quantization", f"{quant.get('method')} {bits}{quant.get('format') or ''}{group}".strip())
    _settings_rows(table, profile)
    return table


def _settings_rows(table: Table, profile: dict[str, Any]) -> None:
    """Which inventory and remote-code policy applied, who chose them, and whether the cache answered."""
    settings = as_dict(profile.get("settings"))
    inventory = as_dict(settings.get("inventory"))
    if inventory:
        _row(table, "inventory", escape(f"{inventory.get('path')} (from {inventory.get('where')})"))
    policy = as_dict(settings.get("remote_code"))
    if policy:
        allowed = "allowed" if policy.get("value") else "refused"
        _row(table, "model's own code", escape(f"{allowed} (from {policy.get('where')})"))
    cache = as_dict(profile.get("cache"))
    if cache.get("hit"):
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


def _evidence(arch: dict[str, Any], group: str, limit: int = 4) -> str:
    keys = list(as_dict(as_dict(arch.get("evidence")).get(group)))
    if not keys:
        return ""
    shown = ", ".join(keys[:limit]) + (f", +{len(keys) - limit}" if len(keys) > limit else "")
    return f"\n[dim]from {escape(shown)}[/dim]"


def architecture_section(profile: dict[str, Any]) -> Table:
    arch = as_dict(profile.get("architecture"))
    attn, layers, params = as_dict(arch.get("attention")), as_dict(arch.get("layers")), as_dict(arch.get("params"))
    table = _kv("Architecture")
    summary = as_dict(arch.get("summary"))
    for question, key, group in FIVE_QUESTIONS:
        if summary.get(key):
            table.add_row(question, escape(str(summary[key])) + _evidence(arch, group))
    # The rows below add the numbers; those the plain-words answers already give are
    # shown only when a summary is missing (e.g. a profile from an older version).
    kinds = as_dict(layers.get("kinds"))
    if not summary.get("mixers"):
        mix = ", ".join(f"{count} {kind}" for kind, count in kinds.items())
        pure = "pure attention" if layers.get("pure_attention") else "hybrid / non-attention"
        _row(table, "layers", f"{arch.get('num_layers')} ({mix}; {pure})" if kinds else arch.get("num_layers"))
    if attn:
        heads = f"{attn.get('num_heads')} heads, {attn.get('num_kv_heads')} KV heads, head_dim {attn.get('head_dim')}"
        _row(table, "attention", f"{attn.get('type')}: {heads}")
        if attn.get("type") == "MLA":
            _row(table, "MLA ranks", f"q_lora {attn.get('q_lora_rank')}, kv_lora {attn.get('kv_lora_rank')}, "
                 f"qk_nope {attn.get('qk_nope_head_dim')}, qk_rope {attn.get('qk_rope_head_dim')}, "
                 f"v {attn.get('v_head_dim')}")
        _row(table, "sliding window", attn.get("sliding_window"))
    _row(table, "hidden size", arch.get("hidden_size"))
    _row(table, "vocab (embedding)", arch.get("vocab_size"))
    _row(table, "max context", arch.get("max_context"))
    if params and not summary.get("size"):
        _row(table, "parameters", f"{human_count(params.get('total'))} total, {human_count(params.get('active'))} "
             f"active per token (from {params.get('source')})")
    kv = as_dict(arch.get("kv_cache"))
    if kv.get("bytes_per_token") is not None:
        _row(table, "KV cache", f"{human_bytes(kv.get('bytes_per_token'))} per token"
             + (f", {human_bytes(kv.get('state_bytes_per_sequence'))} fixed state per sequence"
                if kv.get("state_bytes_per_sequence") else ""))
    spec = as_dict(arch.get("speculative"))
    if spec and not summary.get("speculative"):
        drafters = ", ".join(str(as_dict(d).get("path")) for d in spec.get("drafters") or []) or "none found"
        _row(table, "speculative", f"MTP layers {spec.get('mtp_layers') or 0}; drafters: {drafters}")
    return table


def experts_section(profile: dict[str, Any]) -> Table:
    moe = as_dict(as_dict(profile.get("architecture")).get("moe"))
    table = _kv("Experts")
    if not moe.get("is_moe"):
        _row(table, "MoE", "no (dense)")
        return table
    _row(table, "routed experts", moe.get("routed_experts"))
    _row(table, "shared experts", moe.get("shared_experts"))
    _row(table, "experts per token", moe.get("experts_per_token"))
    _row(table, "groups", f"n_group {moe.get('n_group')}, topk_group {moe.get('topk_group')}"
         if moe.get("n_group") is not None else None)
    _row(table, "routing", ", ".join(f"{k}={moe.get(k)}" for k in
                                     ("scoring_func", "topk_method", "routed_scaling_factor", "norm_topk_prob")
                                     if moe.get(k) is not None) or None)
    _row(table, "expert FFN size", moe.get("moe_intermediate_size"))
    _row(table, "MoE / dense layers", f"{moe.get('moe_layers')} / {moe.get('dense_layers')}")
    return table


def tokenizer_section(profile: dict[str, Any]) -> Table:
    tok = as_dict(profile.get("tokenizer"))
    table = _kv("Tokenizer")
    _autotokenizer_rows(table, tok)
    if tok.get("loaded"):
        source = f"loaded with {tok.get('source') or 'transformers'}"
    else:
        source = "from raw files (fallback)"
    _row(table, "source", f"{source}; class {tok.get('class')}")
    _row(table, "vocab size", f"{tok.get('vocab_size')}" + (f" (len {tok.get('len')})" if tok.get("len") else ""))
    for name in ("bos", "eos", "pad", "unk", "mask"):
        table.add_row(name, _tok(tok.get(name)))
    specials = tok.get("special_tokens") or []
    if specials:
        # The count is the list's true length: the host may have cut the list (special_tokens_truncated).
        total = tok.get("special_tokens_total")
        total = total if isinstance(total, int) and total >= len(specials) else len(specials)
        shown = ", ".join(f"{escape(str(as_dict(s).get('token')))}={as_dict(s).get('id')}" for s in specials[:12])
        more = f" ... (+{total - min(len(specials), 12)} more)" if total > 12 else ""
        _row(table, f"special tokens ({total})", shown + more)
    err = as_dict(tok.get("error"))
    if err:
        _row(table, "load error", f"{err.get('type')}: {err.get('message')}")
    return table


PARTIAL_NAMES = {"special_tokens": "specials"}


def _autotokenizer_rows(table: Table, tok: dict[str, Any]) -> None:
    """First: does AutoTokenizer load in that venv; then what loaded the files instead, if anything."""
    auto = as_dict(tok.get("autotokenizer"))
    if not auto:  # a profile from a version without the block
        return
    if auto.get("ok") is True and auto.get("stand_in") is True:
        verdict = "[bold yellow]stand-in[/bold yellow] — " + escape(
            f"built {auto.get('class')} from model_type, not the model's tokenizer: {auto.get('stand_in_reason')}")
    elif auto.get("ok") is True:
        version = f", transformers {auto.get('transformers_version')}" if auto.get("transformers_version") else ""
        verdict = escape(f"loads ({auto.get('class')}{version})")
    elif auto.get("ok") is False:
        packages = ", ".join(map(str, auto.get("missing_packages") or []))
        lines = str(auto.get("message") or "").strip().splitlines()
        detail = packages or (lines[0][:200] if lines else "")
        cause = f" ({auto.get('cause')})" if auto.get("cause") else ""
        verdict = "[bold red]FAILS[/bold red] — " + escape(f"{auto.get('type')}: {detail}".rstrip(": ") + cause)
    else:
        verdict = escape(f"not judged: {auto.get('reason')}")
    table.add_row("AutoTokenizer", verdict)
    native = as_dict(tok.get("native"))
    if native:
        read = f" from {', '.join(map(str, native['read']))}" if native.get("read") else ""
        partial = ", ".join(PARTIAL_NAMES.get(str(p), str(p)) for p in native.get("partial") or [])
        text = f"loaded instead by {native.get('loaded_by')} ({native.get('class')}){read}"
        text += f" — {partial} partial" if partial else ""
        _row(table, "native load", text)


def template_section(profile: dict[str, Any]) -> Table:
    tpl = as_dict(as_dict(profile.get("tokenizer")).get("chat_template"))
    table = _kv("Chat template")
    if not tpl.get("present"):
        _row(table, "present", "no")
        return table
    _row(table, "source", tpl.get("source"))
    _row(table, "sha256", tpl.get("sha256"))
    sample = tpl.get("sample")
    if isinstance(sample, str):
        _row(table, "sample", sample if len(sample) < 600 else sample[:600] + " ...")
    elif as_dict(tpl.get("sample_error")):
        err = as_dict(tpl.get("sample_error"))
        _row(table, "sample", f"render failed: {err.get('type')}: {err.get('message')}")
    return table


def environment_section(profile: dict[str, Any]) -> Table:
    env = as_dict(profile.get("environment"))
    table = _kv("Environment")
    _row(table, "python", f"{env.get('python_version')} ({env.get('python_executable')})")
    _row(table, "venv", env.get("venv"))
    packages = as_dict(env.get("packages"))
    if packages:
        shown = ", ".join(f"{name} {version or '[red]missing[/red]'}" for name, version in packages.items())
        table.add_row("packages", shown)
    missing = env.get("missing_modules") or []
    if missing:
        table.add_row("model code needs", "[red]" + escape(", ".join(missing)) + " (missing)[/red]")
    return table


def findings_section(profile: dict[str, Any]) -> Table:
    from introspect.cli.render_fold import KVTable

    table = KVTable("Findings", gap=1, key_style="")
    findings = profile.get("findings") or []
    if not findings:
        table.add_row("[green]ok[/green]", "no findings")
    for item in findings:
        item = as_dict(item)
        style = SEVERITY_STYLE.get(str(item.get("severity")), "")
        text = f"[{style}]{escape(str(item.get('code')))}[/{style}]: {escape(str(item.get('message')))}"
        table.add_row(f"[{style}]{item.get('severity')}[/{style}]", text)
    return table


SECTIONS = (model_section, architecture_section, experts_section, tokenizer_section, template_section,
            environment_section, findings_section)


def print_report(profile: dict[str, Any], console: Console | None = None) -> None:
    from introspect.cli.fix_lines import print_report_fixes
    from introspect.cli.render_serving import SERVING_SECTIONS  # imports this module's helpers
    from introspect.cli.render_witnesses import witnesses_section

    console = console or make_console()
    sections = SECTIONS[:2] + (witnesses_section,) + SECTIONS[2:-1] + SERVING_SECTIONS + SECTIONS[-1:]
    for section in sections:
        console.print(section(profile), crop=False)  # a word wider than the terminal: left whole
        console.print()
    print_report_fixes(console, profile)  # To fix: warnings and errors; Optional: info extras
