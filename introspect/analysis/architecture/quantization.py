"""Weight quantization, normalised across the formats a checkpoint can declare.

Each method names the same facts differently (``num_bits`` / ``bits`` / ``w_bit``;
``sym`` / ``symmetric`` / ``zero_point``; ``ignore`` / ``modules_to_not_convert``
/ ``llm_int8_skip_modules``). The result is always
{method, bits, group_size, symmetric, format, targets, ignore} (+ a few extras),
or None when the config declares no quantization.
"""

from __future__ import annotations

from typing import Any

from introspect.analysis.architecture.config_view import ConfigView


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


def _base(method: str) -> dict[str, Any]:
    return {
        "method": method,
        "bits": None,
        "group_size": None,
        "symmetric": None,
        "format": None,
        "targets": None,
        "ignore": None,
    }


def _compressed_tensors(qc: dict[str, Any]) -> dict[str, Any]:
    out = _base("compressed-tensors")
    out["format"] = qc.get("format") if isinstance(qc.get("format"), str) else None
    out["ignore"] = _strs(qc.get("ignore"))
    groups = qc.get("config_groups")
    targets: list[str] = []
    if isinstance(groups, dict):
        for group in groups.values():
            if not isinstance(group, dict):
                continue
            targets.extend(_strs(group.get("targets")) or [])
            weights = group.get("weights")
            if isinstance(weights, dict) and out["bits"] is None:
                out["bits"] = _int(weights.get("num_bits"))
                group_size = _int(weights.get("group_size"))
                out["group_size"] = group_size if group_size else None
                out["symmetric"] = _bool(weights.get("symmetric"))
                out["strategy"] = (
                    weights.get("strategy") if isinstance(weights.get("strategy"), str) else None
                )
                out["type"] = weights.get("type") if isinstance(weights.get("type"), str) else None
                block = weights.get("block_structure")
                if isinstance(block, list) and all(_int(item) for item in block):
                    out["block_size"] = block
    out["targets"] = targets or None
    return out


def _fp8(qc: dict[str, Any]) -> dict[str, Any]:
    out = _base("fp8")
    out["bits"] = 8
    out["symmetric"] = True
    fmt = qc.get("fmt") if isinstance(qc.get("fmt"), str) else None
    block = qc.get("weight_block_size")
    if isinstance(block, list) and block and all(_int(item) for item in block):
        out["block_size"] = block
        out["format"] = f"{fmt or 'e4m3'} block {'x'.join(str(item) for item in block)}"
    else:
        out["format"] = fmt or "e4m3"
    out["activation_scheme"] = (
        qc.get("activation_scheme") if isinstance(qc.get("activation_scheme"), str) else None
    )
    out["ignore"] = _strs(qc.get("modules_to_not_convert") or qc.get("ignored_layers"))
    return out


def _gptq_awq(method: str, qc: dict[str, Any]) -> dict[str, Any]:
    out = _base(method)
    out["bits"] = _int(qc.get("bits", qc.get("w_bit")))
    group_size = qc.get("group_size", qc.get("q_group_size"))
    out["group_size"] = _int(group_size) if _int(group_size) else None  # -1 means per-channel
    if method == "awq":
        zero_point = _bool(qc.get("zero_point"))
        out["symmetric"] = None if zero_point is None else not zero_point
        out["format"] = qc.get("version") if isinstance(qc.get("version"), str) else "gemm"
    else:
        out["symmetric"] = _bool(qc.get("sym"))
        fmt = qc.get("checkpoint_format", qc.get("format"))
        out["format"] = fmt if isinstance(fmt, str) else "gptq"
        out["desc_act"] = _bool(qc.get("desc_act"))
    out["ignore"] = _strs(qc.get("modules_to_not_convert"))
    return out


def _bitsandbytes(qc: dict[str, Any]) -> dict[str, Any]:
    out = _base("bitsandbytes")
    if qc.get("load_in_4bit") is True:
        out["bits"] = 4
        fmt = qc.get("bnb_4bit_quant_type")
        out["format"] = fmt if isinstance(fmt, str) else "fp4"
        out["group_size"] = 64  # bitsandbytes 4-bit uses fixed 64-element blocks
    elif qc.get("load_in_8bit") is True:
        out["bits"] = 8
        out["format"] = "llm.int8"
    out["ignore"] = _strs(qc.get("llm_int8_skip_modules"))
    return out


def _mxfp4(qc: dict[str, Any]) -> dict[str, Any]:
    out = _base("mxfp4")
    # OCP microscaling: FP4 (e2m1) values sharing one e8m0 scale per 32 elements.
    out.update({"bits": 4, "group_size": 32, "symmetric": True, "format": "e2m1 with e8m0 scales"})
    out["ignore"] = _strs(qc.get("modules_to_not_convert"))
    return out


def analyze_quantization(view: ConfigView) -> dict[str, Any] | None:
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
    out["bits"] = _int(qc.get("bits", qc.get("w_bit", qc.get("num_bits"))))
    out["group_size"] = _int(qc.get("group_size")) or None
    out["ignore"] = _strs(qc.get("modules_to_not_convert", qc.get("ignore")))
    return out
