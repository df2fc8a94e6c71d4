"""The architecture section of the profile: one entry point over the verdict modules.

``analyze_architecture`` takes config.json as parsed (any JSON value, or None when
the file was missing), optionally the summarised safetensors headers and the
drafter configs found beside the model, and answers the five questions users ask
first: pure attention or hybrid, which attention, MoE or dense, how big, and
which speculative decoding. It is pure (no I/O) and never raises: garbage in
gives nulls and findings out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

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
from introspect.documents.profile_architecture import (
    Architecture,
    Confidence,
    Evidence,
    Layers,
    Mtp,
    ParamCounts,
    Params,
    SafetensorsCount,
    Speculative,
    Summary,
)
from introspect.remote.contract import JSONObject, SafetensorsFacts

T = TypeVar("T")

CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "n_ctx", "max_sequence_length", "seq_length",
                "max_seq_len", "model_max_length",
                "context_length")  # RWKV: transformers configuration_rwkv.py RwkvConfig.context_length


def empty_architecture(config_path: str | None) -> Architecture:
    """The section's layout with every field null: what a missing or broken config yields."""
    return Architecture(
        model_type=None, text_model_type=None, architectures=None, config_path=config_path, nesting=[],
        num_layers=None, hidden_size=None, vocab_size=None, max_context=None, dtype=None,
        attention=empty_attention(None), moe=empty_moe(None),
        layers=Layers(pattern=[], kinds={}, pure_attention=None),
        params=Params(total=None, active=None, embedding=None, source=None,
                      config_estimate=ParamCounts(total=None, active=None), safetensors=None, assumptions=[]),
        mtp=Mtp(layers=0, params=None, active=None, source=None),
        quantization=None, kv_cache=None,
        speculative=Speculative(mtp_layers=0, mtp_source=None, drafters=[]),
        evidence=Evidence(), summary=Summary(),
    )


def analyze_architecture(
    config: object,
    *,
    config_path: str | None = None,
    safetensors: SafetensorsFacts | None = None,
    drafters: object = None,
) -> tuple[dict, list[dict]]:
    """Architecture section of the profile and its findings in their JSON form (the model listing's
    summary reads it). Never raises."""
    arch, findings = architecture_section(config, config_path=config_path, safetensors=safetensors,
                                          drafters=drafters)
    return arch.to_dict(), [f.to_json() for f in findings]


def architecture_section(
    config: object, *, config_path: str | None = None, safetensors: SafetensorsFacts | None = None,
    drafters: object = None, config_error: object = None,
) -> tuple[Architecture, list[Finding]]:
    """Architecture section of the profile and its typed findings. Never raises.

    ``config`` is config.json as parsed (any JSON value; None when missing), ``safetensors`` and
    ``drafters`` the raw facts' sections as read. ``config_error`` is the probe's error record for a
    config.json that exists but could not be used (not JSON, too deep, too large ...): its own finding
    names the cause, so the section then says nothing about a missing file."""
    path = config_path if isinstance(config_path, str) else None
    try:
        if config is None and isinstance(config_error, dict):
            return empty_architecture(path), []
        return _analyze(config, path, safetensors, drafters)
    except Exception as exc:  # the last guard: a verdict bug must not cost the rest of the profile
        return empty_architecture(path), [
            Finding(
                Severity.ERROR,
                "analysis-failed",
                f"architecture analysis failed on this config: {type(exc).__name__}: {exc}"[:500],
                "report this config.json to the introspect maintainers",
            )
        ]


def _section(view: ConfigView, evidence: dict[str, JSONObject], name: str, fn: Callable[..., T],
             *args: object) -> T:
    """Run one verdict; keep the config keys it read as its evidence, and the bad ones it met."""
    saved, view.evidence, start = view.evidence, {}, len(view.rejections)
    try:
        return fn(*args)
    finally:
        evidence[name] = dict(view.evidence)
        view.evidence = saved | view.evidence
        view.touched[name] = view.rejections[start:]


def _invalid(config: object, arch: Architecture) -> tuple[Architecture, list[Finding]]:
    """The answer for a missing config.json, or one that is not a JSON object."""
    if config is None:
        return arch, [Finding(Severity.ERROR, "config-missing", "the model directory has no config.json",
                              "add the model's config.json")]
    return arch, [Finding(Severity.ERROR, "config-invalid",
                          f"config.json holds a JSON {type(config).__name__}, not an object",
                          "replace config.json with the model's real configuration")]


def _analyze(
    config: object, config_path: str | None, safetensors: SafetensorsFacts | None, drafters: object
) -> tuple[Architecture, list[Finding]]:
    arch = empty_architecture(config_path)
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
    evidence: dict[str, JSONObject] = {}
    _section(view, evidence, "identity", _identity, arch, view, root_view, evidence, model_type, text_type, nesting)
    evidence.pop("identity")
    layout, estimate = _verdicts(arch, view, root_view, evidence, text_type, drafters)

    findings: list[Finding] = []
    layout, estimate = void_dependents(arch, view, layout, estimate, config_path, findings)
    stored = count_safetensors(safetensors, arch.quantization, arch.num_layers)
    findings.extend(f for f in [implausible_finding(stored)] if f is not None)
    arch.params, arch.mtp = _params(estimate, stored, findings)
    # Per-layer verdicts confirmed by the weights' headers where they can be read off them.
    arch.confirmed_by_weights, layer_findings = confirm_layers(arch, safetensors)
    findings.extend(layer_findings)
    findings.extend(family_findings(view, model_type, text_type, layout))
    known = is_known(model_type, text_type)
    unknown = layout_unknown(arch, view, layout, known)
    findings.extend(unknown or kv_geometry_unknown(arch, view, layout, known))
    if unknown:
        arch.params.assumptions.append("every layer a full-attention layer (the layout was not understood)")
    if not known and not view.present("ssm_cfg", "attn_cfg"):
        arch.confidence = low_confidence(model_type, text_type)
    arch.summary = summary(arch, layout)
    return arch, findings


def _identity(
    arch: Architecture, view: ConfigView, root_view: ConfigView, evidence: dict[str, JSONObject],
    model_type: str | None, text_type: str | None, nesting: list[str],
) -> None:
    """The section's first fields: which model, how many layers, how wide, how long a context."""
    num_layers, _ = _section(view, evidence, "num_layers", count_layers, view)
    max_context = positive(view.get_int(*CONTEXT_KEYS, maximum=MAX_SIZE))
    arch.model_type = model_type
    arch.text_model_type = text_type
    arch.architectures = root_view.get_str_list("architectures")
    arch.nesting = nesting
    arch.num_layers = num_layers
    arch.hidden_size = hidden_size(view)
    arch.vocab_size = positive(view.get_int("vocab_size", "n_vocab", "padded_vocab_size"))
    arch.max_context = max_context
    arch.dtype = model_dtype(view)
    if nesting:
        arch.text_architectures = view.get_str_list("architectures")


def _verdicts(
    arch: Architecture, view: ConfigView, root_view: ConfigView, evidence: dict[str, JSONObject],
    text_type: str | None, drafters: object,
) -> tuple[LayerLayout, ParamEstimate]:
    """Every verdict section, each with the config keys it read as its evidence."""
    family = family_of(text_type)
    layout = _section(view, evidence, "layers", analyze_layers, view, family, arch.max_context)
    attention = _section(view, evidence, "attention", analyze_attention, view, family, layout)
    moe = _section(view, evidence, "moe", analyze_moe, view, family, layout)
    quant = _section(view, evidence, "quantization", analyze_quantization, view)
    estimate = _section(
        view, evidence, "params", estimate_params, view, root_view, family, layout, attention, moe
    )
    kv = _section(view, evidence, "kv_cache", analyze_kv_cache, view, layout, attention, arch.hidden_size, family)
    spec = _section(view, evidence, "speculative", analyze_speculative, view, drafters)
    arch.attention = attention
    arch.moe = moe.section
    arch.layers = Layers(pattern=list(layout.pattern), kinds=layout.kinds, pure_attention=layout.pure_attention,
                         source=layout.source, ffn=moe.ffn, ffn_source=moe.source)
    arch.quantization = quant
    arch.kv_cache = kv if layout.pattern else None
    arch.speculative = spec
    arch.evidence = Evidence(**evidence)
    return layout, estimate


# The verdicts a family row can change: for a family without a row they rest on generic key names.
GUESSED_VERDICTS = ("layers", "attention", "moe", "params", "kv_cache")


def low_confidence(model_type: str | None, text_type: str | None) -> Confidence:
    """The confidence marker of a config whose family has no row: every verdict is a guess from generic keys."""
    name = text_type or model_type or "(missing)"
    return Confidence(level="low", reason=f"model_type {name!r} is not a family introspect knows",
                      verdicts=list(GUESSED_VERDICTS))


def _params(
    estimate: ParamEstimate, sf: SafetensorsCount | None, findings: list[Finding]
) -> tuple[Params, Mtp]:
    params = Params(
        total=estimate.total,
        active=estimate.active,
        embedding=estimate.embedding,
        source="config" if estimate.total is not None else None,
        config_estimate=ParamCounts(total=estimate.total, active=estimate.active),
        safetensors=sf,
        breakdown=estimate.breakdown,
        vision=estimate.vision,
        assumptions=list(estimate.assumptions),
    )
    mtp = estimate.mtp or Mtp(layers=0, params=None, active=None, source=None)
    if sf is not None and sf.total > 0:
        # The headers are the truth for what is stored; MTP layers stay apart as in the estimate.
        params.total = sf.total - sf.mtp
        params.source = "safetensors"
        mtp.safetensors = sf.mtp
        if estimate.total:
            config_text = estimate.total - (estimate.vision or 0)
            stored_text = sf.text
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
