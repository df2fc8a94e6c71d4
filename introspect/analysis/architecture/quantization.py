"""Weight quantization, normalised across the formats a checkpoint can declare.

Each method names the same facts differently (``num_bits`` / ``bits`` / ``w_bit``;
``sym`` / ``symmetric`` / ``zero_point``; ``ignore`` / ``modules_to_not_convert``
/ ``llm_int8_skip_modules``). The result is always a
:class:`~introspect.documents.profile_architecture.Quantization` (method, bits, group_size,
symmetric, format, targets, ignore, and a few extras a method has), or None when the config
declares no quantization. ``quantization_config`` itself is config.json's, read as it is.
"""

from __future__ import annotations

from typing import Any

from introspect.analysis.architecture.config_view import ConfigView
from introspect.documents.profile_architecture import Quantization
from introspect.remote.contract import JSONObject


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value > 1024:
        return None
    return value


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _strs(value: Any) -> list[str] | None:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str)]
    return None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _base(method: str) -> Quantization:
    return Quantization(method=method, bits=None, group_size=None, symmetric=None, format=None, targets=None,
                        ignore=None)


def _compressed_tensors(qc: JSONObject) -> Quantization:
    out = _base("compressed-tensors")
    out.format = _str(qc.get("format"))
    out.ignore = _strs(qc.get("ignore"))
    groups = qc.get("config_groups")
    targets: list[str] = []
    if isinstance(groups, dict):
        for group in groups.values():
            if not isinstance(group, dict):
                continue
            targets.extend(_strs(group.get("targets")) or [])
            weights = group.get("weights")
            if isinstance(weights, dict) and out.bits is None:
                out.bits = _int(weights.get("num_bits"))
                out.group_size = _int(weights.get("group_size")) or None
                out.symmetric = _bool(weights.get("symmetric"))
                out.strategy = _str(weights.get("strategy"))
                out.type = _str(weights.get("type"))
                block = _block(weights.get("block_structure"))
                if block is not None:
                    out.block_size = block
    out.targets = targets or None
    return out


def _block(value: Any) -> list[int] | None:
    """A block shape: a list of positive ints (an empty list is one too, as the format allows)."""
    if not isinstance(value, list) or not all(_int(item) for item in value):
        return None
    return [int(item) for item in value]


def _fp8(qc: JSONObject) -> Quantization:
    out = _base("fp8")
    out.bits = 8
    out.symmetric = True
    fmt = _str(qc.get("fmt"))
    block = _block(qc.get("weight_block_size"))
    if block:
        out.block_size = block
        out.format = f"{fmt or 'e4m3'} block {'x'.join(str(item) for item in block)}"
    else:
        out.format = fmt or "e4m3"
    out.activation_scheme = _str(qc.get("activation_scheme"))
    out.ignore = _strs(qc.get("modules_to_not_convert") or qc.get("ignored_layers"))
    return out


def _gptq_awq(method: str, qc: JSONObject) -> Quantization:
    out = _base(method)
    out.bits = _int(qc.get("bits", qc.get("w_bit")))
    out.group_size = _int(qc.get("group_size", qc.get("q_group_size"))) or None  # -1 means per-channel
    if method == "awq":
        zero_point = _bool(qc.get("zero_point"))
        out.symmetric = None if zero_point is None else not zero_point
        version = _str(qc.get("version"))
        out.format = version if version is not None else "gemm"
    else:
        out.symmetric = _bool(qc.get("sym"))
        fmt = _str(qc.get("checkpoint_format", qc.get("format")))
        out.format = fmt if fmt is not None else "gptq"
        out.desc_act = _bool(qc.get("desc_act"))
    out.ignore = _strs(qc.get("modules_to_not_convert"))
    return out


def _bitsandbytes(qc: JSONObject) -> Quantization:
    out = _base("bitsandbytes")
    if qc.get("load_in_4bit") is True:
        out.bits = 4
        fmt = _str(qc.get("bnb_4bit_quant_type"))
        out.format = fmt if fmt is not None else "fp4"
        out.group_size = 64  # bitsandbytes 4-bit uses fixed 64-element blocks
    elif qc.get("load_in_8bit") is True:
        out.bits = 8
        out.format = "llm.int8"
    out.ignore = _strs(qc.get("llm_int8_skip_modules"))
    return out


def _mxfp4(qc: JSONObject) -> Quantization:
    # OCP microscaling: FP4 (e2m1) values sharing one e8m0 scale per 32 elements.
    return Quantization(method="mxfp4", bits=4, group_size=32, symmetric=True, format="e2m1 with e8m0 scales",
                        targets=None, ignore=_strs(qc.get("modules_to_not_convert")))


def analyze_quantization(view: ConfigView) -> Quantization | None:
    """The ``architecture.quantization`` section (None when unquantized)."""
    qc = view.get_dict("quantization_config", "compression_config")
    if qc is None:
        return None
    raw_method = qc.get("quant_method")
    method = raw_method.lower() if isinstance(raw_method, str) else None
    if method == "compressed-tensors" or (method is None and "config_groups" in qc):
        return _compressed_tensors(qc)
    if method == "fp8":
        return _fp8(qc)
    if method in ("gptq", "awq"):
        return _gptq_awq(method, qc)
    if method == "bitsandbytes" or qc.get("load_in_4bit") is True or qc.get("load_in_8bit") is True:
        return _bitsandbytes(qc)
    if method == "mxfp4":
        return _mxfp4(qc)
    out = _base(method or "unknown")
    out.bits = _int(qc.get("bits", qc.get("w_bit", qc.get("num_bits"))))
    out.group_size = _int(qc.get("group_size")) or None
    out.ignore = _strs(qc.get("modules_to_not_convert", qc.get("ignore")))
    return out
