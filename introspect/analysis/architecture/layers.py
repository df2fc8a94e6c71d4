"""Per-layer token-mixer kinds: is the model pure attention or a hybrid?

Families state their layer layout in at least eight different ways (an explicit
``layer_types`` list, Kimi-Linear's 1-based ``kda_layers``, Qwen3-Next's
``full_attention_interval``, Jamba's periods and offsets, Nemotron-H's pattern
string, MiniMax's ``attn_type_list``, Gemma's implied alternation, ...). This
module turns each into one list with one canonical kind per layer.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from introspect.analysis.architecture.compressed_attention import RATIO_KINDS
from introspect.analysis.architecture.config_view import MAX_LAYERS, ConfigView, positive
from introspect.analysis.architecture.families import ATTN_LAYER_INDICES, PARALLEL_HYBRID, Family
from introspect.analysis.architecture.kinds import (
    CHUNKED,
    CROSS,
    FULL,
    GDN,
    KDA,
    LINEAR,
    MAMBA,
    MAMBA2,
    MLP,
    RECURRENT,
    SLIDING,
)
from introspect.analysis.architecture.mixers import (
    ATTENTION_KINDS,
    FIXED_NAMES,
    MARKER_ORDER,
    MIXERS,
    RECURRENT_KINDS,
)

__all__ = ["CHUNKED", "FULL", "GDN", "KDA", "LINEAR", "MAMBA", "MAMBA2", "MLP", "SLIDING", "LayerLayout",
           "analyze_layers", "canonical_kind", "count_layers", "recurrent_kind"]


# The readings of a config that names no layout the rules know: right for a uniform family,
# a guess for any other (introspect.analysis.architecture.layout_unknown decides which).
ALL_FULL = "num_hidden_layers (no layout keys: all full attention)"
ALL_SLIDING = "sliding_window"
FALLBACK_SOURCES = frozenset({ALL_FULL, ALL_SLIDING})


@dataclass
class LayerLayout:
    """The per-layer mixer kinds and where they were read from."""

    pattern: list[str]
    source: str | None
    unknown: list[str] = field(default_factory=list)  # layer-type names not understood

    @property
    def kinds(self) -> dict[str, int]:
        return dict(Counter(self.pattern))

    @property
    def components(self) -> Counter[str]:
        """Layers per single mixer kind, a parallel ``a+b`` layer counting for both."""
        out: Counter[str] = Counter()
        for kind in self.pattern:
            out.update(kind.split("+"))
        return out

    @property
    def pure_attention(self) -> bool:
        return not any(part in RECURRENT_KINDS for part in self.components)

    @property
    def attention_layers(self) -> int:
        return sum(1 for kind in self.pattern if any(p in ATTENTION_KINDS for p in kind.split("+")))

    def as_dict(self) -> dict[str, object]:
        return {"pattern": list(self.pattern), "kinds": self.kinds, "pure_attention": self.pure_attention}


def recurrent_kind(view: ConfigView, family: Family) -> str:
    """Which recurrent mixer a family's generic "linear_attention"/"mamba" layers are."""
    for kind in MARKER_ORDER:
        if family.recurrent == kind or view.present(*MIXERS[kind].markers):
            return kind
    # A family row without its own recurrent kind means lightning attention (MiniMax); a family
    # without a row says only "some recurrent mixer", whose state no formula here describes.
    return LINEAR if family.known else RECURRENT


def canonical_kind(name: str, recurrent: str, known: bool = True) -> str | None:
    """One layer-type name as written in a config, in introspect's vocabulary (None: not understood).

    "hybrid" means Zamba2's shared attention block beside a Mamba-2 mixer only in a family whose row
    says so: transformers 5.24's ZayaConfig also writes "hybrid" for every layer, and its layers hold
    attention with convolutions on q and k, no Mamba mixer (modeling_zaya.py ZayaCCAProjection), so in a
    family without a row the name is not understood."""
    key = name.strip().lower().replace("-", "_")
    if key == "linear_attention":
        return recurrent
    if key == "mamba":
        return MAMBA2 if recurrent == MAMBA2 else MAMBA
    if key == "hybrid":  # Zamba2: a shared attention block beside the Mamba-2 mixer
        if not known:
            return None
        return f"{FULL}+{MAMBA2 if recurrent in (LINEAR, MAMBA2) else recurrent}"
    return FIXED_NAMES.get(key)


def _from_names(names: list[str], recurrent: str, source: str, known: bool) -> LayerLayout:
    pattern: list[str] = []
    unknown: list[str] = []
    for name in names:
        kind = canonical_kind(name, recurrent, known)
        if kind is None:
            unknown.append(name)
            kind = FULL  # a placeholder: layout_unknown nulls the verdicts that rest on it
        pattern.append(kind)
    return LayerLayout(pattern, source, sorted(set(unknown)))


_PATTERN_CHARS = {"M": MAMBA2, "*": FULL, "-": MLP, "E": MLP}


def _nemotron_pattern(text: str) -> tuple[list[str], list[str]]:
    unknown = sorted({ch for ch in text if ch not in _PATTERN_CHARS})
    return [_PATTERN_CHARS.get(ch, FULL) for ch in text], unknown


def count_layers(view: ConfigView) -> tuple[int | None, str | None]:
    """Number of decoder layers, with the key it came from."""
    n = positive(view.get_int("num_hidden_layers", "n_layer", "num_layers", "n_layers", maximum=MAX_LAYERS))
    if n is not None:
        return n, "num_hidden_layers"
    # Nemotron-H saved by transformers 5 drops num_hidden_layers: the pattern is the truth.
    text = view.get_str("hybrid_override_pattern")
    if text and len(text) <= MAX_LAYERS:
        return len(text), "hybrid_override_pattern"
    names = view.get_str_list("layer_types", "layers_block_type")
    if names and len(names) <= MAX_LAYERS:
        return len(names), "layer_types"
    return None, None


def _sliding_layout(
    view: ConfigView, family: Family, n: int, max_context: int | None
) -> LayerLayout | None:
    window = positive(view.get_int("sliding_window", "sliding_window_size"))
    if view.get_bool("use_sliding_window") is False or window is None:
        return None
    if max_context is not None and window >= max_context:
        return None  # a window as long as the context slides nothing (Phi-3-128k)
    period = positive(view.get_int("sliding_window_pattern", maximum=MAX_LAYERS))
    if period is None:
        period = family.sliding_period
    if period is not None:
        # transformers: layer i slides unless (i + 1) is a multiple of the period.
        return LayerLayout(
            [SLIDING if (i + 1) % period else FULL for i in range(n)], "sliding_window_pattern"
        )
    if view.present("max_window_layers") and view.get_bool("use_sliding_window"):
        # Qwen2: only layers from max_window_layers on use the window.
        first = view.get_int("max_window_layers", maximum=MAX_LAYERS) or 0
        return LayerLayout([SLIDING if i >= first else FULL for i in range(n)], "max_window_layers")
    return LayerLayout([SLIDING] * n, ALL_SLIDING)


def _ssm_only(view: ConfigView, family: Family, n: int) -> LayerLayout | None:
    if family.ssm_only and family.recurrent is not None:
        return LayerLayout([family.recurrent] * n, "model_type")
    ssm_cfg = view.get_dict("ssm_cfg")
    if ssm_cfg is not None or (family.model_type is None and view.present("d_model") and not view.present("n_head")):
        # state-spaces/mamba_ssm format: {"d_model", "n_layer", "ssm_cfg": {"layer": "Mamba2"}}
        kind = MAMBA2 if (ssm_cfg or {}).get("layer") == "Mamba2" else MAMBA
        attn = set(view.get_int_list("attn_layer_idx", maximum=MAX_LAYERS) or [])
        return LayerLayout([FULL if i in attn else kind for i in range(n)], "ssm_cfg")
    return None


def analyze_layers(view: ConfigView, family: Family, max_context: int | None) -> LayerLayout:
    """The per-layer kinds of the text model (empty when the layer count is unknown)."""
    n, _ = count_layers(view)
    if n is None:
        return LayerLayout([], None)
    recurrent = recurrent_kind(view, family)
    indexed = _indexed_layout(view, family, n)
    if indexed is not None:
        return indexed

    text = view.get_str("hybrid_override_pattern")
    if text and len(text) == n:
        pattern, unknown = _nemotron_pattern(text)
        return LayerLayout(pattern, "hybrid_override_pattern", unknown)

    names = view.get_str_list("layer_types", "layers_block_type")
    if names and len(names) == n:
        key = "layer_types" if view.present("layer_types") else "layers_block_type"
        return _from_names(names, recurrent, key, family.known)

    derived = (_compressed_layout(view, n) or _chunked_layout(view, family, n) or _kimi_linear(view, n)
               or _cross_attention(view, n) or _block_types(view, n))
    if derived is not None:
        return derived

    interval = positive(view.get_int("full_attention_interval", maximum=MAX_LAYERS))
    if interval is not None:
        # Qwen3-Next: every interval-th layer (1-based) is full attention, the rest Gated DeltaNet.
        kind = recurrent if recurrent != LINEAR else GDN
        return LayerLayout(
            [FULL if (i + 1) % interval == 0 else kind for i in range(n)], "full_attention_interval"
        )

    period = positive(view.get_int("attn_layer_period", maximum=MAX_LAYERS))
    if period is not None:
        # Jamba: attention iff i % period == offset, Mamba elsewhere.
        offset = view.get_int("attn_layer_offset", maximum=MAX_LAYERS) or 0
        kind = MAMBA if recurrent in (LINEAR, MAMBA) else recurrent
        return LayerLayout(
            [FULL if i % period == offset else kind for i in range(n)], "attn_layer_period/offset"
        )

    types = view.get_int_list("attn_type_list", maximum=1)
    if types is not None and len(types) == n:
        # MiniMax: 1 = softmax attention, 0 = lightning (linear) attention.
        return LayerLayout([FULL if t == 1 else LINEAR for t in types], "attn_type_list")

    ssm = _ssm_only(view, family, n)
    if ssm is not None:
        return ssm

    sliding = _sliding_layout(view, family, n, max_context)
    if sliding is not None:
        return sliding
    return LayerLayout([FULL] * n, ALL_FULL)


def _compressed_layout(view: ConfigView, n: int) -> LayerLayout | None:
    """DeepSeek-V4 compress_ratios: transformers configuration_deepseek_v4.py maps 0 / 4 / 128 to the
    sliding / CSA / HCA layer types; entries past num_hidden_layers belong to the MTP layers."""
    ratios = view.get_int_list("compress_ratios", maximum=1 << 20)
    if ratios is None or len(ratios) < n:
        return None
    ratios = ratios[:n]
    unknown = sorted({f"compress ratio {r}" for r in ratios if r not in RATIO_KINDS})
    return LayerLayout([RATIO_KINDS.get(r, FULL) for r in ratios], "compress_ratios", unknown)


def _chunked_layout(view: ConfigView, family: Family, n: int) -> LayerLayout | None:
    """Llama-4: the layer types the config class derives when the file lists none.

    transformers configuration_llama4.py Llama4TextConfig: ``no_rope_layers`` (1 = the layer uses RoPE)
    defaults to ``int((i + 1) % no_rope_layer_interval != 0)`` (an empty list counts as absent), and
    ``layer_types[i]`` is "chunked_attention" where no_rope_layers[i] is 1, "full_attention" (NoPE) elsewhere.
    """
    if not family.chunked_from_no_rope or positive(view.get_int("attention_chunk_size")) is None:
        return None
    flags = view.get_int_list("no_rope_layers", maximum=1)
    source = "attention_chunk_size + no_rope_layers"
    if not flags or len(flags) != n:
        interval = positive(view.get_int("no_rope_layer_interval", maximum=MAX_LAYERS)) or 4
        flags = [int((i + 1) % interval != 0) for i in range(n)]
        source = "attention_chunk_size + no_rope_layer_interval"
    return LayerLayout([CHUNKED if flag else FULL for flag in flags], source)


def _indexed_layout(view: ConfigView, family: Family, n: int) -> LayerLayout | None:
    """Layouts that list the attention layers by index (Falcon-H1 in parallel, Bamba in turn)."""
    if family.layout == PARALLEL_HYBRID or (view.present("mamba_d_ssm") and view.present("num_attention_heads")):
        # Falcon-H1: attention and Mamba-2 side by side in every layer.
        attn = view.get_int_list("attn_layer_indices", maximum=MAX_LAYERS)
        both = f"{FULL}+{MAMBA2}"
        if attn is not None:
            return LayerLayout([both if i in set(attn) else MAMBA2 for i in range(n)], "attn_layer_indices")
        return LayerLayout([both] * n, "model_type (parallel hybrid)")
    if family.layout == ATTN_LAYER_INDICES:
        # Bamba: BambaConfig.layers_block_type is "attention" at attn_layer_indices, "mamba" elsewhere.
        listed = view.get_int_list("attn_layer_indices", maximum=MAX_LAYERS)
        if listed is not None:
            chosen = set(listed)
            return LayerLayout([FULL if i in chosen else MAMBA2 for i in range(n)], "attn_layer_indices")
    return None


def _kimi_linear(view: ConfigView, n: int) -> LayerLayout | None:
    sub = view.sub("linear_attn_config")
    if sub is None:
        return None
    kda = sub.get_int_list("kda_layers", maximum=MAX_LAYERS)
    full = sub.get_int_list("full_attn_layers", maximum=MAX_LAYERS)
    if kda is None and full is None:
        return None
    view.evidence.update(sub.evidence)
    # The checkpoint numbers these layers from 1 (transformers subtracts one).
    pattern = [FULL] * n
    unknown: list[str] = []
    for index in kda or []:
        if 1 <= index <= n:
            pattern[index - 1] = KDA
        else:
            unknown.append(f"kda_layers entry {index} outside 1..{n}")
    full_set = set(full or [])
    if kda is None:
        pattern = [FULL if i + 1 in full_set else KDA for i in range(n)]
    return LayerLayout(pattern, "linear_attn_config.kda_layers/full_attn_layers (1-based)", unknown)


def _cross_attention(view: ConfigView, n: int) -> LayerLayout | None:
    """Mllama: the layers in ``cross_attention_layers`` attend to the image instead of the text
    (transformers configuration_mllama.py MllamaTextConfig.cross_attention_layers, line 137;
    modeling_mllama.py MllamaTextModel builds MllamaCrossAttentionDecoderLayer there): their K/V are
    the image's, cached once per request, not per token."""
    listed = view.get_int_list("cross_attention_layers", maximum=MAX_LAYERS)
    if not listed:
        return None
    chosen = set(listed)
    return LayerLayout([CROSS if i in chosen else FULL for i in range(n)], "cross_attention_layers",
                       [f"cross_attention_layers entry {i} outside 0..{n - 1}" for i in sorted(chosen) if i >= n])


def _block_types(view: ConfigView, n: int) -> LayerLayout | None:
    """RecurrentGemma: ``block_types`` repeated over the layers, "recurrent" an RG-LRU block, "attention"
    local attention over ``attention_window_size`` tokens (transformers configuration_recurrent_gemma.py
    ``layers_block_type``, lines 99-102: ``(block_types * 100)[:num_hidden_layers]``)."""
    names = view.get_str_list("block_types")
    if not names or not view.present("attention_window_size"):
        return None
    cycle = (names * (n // len(names) + 1))[:n]
    kinds = {"recurrent": RECURRENT, "attention": SLIDING}
    return LayerLayout([kinds.get(name, FULL) for name in cycle], "block_types (repeated)",
                       sorted({name for name in names if name not in kinds}))
