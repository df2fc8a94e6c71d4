"""Logical parameter count from summarised safetensors headers (docs/raw-facts.md).

Summing header elements naively is wrong for quantized checkpoints: an INT4
compressed-tensors linear stores ``weight_packed`` as I32 (8 values per element)
next to ``weight_scale`` / ``weight_shape`` metadata, so Kimi-K2.5 sums to 170.7 B
elements while it has about 1.03 T parameters. Here packed tensors count the
values they hold and quantization metadata counts nothing:

* compressed-tensors: ``weight_packed`` x (storage bits / num_bits); ``weight_scale``,
  ``weight_shape``, ``weight_zero_point``, ``weight_global_scale``, ``*input_scale``,
  ``weight_g_idx`` excluded;
* GPTQ / AWQ: ``qweight`` x (32 / bits); ``qzeros``, ``scales``, ``g_idx`` excluded;
* FP8: ``weight`` counts as is; ``weight_scale_inv`` (and KV ``k_scale``/``v_scale``) excluded;
* MXFP4 (gpt-oss): ``*_blocks`` U8 x 2; ``*_scales`` excluded;
* bitsandbytes 4-bit: U8 ``weight`` x 2; ``absmax``, ``quant_map``, ``quant_state.*`` excluded.

Parameters of layers past the text model's last layer (DeepSeek-style MTP
``model.layers.61``, Qwen's ``mtp.*``) and of vision towers are also reported on
their own so they can be compared with the config estimate like for like.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from introspect.analysis.findings import Finding, Severity
from introspect.documents.profile_architecture import Quantization, SafetensorsCount
from introspect.remote.contract import SafetensorsFacts, ShardSummary, TensorGroup

# Elements of one tensor group (shape x count) no checkpoint comes near: the largest models
# hold about 2e12 parameters in all. A header beyond it is corrupt or hostile.
MAX_GROUP_ELEMENTS = 10**14

DTYPE_BITS = {
    "F64": 64,
    "F32": 32,
    "F16": 16,
    "BF16": 16,
    "I64": 64,
    "I32": 32,
    "I16": 16,
    "I8": 8,
    "U64": 64,
    "U32": 32,
    "U16": 16,
    "U8": 8,
    "BOOL": 8,
    "F8_E4M3": 8,
    "F8_E5M2": 8,
    "F8_E8M0": 8,
    "E8M0": 8,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "F4": 4,
}

# Quantization metadata whose names cannot be a model weight.
ALWAYS_METADATA = (
    ".weight_scale",
    ".weight_shape",
    ".weight_zero_point",
    ".weight_global_scale",
    ".input_scale",
    ".input_global_scale",
    ".input_zero_point",
    ".output_scale",
    ".weight_g_idx",
    ".weight_scale_inv",
    ".k_scale",
    ".v_scale",
    ".q_scale",
    ".absmax",
    ".quant_map",
    ".nested_absmax",
    ".nested_quant_map",
    ".SCB",
    ".weight_format",
)
GPTQ_METADATA = (".qzeros", ".scales", ".g_idx")
VISION_PARTS = frozenset(
    {
        "vision_tower",
        "visual",
        "vision_model",
        "vision_encoder",
        "mm_projector",
        "multi_modal_projector",
        "image_encoder",
        "vision",
    }
)
MAX_GROUPS = 1_000_000


def _shape_elements(shape: Any) -> int | None:
    if not isinstance(shape, list):
        return None
    total = 1
    for dim in shape:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 0:
            return None
        total *= dim
    return total


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _is_metadata(template: str, has_qweight: bool, has_blocks: bool) -> bool:
    if ".quant_state." in template or template.endswith(ALWAYS_METADATA):
        return True
    if has_qweight and template.endswith(GPTQ_METADATA):
        return True
    return has_blocks and template.endswith("_scales")


def _packing(template: str, dtype: str, quant: Quantization | None) -> tuple[int, str | None]:
    """(values per stored element, logical dtype label) for packed weights; (1, None) otherwise."""
    bits_stored = DTYPE_BITS.get(dtype, 0)
    method = quant.method if quant is not None else None
    bits = quant.bits if quant is not None else None
    if template.endswith(".weight_packed"):
        value_bits = bits if bits and bits < bits_stored else 4
        return max(bits_stored // value_bits, 1), f"INT{value_bits}"
    if template.endswith(".qweight"):
        value_bits = bits if bits and bits < bits_stored else 4
        return max(bits_stored // value_bits, 1), f"INT{value_bits}"
    if template.endswith("_blocks") and dtype == "U8":
        return 2, "MXFP4"  # two e2m1 values per byte
    if method == "bitsandbytes" and bits == 4 and dtype == "U8" and template.endswith(".weight"):
        return 2, str((quant.format if quant is not None else None) or "NF4").upper()
    return 1, None


def _section(template: str) -> str:
    parts = template.split(".")
    if any(part in VISION_PARTS for part in parts[:3]):
        return "vision"
    if parts and parts[0] == "mtp":
        return "mtp"
    return "text"


def _layer_ids(template: str, value: Any) -> set[int]:
    if "layers.#" not in template or not isinstance(value, list):
        return set()
    return {item for item in value if isinstance(item, int) and not isinstance(item, bool)}


def _mtp_part(logical: int, layers: set[int], num_layers: int | None) -> int:
    """Share of a template's parameters in layers at or past ``num_layers`` (the MTP layers).

    Shards cut layers anywhere, so one shard's group may hold part of a layer; summed
    over all shards, a per-layer template holds the same count in every layer it
    appears in, which makes the split exact.
    """
    if num_layers is None or not layers:
        return 0
    extra = sum(1 for layer in layers if layer >= num_layers)
    return logical * extra // len(layers)


def _usable_groups(shards: list[ShardSummary]) -> tuple[list[TensorGroup], int, int]:
    """(tensor groups of the readable shards, shards read, shards failed); raw facts may be damaged."""
    groups: list[TensorGroup] = []
    shards_ok = shards_failed = 0
    for shard in shards:
        if not isinstance(shard, dict) or shard.get("error") or not isinstance(shard.get("groups"), list):
            shards_failed += 1
            continue
        shards_ok += 1
        groups.extend(g for g in shard["groups"][:MAX_GROUPS] if isinstance(g, dict))
    return groups, shards_ok, shards_failed


@dataclass
class _Tally:
    """Running sums over the tensor groups."""

    total: int = 0
    stored_elements: int = 0
    excluded: int = 0
    tensors: int = 0
    stored_bits: int = 0
    by_dtype: Counter[str] = field(default_factory=Counter)
    sections: Counter[str] = field(default_factory=Counter)
    # (template, dtype, shape) -> [logical, layer ids]: text weights, split into MTP layers at the end
    per_template: dict[tuple[str, str, str], list[Any]] = field(default_factory=dict)
    implausible: list[str] = field(default_factory=list)  # "template shape x count" of absurd groups

    def add(self, group: TensorGroup, quantization: Quantization | None, has_qweight: bool,
            has_blocks: bool) -> None:
        template, dtype = group.get("template"), group.get("dtype")
        elements, count = _shape_elements(group.get("shape")), _count(group.get("count"))
        if not isinstance(template, str) or not isinstance(dtype, str) or elements is None or count is None:
            return
        stored = elements * count
        if stored > MAX_GROUP_ELEMENTS:
            self.implausible.append(f"{template} {group.get('shape')} x {count}"[:200])
            return
        self.tensors += count
        self.stored_elements += stored
        self.stored_bits += stored * DTYPE_BITS.get(dtype, 0)
        if _is_metadata(template, has_qweight, has_blocks):
            self.excluded += stored
            return
        factor, label = _packing(template, dtype, quantization)
        logical = stored * factor
        self.total += logical
        self.by_dtype[label or dtype] += logical
        section = _section(template)
        if section == "text":
            entry = self.per_template.setdefault((template, dtype, str(group.get("shape"))), [0, set()])
            entry[0] += logical
            entry[1] |= _layer_ids(template, group.get("layer_ids"))
        else:
            self.sections[section] += logical

    def split_mtp(self, num_layers: int | None) -> None:
        for text_logical, layers in self.per_template.values():
            mtp = _mtp_part(text_logical, layers, num_layers)
            self.sections["mtp"] += mtp
            self.sections["text"] += text_logical - mtp


def count_safetensors(
    safetensors: SafetensorsFacts | None, quantization: Quantization | None = None, num_layers: int | None = None
) -> SafetensorsCount | None:
    """The logical counts (total, by dtype, text / MTP / vision) or None when no shard summary is usable.
    ``safetensors`` is the raw section as read, possibly damaged: every value is checked."""
    if not isinstance(safetensors, dict) or not isinstance(safetensors.get("shards"), list):
        return None
    groups, shards_ok, shards_failed = _usable_groups(safetensors["shards"])
    if shards_ok == 0:
        return None

    templates = {str(g["template"]) for g in groups if isinstance(g.get("template"), str)}
    has_qweight = any(t.endswith(".qweight") for t in templates)
    has_blocks = any(t.endswith("_blocks") for t in templates)
    tally = _Tally()
    for group in groups:
        tally.add(group, quantization, has_qweight, has_blocks)
    tally.split_mtp(num_layers)
    if tally.implausible:
        # A count that leaves out an absurd tensor is no count: the weights' total is unknown.
        return SafetensorsCount(total=0, implausible=tally.implausible[:10], shards=shards_ok,
                                shards_failed=shards_failed, text=0, mtp=0, vision=0)
    return SafetensorsCount(
        total=tally.total,
        by_dtype=dict(tally.by_dtype),
        stored_bytes=tally.stored_bits // 8,
        shards=shards_ok,
        shards_failed=shards_failed,
        tensors=tally.tensors,
        stored_elements=tally.stored_elements,
        excluded_elements=tally.excluded,
        text=tally.sections["text"],
        mtp=tally.sections["mtp"],
        vision=tally.sections["vision"],
    )


def implausible_finding(stored: SafetensorsCount | None) -> Finding | None:
    """The finding for shard headers that declare tensors no model has (10**18 x 10**18)."""
    if stored is None or not stored.implausible:
        return None
    return Finding(Severity.ERROR, "safetensors-implausible",
                   f"safetensors headers declare tensors with more than {MAX_GROUP_ELEMENTS:.0e} elements "
                   f"({'; '.join(stored.implausible[:3])}): the weights' parameter count is unknown",
                   "the shard headers are corrupt: re-download the shards")
