"""Null every derived figure that depends on a config value the view rejected, and say why.

A verdict computed with a bad key read as "absent" is a silent wrong number (a quoted
``"num_key_value_heads": "8"`` read as MHA, a 0-byte KV cache for a model with attention
layers). After the verdicts ran, the sections that met a rejected key, and the figures
derived from them (:data:`config_checks.DEPENDENTS`), are replaced by their unknown form;
the profile names the keys in ``architecture.invalid_config``.
"""

from __future__ import annotations

from introspect.analysis.architecture.attention import empty_attention
from introspect.analysis.architecture.config_checks import (
    constant_findings,
    invalid_findings,
    invalid_keys,
    show,
    voided_sections,
)
from introspect.analysis.architecture.config_view import ConfigView
from introspect.analysis.architecture.layers import LayerLayout
from introspect.analysis.architecture.mixers import attention_kv_elements
from introspect.analysis.architecture.moe import empty_moe
from introspect.analysis.architecture.params import ParamEstimate
from introspect.analysis.findings import Finding, Severity
from introspect.documents.profile_architecture import Architecture, InvalidConfig, InvalidValue, Layers


def _unknown_layers() -> Layers:
    return Layers(pattern=[], kinds={}, pure_attention=None, source=None, ffn=[], ffn_source=None)


def _geometry_gap(arch: Architecture, layout: LayerLayout, voided: dict[str, list[str]]) -> list[Finding]:
    """Attention layers without usable head geometry (a deleted num_attention_heads and no
    config-class default): the KV cache and the parameter estimate would count them as 0."""
    if "attention" in voided or not layout.attention_layers or attention_kv_elements(arch.attention):
        return []
    for figure in ("kv_cache", "params"):
        voided.setdefault(figure, []).append("num_attention_heads/head_dim (absent)")
    return [Finding(
        Severity.WARNING, "attention-geometry-unknown",
        f"config.json gives no usable num_attention_heads / num_key_value_heads / head_dim for its "
        f"{layout.attention_layers} attention layers, and the family's config class no default: "
        "KV cache and parameter estimate unknown",
        "add the attention head counts from the model's original config.json")]


def void_dependents(
    arch: Architecture, view: ConfigView, layout: LayerLayout, estimate: ParamEstimate,
    config_path: str | None, findings: list[Finding],
) -> tuple[LayerLayout, ParamEstimate]:
    """Apply the voids to ``arch`` in place; return the layout and estimate left to use."""
    invalid = invalid_keys(view.rejected, view.accepted)
    voided = voided_sections(view.touched, invalid)
    findings += invalid_findings(invalid, voided, config_path)
    findings += constant_findings(view.parent or view.data, config_path)  # parent: the wrapper, when nested
    findings += _geometry_gap(arch, layout, voided)
    if not voided and not invalid:
        return layout, estimate
    if "layers" in voided:
        arch.layers, layout = _unknown_layers(), LayerLayout([], None)
    if "attention" in voided:
        arch.attention = empty_attention(None)
    if "moe" in voided:
        arch.moe = empty_moe(None)
    if "kv_cache" in voided:
        arch.kv_cache = None
    if "params" in voided:
        estimate = ParamEstimate(None, None, None)
    arch.invalid_config = InvalidConfig(
        keys={key: InvalidValue(value=show(value), reason=reason) for key, (value, reason) in sorted(invalid.items())},
        unknown=dict(sorted(voided.items())),
    )
    return layout, estimate
