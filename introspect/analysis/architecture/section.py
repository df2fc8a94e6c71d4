"""The architecture section of the profile: one entry point over the verdict modules.

``analyze_architecture`` takes config.json as parsed (any JSON value, or None when
the file was missing), optionally the summarised safetensors headers and the
drafter configs found beside the model, and answers the five questions users ask
first: pure attention or hybrid, which attention, MoE or dense, how big, and
which speculative decoding. It is pure (no I/O) and never raises: garbage in
gives nulls and findings out.
"""

from __future__ import annotations

from typing import Any

from introspect.analysis.architecture.attention import analyze_attention, empty_attention, hidden_size
from introspect.analysis.architecture.config_view import MAX_SIZE, ConfigView, positive, sanitize, unwrap
from introspect.analysis.architecture.config_voids import void_dependents
from introspect.analysis.architecture.families import defaults_for, family_of, is_known
from introspect.analysis.architecture.family_findings import family_findings
from introspect.analysis.architecture.kv_cache import analyze_kv_cache, model_dtype
from introspect.analysis.architecture.layers import LayerLayout, analyze_layers, count_layers
from introspect.analysis.architecture.layout_unknown import kv_geometry_unknown, layout_unknown
from introspect.analysis.architecture.moe import analyze_moe, empty_moe
from introspect.analysis.architecture.params import ParamEstimate, estimate_params
from introspect.analysis.architecture.quantization import analyze_quantization
from introspect.analysis.architecture.safetensors_count import count_safetensors, implausible_finding
from introspect.analysis.architecture.speculative import analyze_speculative
from introspect.analysis.architecture.summary import human, summary
from introspect.analysis.architecture.weights_check import confirm_layers
from introspect.analysis.findings import Finding, Severity

CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "n_ctx", "max_sequence_length", "seq_length",
                "max_seq_len", "model_max_length",
                "context_length")  # RWKV: transformers configuration_rwkv.py RwkvConfig.context_length


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
            "assumptions": [],
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
    """Architecture section of the profile and its findings (JSON form). Never raises."""
    arch, findings = architecture_section(config, config_path=config_path, safetensors=safetensors,
                                          drafters=drafters)
    return arch, [f.to_json() for f in findings]


def architecture_section(
    config: object, *, config_path: str | None = None, safetensors: Any = None, drafters: Any = None,
    config_error: Any = None,
) -> tuple[dict[str, Any], list[Finding]]:
    """Architecture section of the profile and its typed findings. Never raises.

    ``config_error`` is the probe's error record for a config.json that exists but could not
    be used (not JSON, too deep, too large ...): its own finding names the cause, so the
    section then says nothing about a missing file."""
    try:
        if config is None and isinstance(config_error, dict):
            return empty_architecture(config_path if isinstance(config_path, str) else None), []
        return _analyze(config, config_path, safetensors, drafters)
    except Exception as exc:  # the last guard: a verdict bug must not cost the rest of the profile
        arch = empty_architecture(config_path if isinstance(config_path, str) else None)
        return arch, [
            Finding(
                Severity.ERROR,
                "analysis-failed",
                f"architecture analysis failed on this config: {type(exc).__name__}: {exc}"[:500],
                "report this config.json to the introspect maintainers",
            )
        ]


def _section(view: ConfigView, evidence: dict[str, Any], name: str, fn: Any, *args: Any) -> Any:
    """Run one verdict; keep the config keys it read as its evidence, and the bad ones it met."""
    saved, view.evidence, start = view.evidence, {}, len(view.rejections)
    try:
        return fn(*args)
    finally:
        evidence[name] = dict(view.evidence)
        view.evidence = saved | view.evidence
        view.touched[name] = view.rejections[start:]


def _invalid(config: object, arch: dict[str, Any]) -> tuple[dict[str, Any], list[Finding]]:
    """The answer for a missing config.json, or one that is not a JSON object."""
    if config is None:
        return arch, [Finding(Severity.ERROR, "config-missing", "the model directory has no config.json",
                              "add the model's config.json")]
    return arch, [Finding(Severity.ERROR, "config-invalid",
                          f"config.json holds a JSON {type(config).__name__}, not an object",
                          "replace config.json with the model's real configuration")]


def _analyze(
    config: object, config_path: str | None, safetensors: Any, drafters: Any
) -> tuple[dict[str, Any], list[Finding]]:
    arch = empty_architecture(config_path if isinstance(config_path, str) else None)
    root = sanitize(config) if config is not None else None
    if not isinstance(root, dict):
        return _invalid(config, arch)

    text, nesting = unwrap(root)
    model_type = root.get("model_type") if isinstance(root.get("model_type"), str) else None
    text_type = text.get("model_type") if isinstance(text.get("model_type"), str) else None
    text_type = text_type or model_type
    prefix = ".".join(nesting) + "." if nesting else ""
    view = ConfigView(text, parent=root if nesting else None, defaults=defaults_for(model_type, text_type),
                      prefix=prefix, model_type=text_type)
    root_view = ConfigView(root)
    evidence: dict[str, Any] = {}
    _section(view, evidence, "identity", _identity, arch, view, root_view, evidence, model_type, text_type, nesting)
    evidence.pop("identity")
    layout, estimate = _verdicts(arch, view, root_view, evidence, text_type, drafters)

    findings: list[Finding] = []
    layout, estimate = void_dependents(arch, view, layout, estimate, config_path, findings)
    quant, num_layers = arch["quantization"], arch["num_layers"]
    stored = count_safetensors(safetensors, quant, num_layers)
    findings.extend(f for f in [implausible_finding(stored)] if f is not None)
    arch["params"], arch["mtp"] = _params(estimate, stored, findings)
    # Per-layer verdicts confirmed by the weights' headers where they can be read off them.
    arch["confirmed_by_weights"], layer_findings = confirm_layers(arch, safetensors)
    findings.extend(layer_findings)
    findings.extend(family_findings(view, model_type, text_type, layout))
    known = is_known(model_type, text_type)
    unknown = layout_unknown(arch, view, layout, known)
    findings.extend(unknown or kv_geometry_unknown(arch, view, layout, known))
    if unknown and isinstance(arch["params"], dict):
        arch["params"]["assumptions"].append("every layer a full-attention layer (the layout was not understood)")
    if not is_known(model_type, text_type) and not view.present("ssm_cfg", "attn_cfg"):
        arch["confidence"] = low_confidence(model_type, text_type)
    arch["summary"] = summary(arch, layout)
    return arch, findings


def _identity(
    arch: dict[str, Any], view: ConfigView, root_view: ConfigView, evidence: dict[str, Any],
    model_type: str | None, text_type: str | None, nesting: list[str],
) -> None:
    """The section's first fields: which model, how many layers, how wide, how long a context."""
    num_layers, _ = _section(view, evidence, "num_layers", count_layers, view)
    max_context = positive(view.get_int(*CONTEXT_KEYS, maximum=MAX_SIZE))
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


def _verdicts(
    arch: dict[str, Any], view: ConfigView, root_view: ConfigView, evidence: dict[str, Any],
    text_type: str | None, drafters: Any,
) -> tuple[LayerLayout, ParamEstimate]:
    """Every verdict section, each with the config keys it read as its evidence."""
    family = family_of(text_type)
    layout: LayerLayout = _section(view, evidence, "layers", analyze_layers, view, family, arch["max_context"])
    attention = _section(view, evidence, "attention", analyze_attention, view, family, layout)
    moe = _section(view, evidence, "moe", analyze_moe, view, family, layout)
    quant = _section(view, evidence, "quantization", analyze_quantization, view)
    estimate = _section(
        view, evidence, "params", estimate_params, view, root_view, family, layout, attention, moe
    )
    kv = _section(view, evidence, "kv_cache", analyze_kv_cache, view, layout, attention, arch["hidden_size"],
                  family)
    spec = _section(view, evidence, "speculative", analyze_speculative, view, drafters)
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
    return layout, estimate


# The verdicts a family row can change: for a family without a row they rest on generic key names.
GUESSED_VERDICTS = ("layers", "attention", "moe", "params", "kv_cache")


def low_confidence(model_type: str | None, text_type: str | None) -> dict[str, Any]:
    """The confidence marker of a config whose family has no row: every verdict is a guess from generic keys."""
    name = text_type or model_type or "(missing)"
    return {"level": "low", "reason": f"model_type {name!r} is not a family introspect knows",
            "verdicts": list(GUESSED_VERDICTS)}


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
        "assumptions": list(estimate.assumptions),
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
                    Finding(
                        Severity.WARNING,
                        "params-mismatch",
                        f"config.json implies {human(config_text)} text-model parameters but the safetensors "
                        f"headers hold {human(stored_text)} ({gap:.1%} apart)",
                        "check that config.json belongs to these weights (a re-saved or truncated checkpoint?)",
                    )
                )
    return params, mtp
