"""The meta-device witness settles the per-layer verdicts: kinds, pure attention, the KV cache. Pure.

The config rules read config.json; the model built on the meta device is what will run.
Where the built model's layers could all be identified (:mod:`introspect.analysis.architecture.code_layers`)
they settle ``layers.pattern`` / ``kinds`` / ``pure_attention`` and the per-token KV cache,
summed per layer from each layer's own K/V widths (only layers that keep per-token K/V:
cross-attention and recurrent state are reported per sequence). A verdict the rules stated
differently is a ``witnesses-disagree`` finding with both values.
"""

from __future__ import annotations

from collections import Counter

from introspect.analysis.architecture.code_layers import CodeLayer, code_layers
from introspect.analysis.architecture.kinds import CHUNKED, CROSS, RECURRENT, SLIDING
from introspect.analysis.architecture.kv_cache import DTYPE_BYTES, kv_section
from introspect.analysis.architecture.layers import LayerLayout
from introspect.analysis.architecture.mixer_math import indexer_key_bytes
from introspect.analysis.architecture.mixers import ATTENTION_KINDS, RECURRENT_KINDS
from introspect.analysis.architecture.state_dtypes import rescaled_state
from introspect.analysis.architecture.summary import resummarise_layers
from introspect.analysis.findings import Finding, Severity
from introspect.documents.profile_architecture import Architecture, KvCache, KvKind
from introspect.remote.contract import JSONObject

WHY = "read off each decoder layer the model's own code built on the meta device"


def settle_layers_from_code(arch: Architecture, probe: JSONObject) -> list[Finding]:
    """Settle the layer kinds and the KV cache from the built model (``probe``: the model-code task's
    reply, as read); the findings. No-op without one."""
    heads, head_dim = arch.attention.num_heads, arch.attention.head_dim
    layers = code_layers(probe, heads * head_dim if heads is not None and head_dim is not None else None)
    if layers is None or any(layer.kind is None for layer in layers):
        return []
    if arch.kv_cache is not None and arch.kv_cache.compress_rates is not None:
        # DeepSeek-V4's compressed attention (modeling_deepseek_v4.py) keeps a window plus K/V that grow at
        # 1/ratio per token, which no module attribute or projection width shows: the rules' per-kind
        # reading of compress_ratios stays (compressed_attention.py).
        return []
    section = arch.layers
    pattern = _with_rules_flavour([str(layer.kind) for layer in layers], layers, section.pattern)
    layout = LayerLayout(pattern, "model_code")
    findings = _disagree_kinds(section.kinds, layout)
    section.pattern, section.kinds, section.pure_attention = pattern, layout.kinds, layout.pure_attention
    section.settled_by, section.understood = "model_code", True
    section.unknown_keys = None  # the code identified every layer: nothing is left not understood
    section.model_fields_set.discard("unknown_keys")
    if not layout.attention_layers:
        said = arch.attention.type
        if said is not None and said != "none":
            findings.append(_disagree("attention type", said, "none"))
        arch.attention.type = "none"  # a recurrent model's heads are not attention heads
    arch.kv_cache, kv_findings = _kv_cache(arch, layers, layout)
    resummarise_layers(arch)
    return findings + kv_findings


def _with_rules_flavour(pattern: list[str], layers: list[CodeLayer], rules: list[str] | None) -> list[str]:
    """Full or windowed, for attention layers whose module does not say, and which recurrent mixer, for one
    the code shows to be recurrent but of no kind it can name: the config's reading."""
    if rules is None or len(rules) != len(pattern):
        return pattern
    return [rules[i] if (not layer.flavour_shown and rules[i] in (SLIDING, CHUNKED))
            or (kind == RECURRENT and rules[i] in RECURRENT_KINDS) else kind
            for i, (kind, layer) in enumerate(zip(pattern, layers, strict=True))]


def _disagree(what: str, rules: str | int, code: str | int) -> Finding:
    return Finding(Severity.WARNING, "witnesses-disagree",
                   f"{what}: the config rules say {rules}, the model's code {code}",
                   "# the model's code is what runs; check the layout keys the rules read (evidence.layers)",
                   {"quantity": what, "witnesses": ["config", "model_code"], "values": [rules, code]})


def generic_kinds(kinds: dict[str, int]) -> dict[str, int]:
    """Layer kinds with every recurrent mixer named "recurrent": a reading that only knows a layer keeps
    a state is less precise than one that names the mixer, not at odds with it."""
    out: dict[str, int] = {}
    for kind, count in kinds.items():
        parts = "+".join(RECURRENT if p in RECURRENT_KINDS else p for p in str(kind).split("+"))
        out[parts] = out.get(parts, 0) + int(count)
    return out


def _disagree_kinds(rules: dict[str, int] | None, layout: LayerLayout) -> list[Finding]:
    if rules is None or generic_kinds(rules) == generic_kinds(layout.kinds):
        return []
    return [_disagree("layer kinds", _words(rules), _words(layout.kinds))]


def _words(kinds: dict[str, int]) -> str:
    return ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items()))


def _kv_cache(arch: Architecture, layers: list[CodeLayer], layout: LayerLayout) -> tuple[KvCache, list[Finding]]:
    rules = arch.kv_cache
    dtype = arch.dtype
    attention = arch.attention
    width = DTYPE_BYTES.get(str(dtype), 2)
    unknown = 0
    # A DSA layer's indexer caches its own key beside the MLA latent (vLLM deepseek_v2.py
    # DeepseekV32IndexerCache): fp8 plus a 4-byte scale per 128 elements (mixer_math.indexer_key_bytes).
    indexer = indexer_key_bytes(attention)
    per_kind = {kind: KvKind(layers=count) for kind, count in sorted(layout.components.items())}
    widths: dict[str, Counter[int]] = {}  # per kind, the bytes each of its (single-mixer) layers keeps
    for layer, kind in zip(layers, layout.pattern, strict=True):  # the settled kinds: the config's flavour kept
        for part in kind.split("+"):
            if part not in ATTENTION_KINDS:
                continue
            entry = per_kind[part]
            if layer.kv_elements is None:
                unknown += 1
            elif layer.kv_shared:
                entry.kv_shared_layers = (entry.kv_shared_layers or 0) + 1
            else:
                layer_bytes = layer.kv_elements * width + (indexer if part != SLIDING else 0)
                entry.bytes_per_token = (entry.bytes_per_token or 0) + layer_bytes
                if "+" not in kind:
                    widths.setdefault(part, Counter())[layer_bytes] += 1
    for part, seen in widths.items():
        if len(seen) == 1:  # every layer of the kind keeps the same width (else the per-layer figure is omitted)
            per_kind[part].bytes_per_token_per_layer = next(iter(seen))
    _keep_rules_state(per_kind, rules.per_kind if rules is not None else {})
    if CROSS in per_kind:
        per_kind[CROSS].note = "K/V of the image/encoder input, cached once per sequence, not per token"
    kv = kv_section(per_kind, attention, dtype, width)
    kv.settled_by, kv.why = "model_code", WHY
    if unknown:
        kv.bytes_per_token = kv.bytes_per_token_beyond_window = None
    attention_bytes = kv.bytes_per_token
    findings = []
    if unknown:
        findings.append(Finding(Severity.WARNING, "kv-width-unknown",
                                f"{unknown} attention layer(s) of the built model show no K/V projection widths: "
                                "the KV cache per token is unknown",
                                "# report the model's attention class to the introspect maintainers"))
    said = rules.bytes_per_token if rules is not None else None
    if said is not None and attention_bytes is not None and said != attention_bytes:
        findings.append(_disagree("KV cache bytes per token", said, attention_bytes))
    return kv, findings


def _keep_rules_state(per_kind: dict[str, KvKind], rules: dict[str, KvKind]) -> None:
    """Recurrent state per sequence: the rules' formula for the same kind over the same layer count (a
    recurrent kind's entry holds nothing else yet: only attention kinds were filled from the code)."""
    for kind, entry in per_kind.items():
        theirs = rules.get(kind)
        if kind not in ATTENTION_KINDS and theirs is not None and theirs.state_bytes_per_layer is not None:
            per_kind[kind] = rescaled_state(theirs, entry.layers)  # the engines' state dtypes kept too
