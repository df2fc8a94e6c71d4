"""Confirm per-layer verdicts from config.json against the safetensors headers. Pure.

The shard summaries carry, per tensor-name template, the layer ids it appears in
(``layer_ids``: the first number of the name). Two structures can be read off
them without ambiguity across families:

- routed experts: templates with an ``experts.#`` component exist only in MoE
  layers (DeepSeek/Kimi ``mlp.experts.#``, Mixtral ``block_sparse_moe.experts.#``,
  Qwen-MoE ...). Fused-expert layouts (gpt-oss ``experts.gate_up_proj``) have no
  per-expert number and are left unchecked.
- MLA: ``kv_a_proj_with_mqa`` (the shared KV latent projection) exists only in
  MLA attention layers (Kimi-Linear puts it in 7 of 27 layers).

- recurrent mixers (reported only when such tensors are seen): the decay / state
  parameters that only a recurrent layer owns: ``A_log`` (Mamba-1/2 ``MambaMixer`` /
  ``Mamba2Mixer``, Qwen3-Next ``Qwen3NextGatedDeltaNet``, Kimi-Linear
  ``KimiDeltaAttention``), MiniMax's lightning ``output_gate`` (transformers
  modeling_minimax.py ``MiniMaxLightningAttention``) and RWKV's ``time_decay``
  (modeling_rwkv.py ``RwkvSelfAttention``, stored under ``blocks.#``), RWKV-7's decay
  ``w_lora`` (fla rwkv7.py ``RWKV7Attention``).
- sparse indexer (reported only when such tensors are seen): ``.indexer.`` modules
  (DeepSeek-V3.2 ``Indexer``) belong to every attention layer of a config that
  declares ``index_topk``, and to none otherwise; in DeepSeek-V4 only to the
  compressed-sparse (CSA) layers.
- compressors (DeepSeek-V4, reported only when seen): ``.compressor.`` modules
  (modeling_deepseek_v4.py ``DeepseekV4CSACompressor`` / ``DeepseekV4HCACompressor``)
  exist exactly in the layers whose compress ratio is not 0.

Only ids below ``num_layers`` count: DeepSeek-style MTP layers are stored after
the decoder layers.
"""

from __future__ import annotations

import re

from introspect.analysis.findings import Finding, Severity
from introspect.documents.profile_architecture import Architecture, Attention, WeightsConfirmation
from introspect.remote.contract import SafetensorsFacts

_LAYER_TEMPLATE = re.compile(r"(?:^|\.)(?:layers|blocks)\.#\.")
_EXPERT = re.compile(r"\.experts\.#\.")
_RECURRENT = re.compile(r"\.A_log$|\.A_log\.|\.output_gate\.|\.time_decay$|\.w_lora\.")
_INDEXER = re.compile(r"\.indexer\.")
_COMPRESSOR = re.compile(r"\.compressor\.")
_COMPRESSED_KINDS = frozenset({"compressed_sparse_attention", "heavily_compressed_attention"})
# Layer kinds (parts of an ``a+b`` kind) that own a recurrent state; mirrors mixers.RECURRENT_KINDS
# without the short convolution (LFM2's conv layers have no A_log / decay tensor).
_RECURRENT_KINDS = frozenset({"gated_deltanet", "kda", "linear_attention", "mamba", "mamba2", "rwkv"})
_ATTENTION_KINDS = frozenset({"full_attention", "sliding_attention", "chunked_attention",
                              "compressed_sparse_attention", "heavily_compressed_attention"})


def _layers_with(safetensors: SafetensorsFacts, marker: re.Pattern[str] | str, limit: int) -> set[int] | None:
    found: set[int] = set()
    seen = False
    for shard in safetensors.get("shards") or []:
        if not isinstance(shard, dict):
            continue
        for group in shard.get("groups") or []:
            template = group.get("template") if isinstance(group, dict) else None
            if not isinstance(template, str) or not _LAYER_TEMPLATE.search(template):
                continue
            hit = marker.search(template) if isinstance(marker, re.Pattern) else marker in template
            if hit:
                seen = True
                found.update(i for i in group.get("layer_ids") or [] if isinstance(i, int) and 0 <= i < limit)
    return found if seen else None


def _span(ids: set[int]) -> str:
    ordered = sorted(ids)
    return ", ".join(map(str, ordered[:12])) + (f" ... ({len(ordered)} layers)" if len(ordered) > 12 else "")


def confirm_layers(arch: Architecture, safetensors: SafetensorsFacts | None
                   ) -> tuple[WeightsConfirmation | None, list[Finding]]:
    """Which per-layer verdicts the weights confirm, and a warning per disagreement."""
    num_layers = arch.num_layers
    if not isinstance(safetensors, dict) or num_layers is None or num_layers <= 0:
        return None, []
    findings: list[Finding] = []
    confirmed: dict[str, bool] = {}

    ffn = arch.layers.ffn
    stored = _layers_with(safetensors, _EXPERT, num_layers)
    if stored is not None and ffn is not None and len(ffn) == num_layers:
        expected = {i for i, kind in enumerate(ffn) if kind == "moe"}
        confirmed["moe_layers"] = stored == expected
        if stored != expected:
            findings.append(_disagree("MoE layers", expected, stored))

    pattern = arch.layers.pattern
    stored = _layers_with(safetensors, "kv_a_proj_with_mqa", num_layers)
    if stored is not None and arch.attention.type == "MLA" and pattern is not None:
        expected = {i for i, kind in enumerate(pattern) if "attention" in kind and kind != "linear_attention"}
        confirmed["mla_layers"] = stored == expected
        if stored != expected:
            findings.append(_disagree("MLA attention layers", expected, stored))
    if pattern is not None and len(pattern) == num_layers:
        _check_mixers(safetensors, pattern, arch.attention, num_layers, confirmed, findings)
    result = WeightsConfirmation(moe_layers=confirmed.pop("moe_layers", None),
                                 mla_layers=confirmed.pop("mla_layers", None), **confirmed)
    return result, findings


def _layers_of(pattern: list[str], kinds: frozenset[str]) -> set[int]:
    return {i for i, kind in enumerate(pattern) if kinds & set(kind.split("+"))}


def _check_mixers(
    safetensors: SafetensorsFacts, pattern: list[str], attention: Attention, num_layers: int,
    confirmed: dict[str, bool], findings: list[Finding],
) -> None:
    """Recurrent-mixer and sparse-indexer placement, added to ``confirmed`` only when their tensors exist."""
    # DeepSeek-V4 keeps its indexer in the CSA layers only; DeepSeek-V3.2 in every attention layer.
    sparse = _layers_of(pattern, frozenset({"compressed_sparse_attention"})) or _layers_of(pattern, _ATTENTION_KINDS)
    checks = (("recurrent_layers", "recurrent (linear-attention / SSM) layers", _RECURRENT,
               _layers_of(pattern, _RECURRENT_KINDS)),
              ("indexer_layers", "sparse-indexer layers", _INDEXER, sparse if attention.sparse_indexer else set()),
              ("compressed_layers", "compressed-attention layers", _COMPRESSOR, _layers_of(pattern, _COMPRESSED_KINDS)))
    for key, what, names, expected in checks:
        stored = _layers_with(safetensors, names, num_layers)
        if stored is None:
            continue
        confirmed[key] = stored == expected
        if stored != expected:
            findings.append(_disagree(what, expected, stored))


def _disagree(what: str, expected: set[int], stored: set[int]) -> Finding:
    if stored < expected:
        # Fewer layers than the config says: more likely shards missing than a wrong config.
        return Finding(
            Severity.WARNING, "weights-layer-mismatch",
            f"config.json puts {what} at [{_span(expected)}] but the safetensors headers lack "
            f"them at [{_span(expected - stored)}]",
            "check that every shard is present and readable (an interrupted download?)")
    return Finding(
        Severity.WARNING, "weights-layer-mismatch",
        f"config.json puts {what} at [{_span(expected)}] but the safetensors headers have them at "
        f"[{_span(stored)}]",
        "check that config.json belongs to these weights (first_k_dense_replace, layer types)")
