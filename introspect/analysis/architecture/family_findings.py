"""Findings about how well introspect understood a config: family, layer types, layer count."""

from __future__ import annotations

import re

from introspect.analysis.architecture.config_view import ConfigView
from introspect.analysis.architecture.families import is_known
from introspect.analysis.architecture.layers import LayerLayout
from introspect.analysis.findings import Finding, Severity

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


def family_findings(
    view: ConfigView, model_type: str | None, text_type: str | None, layout: LayerLayout
) -> list[Finding]:
    out: list[Finding] = []
    # state-spaces' own mamba_ssm config has no model_type but an unmistakable ssm_cfg.
    known = is_known(model_type, text_type) or view.present("ssm_cfg", "attn_cfg")
    unread = sorted(
        key
        for key in view.data
        if key not in view.read and key not in _BENIGN and _STRUCTURAL.search(key) and not key.startswith("_")
    )
    if not known:
        named = ", ".join(unread[:20]) if unread else "none"
        out.append(Finding(
            Severity.INFO, "unknown-family",
            f"model_type {text_type or model_type or '(missing)'!r} is not a family introspect knows; "
            f"answers come from the generic keys. Config keys not understood: {named}"))
    if not layout.pattern:
        out.append(Finding(
            Severity.WARNING, "layers-unknown",
            "config.json states no usable layer count (num_hidden_layers / n_layer / num_layers)"))
    return out
