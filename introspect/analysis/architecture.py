"""The architecture section of the profile: one entry point over the verdict modules.

``analyze_architecture`` takes config.json as parsed (any JSON value, or None when
the file was missing), optionally the summarised safetensors headers and the
drafter configs found beside the model, and answers the five questions users ask
first: pure attention or hybrid, which attention, MoE or dense, how big, and
which speculative decoding. It is pure (no I/O) and never raises: garbage in
gives nulls and findings out.
"""

from __future__ import annotations

import re
from typing import Any

from introspect.analysis.attention import analyze_attention, empty_attention, hidden_size
from introspect.analysis.config_view import FAMILY_DEFAULTS, MAX_SIZE, ConfigView, positive, sanitize, unwrap
from introspect.analysis.kv_cache import analyze_kv_cache, model_dtype
from introspect.analysis.layers import (
    GDN,
    KDA,
    LINEAR,
    MAMBA,
    MAMBA2,
    MLP,
    LayerLayout,
    analyze_layers,
    count_layers,
)
from introspect.analysis.moe import analyze_moe, empty_moe
from introspect.analysis.params import ParamEstimate, estimate_params
from introspect.analysis.quantization import analyze_quantization
from introspect.analysis.safetensors_count import count_safetensors
from introspect.analysis.speculative import analyze_speculative
from introspect.analysis.weights_check import confirm_layers

Finding = dict[str, Any]

# Families whose layout keys this module reads; anything else gets an info finding.
KNOWN_FAMILIES = frozenset(
    {
        "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next",
        "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "deepseek_v2", "deepseek_v3",
        "kimi_k2", "kimi_k25", "kimi_linear", "glm4_moe", "glm4", "minimax_m2", "minimax", "gemma",
        "gemma2", "gemma3", "gemma3_text", "gpt_oss", "jamba", "nemotron_h", "falcon_h1", "falcon_mamba",
        "mamba", "mamba2", "gpt2", "phi3", "phi", "bert", "roberta", "gpt_bigcode", "starcoder2", "falcon",
        "RefinedWeb", "RefinedWebModel", "granitemoehybrid", "olmoe", "qwen2_vl", "qwen2_5_vl", "llava",
    }
)  # fmt: skip

# Config keys that look structural; unread ones are named in the unknown-family finding.
_STRUCTURAL = re.compile(
    r"layer|expert|moe|head|attn|attention|mamba|ssm|conv|lora|window|linear|block|pattern|state|group|shared|dense|sparse|nextn|mtp|kv_|rank|hidden|vocab|router|topk|top_k"
)
_BENIGN = frozenset(
    {
        "attention_dropout", "attn_pdrop", "hidden_dropout", "hidden_dropout_prob", "attention_probs_dropout_prob",
        "layer_norm_eps", "layer_norm_epsilon", "hidden_act", "hidden_activation", "num_logits_to_keep",
        "output_hidden_states", "output_attentions", "return_dict", "output_router_logits", "router_aux_loss_coef",
        "router_jitter_noise", "tie_encoder_decoder", "is_encoder_decoder", "add_cross_attention",
        "chunk_size_feed_forward", "attention_softmax_in_fp32", "scale_attention_softmax_in_fp32",
        "router_z_loss_coef", "use_cache", "top_k", "rescale_prenorm_residual",
    }
)  # fmt: skip


def finding(severity: str, code: str, message: str, fix: str | None = None) -> Finding:
    return {"severity": severity, "code": code, "message": message, "fix": fix}


def empty_architecture(config_path: str | None) -> dict[str, Any]:
    """The section's layout with every field null: what a missing or broken config yields."""
    return {
        "model_type": None,
        "text_model_type": None,
        "architectures": None,
        "config_path": config_path,
        "nesting": [],
        "num_layers": None,
        "hidden_size": None,
        "vocab_size": None,
        "max_context": None,
        "dtype": None,
        "attention": empty_attention() | {"type": None},
        "moe": empty_moe() | {"is_moe": None},
        "layers": {"pattern": [], "kinds": {}, "pure_attention": None},
        "params": {
            "total": None,
            "active": None,
            "embedding": None,
            "source": None,
            "config_estimate": {"total": None, "active": None},
            "safetensors": None,
        },
        "mtp": {"layers": 0, "params": None, "active": None, "source": None},
        "quantization": None,
        "kv_cache": None,
        "speculative": {"mtp_layers": 0, "mtp_source": None, "drafters": []},
        "evidence": {},
        "summary": {},
    }


def analyze_architecture(
    config: object,
    *,
    config_path: str | None = None,
    safetensors: dict | None = None,
    drafters: list[dict] | None = None,
) -> tuple[dict, list[dict]]:
    """Architecture section of the profile and its findings. Never raises."""
    try:
        return _analyze(config, config_path, safetensors, drafters)
    except Exception as exc:  # the last guard: a verdict bug must not cost the rest of the profile
        arch = empty_architecture(config_path if isinstance(config_path, str) else None)
        return arch, [
            finding(
                "error",
                "analysis-failed",
                f"architecture analysis failed on this config: {type(exc).__name__}: {exc}"[:500],
                "report this config.json to the introspect maintainers",
            )
        ]


def _section(view: ConfigView, evidence: dict[str, Any], name: str, fn: Any, *args: Any) -> Any:
    """Run one verdict and keep the config keys it read as its evidence."""
    saved, view.evidence = view.evidence, {}
    try:
        return fn(*args)
    finally:
        evidence[name] = dict(view.evidence)
        view.evidence = saved | view.evidence


def _analyze(
    config: object, config_path: str | None, safetensors: Any, drafters: Any
) -> tuple[dict[str, Any], list[Finding]]:
    arch = empty_architecture(config_path if isinstance(config_path, str) else None)
    if config is None:
        return arch, [
            finding(
                "error",
                "config-missing",
                "the model directory has no config.json",
                "add the model's config.json",
            )
        ]
    root = sanitize(config)
    if not isinstance(root, dict):
        kind = type(config).__name__
        return arch, [
            finding(
                "error",
                "config-invalid",
                f"config.json holds a JSON {kind}, not an object",
                "replace config.json with the model's real configuration",
            )
        ]

    text, nesting = unwrap(root)
    model_type = root.get("model_type") if isinstance(root.get("model_type"), str) else None
    text_type = text.get("model_type") if isinstance(text.get("model_type"), str) else None
    text_type = text_type or model_type
    defaults = {**FAMILY_DEFAULTS.get(model_type or "", {}), **FAMILY_DEFAULTS.get(text_type or "", {})}
    prefix = ".".join(nesting) + "." if nesting else ""
    view = ConfigView(text, parent=root if nesting else None, defaults=defaults, prefix=prefix)
    root_view = ConfigView(root)
    evidence: dict[str, Any] = {}

    num_layers, _ = _section(view, evidence, "num_layers", count_layers, view)
    max_context = positive(
        view.get_int(
            "max_position_embeddings", "n_positions", "n_ctx", "max_sequence_length", "seq_length",
            "max_seq_len", "model_max_length", maximum=MAX_SIZE,
        )
    )  # fmt: skip
    archs = root_view.get_str_list("architectures")
    arch.update(
        {
            "model_type": model_type,
            "text_model_type": text_type,
            "architectures": archs,
            "nesting": nesting,
            "num_layers": num_layers,
            "hidden_size": hidden_size(view),
            "vocab_size": positive(view.get_int("vocab_size", "n_vocab", "padded_vocab_size")),
            "max_context": max_context,
            "dtype": model_dtype(view),
        }
    )
    if nesting:
        arch["text_architectures"] = view.get_str_list("architectures")

    layout: LayerLayout = _section(view, evidence, "layers", analyze_layers, view, text_type, max_context)
    attention = _section(view, evidence, "attention", analyze_attention, view, text_type, layout)
    moe = _section(view, evidence, "moe", analyze_moe, view, text_type, layout)
    quant = _section(view, evidence, "quantization", analyze_quantization, view)
    estimate = _section(
        view, evidence, "params", estimate_params, view, root_view, text_type, layout, attention, moe
    )
    kv = _section(view, evidence, "kv_cache", analyze_kv_cache, view, layout, attention, arch["hidden_size"])
    spec = _section(view, evidence, "speculative", analyze_speculative, view, drafters)

    sf = count_safetensors(safetensors, quant, num_layers)
    arch.update(
        {
            "attention": attention,
            "moe": moe.section,
            "layers": layout.as_dict() | {"source": layout.source, "ffn": moe.ffn, "ffn_source": moe.source},
            "quantization": quant,
            "kv_cache": kv if layout.pattern else None,
            "speculative": spec,
            "evidence": evidence,
        }
    )
    findings: list[Finding] = []
    arch["params"], arch["mtp"] = _params(estimate, sf, findings)
    # Per-layer verdicts confirmed by the weights' headers where they can be read off them.
    arch["confirmed_by_weights"], layer_findings = confirm_layers(arch, safetensors)
    findings.extend(layer_findings)
    findings.extend(_family_findings(view, model_type, text_type, layout))
    arch["summary"] = _summary(arch, layout)
    return arch, findings


def _params(
    estimate: ParamEstimate, sf: dict[str, Any] | None, findings: list[Finding]
) -> tuple[dict[str, Any], dict[str, Any]]:
    params: dict[str, Any] = {
        "total": estimate.total,
        "active": estimate.active,
        "embedding": estimate.embedding,
        "source": "config" if estimate.total is not None else None,
        "config_estimate": {"total": estimate.total, "active": estimate.active},
        "safetensors": sf,
        "breakdown": estimate.breakdown,
        "vision": estimate.vision,
    }
    mtp = dict(estimate.mtp or {"layers": 0, "params": None, "active": None, "source": None})
    if sf is not None and sf["total"] > 0:
        # The headers are the truth for what is stored; MTP layers stay apart as in the estimate.
        params["total"] = sf["total"] - sf["mtp"]
        params["source"] = "safetensors"
        mtp["safetensors"] = sf["mtp"]
        if estimate.total:
            config_text = estimate.total - (estimate.vision or 0)
            stored_text = sf["text"]
            gap = abs(stored_text - config_text) / max(stored_text, config_text, 1)
            if gap > 0.01:
                findings.append(
                    finding(
                        "warning",
                        "params-mismatch",
                        f"config.json implies {_human(config_text)} text-model parameters but the safetensors "
                        f"headers hold {_human(stored_text)} ({gap:.1%} apart)",
                        "check that config.json belongs to these weights (a re-saved or truncated checkpoint?)",
                    )
                )
    return params, mtp


def _family_findings(
    view: ConfigView, model_type: str | None, text_type: str | None, layout: LayerLayout
) -> list[Finding]:
    out: list[Finding] = []
    # state-spaces' own mamba_ssm config has no model_type but an unmistakable ssm_cfg.
    known = text_type in KNOWN_FAMILIES or model_type in KNOWN_FAMILIES or view.present("ssm_cfg", "attn_cfg")
    unread = sorted(
        key
        for key in view.data
        if key not in view.read and key not in _BENIGN and _STRUCTURAL.search(key) and not key.startswith("_")
    )
    if not known:
        named = ", ".join(unread[:20]) if unread else "none"
        out.append(
            finding(
                "info",
                "unknown-family",
                f"model_type {text_type or model_type or '(missing)'!r} is not a family introspect knows; "
                f"answers come from the generic keys. Config keys not understood: {named}",
                None,
            )
        )
    if layout.unknown:
        out.append(
            finding(
                "info",
                "unknown-layer-type",
                f"layer types not understood (counted as full attention): {', '.join(layout.unknown[:10])}",
                None,
            )
        )
    if not layout.pattern:
        out.append(
            finding(
                "warning",
                "layers-unknown",
                "config.json states no usable layer count (num_hidden_layers / n_layer / num_layers)",
                None,
            )
        )
    return out


# -- plain words for the report --------------------------------------------------------------

_KIND_WORDS = {
    GDN: "Gated DeltaNet",
    KDA: "KDA (Kimi Delta Attention)",
    LINEAR: "linear-attention",
    MAMBA: "Mamba",
    MAMBA2: "Mamba-2",
    MLP: "MLP-only",
}


def _human(n: int | float | None) -> str:
    if n is None:
        return "unknown"
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


def _drafter_words(drafter: dict[str, Any]) -> str:
    details = [
        f"{key.replace('_', ' ')} {drafter[key]}" for key in ("block_size", "num_layers") if drafter.get(key)
    ]
    if drafter.get("target_layer_ids"):
        details.append(f"target layers {drafter['target_layer_ids']}")
    extra = f" ({', '.join(details)})" if details else ""
    return f"{drafter.get('kind')}{extra} at {drafter.get('path')}"


def _summary(arch: dict[str, Any], layout: LayerLayout) -> dict[str, str]:
    kinds = layout.kinds
    listing = ", ".join(
        f"{count} {_KIND_WORDS.get(kind, kind.replace('_', ' '))}" for kind, count in kinds.items()
    )
    if not kinds:
        mixers = "unknown: no layer count in config.json"
    elif layout.pure_attention:
        mixers = f"pure attention ({listing} layers)"
    elif layout.attention_layers == 0:
        mixers = f"no attention: pure SSM/linear ({listing} layers)"
    else:
        mixers = f"hybrid ({listing} layers)"

    att = arch["attention"]
    kind = att.get("type")
    if kind == "MLA":
        attention = (
            f"MLA: {att['num_heads']} heads over a shared KV latent of {att['kv_lora_rank']} "
            f"+ {att['qk_rope_head_dim']} rope dims"
        )
    elif kind in ("GQA", "MQA", "MHA"):
        attention = f"{kind}: {att['num_heads']} query heads, {att['num_kv_heads']} KV heads, head_dim {att['head_dim']}"
    elif kind == "none":
        attention = "none (no attention layers)"
    else:
        attention = "unknown (attention layers without a head count)"
    if att.get("sliding_window"):
        attention += f"; sliding window {att['sliding_window']} on {kinds.get('sliding_attention', 0)} layers"

    moe = arch["moe"]
    if moe.get("is_moe"):
        routing = ", ".join(
            f"{key} {moe[key]}"
            for key in ("scoring_func", "topk_method", "n_group", "topk_group")
            if moe.get(key)
        )
        experts = (
            f"MoE: {moe['routed_experts']} routed + {moe['shared_experts']} shared experts, "
            f"{moe['experts_per_token']} per token; {moe['moe_layers']} MoE layers, {moe['dense_layers']} dense"
        )
        experts += f" ({routing})" if routing else ""
    elif moe.get("is_moe") is False:
        experts = "dense (no experts)"
    else:
        experts = "unknown"

    params = arch["params"]
    size = (
        f"{arch['num_layers']} layers; {_human(params['total'])} parameters total, "
        f"{_human(params['active'])} active per token (source: {params['source']})"
    )
    spec = arch["speculative"]
    drafters = spec.get("drafters") or []
    speculative = f"{spec['mtp_layers']} MTP layer(s)" if spec.get("mtp_layers") else "no MTP layers"
    if drafters:
        speculative += "; drafters: " + ", ".join(_drafter_words(d) for d in drafters)
    else:
        speculative += "; no drafter found beside the model"
    return {
        "mixers": mixers,
        "attention": attention,
        "experts": experts,
        "size": size,
        "speculative": speculative,
    }
