"""The memory of one GPU for ``introspect plan``: ``--gpu-mem SIZE`` or ``--gpu NAME``.

GB and GiB differ by 7% at this scale, and the two sources a user copies from
disagree: vendors market decimal gigabytes ("H200, 141GB"), nvidia-smi prints
MiB (an H200 shows 143771MiB = 140.4 GiB). So ``--gpu-mem`` takes each unit at
its word (``141GB`` = 141 x 10^9 bytes, ``131GiB`` = 131 x 2^30, ``143771MiB``
as nvidia-smi prints it) and refuses what could mean either: a bare number or a
bare ``G``. ``--gpu H200`` takes nvidia-smi's total from a table instead.
"""

from __future__ import annotations

import re

from introspect.errors import UsageError

# Each unit says its base: a trailing "i" is binary (IEC), none is decimal (SI).
_UNITS = {"mb": 10**6, "gb": 10**9, "tb": 10**12, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")

# memory.total in MiB as `nvidia-smi --query-gpu=name,memory.total --format=csv`
# prints it (below the marketed size: the driver keeps some back). Marketed sizes:
# https://www.nvidia.com/en-us/data-center/h100/ (80GB), .../h200/ (141GB),
# .../a100/ (40GB, 80GB: the A100's totals are exactly 40 and 80 GiB); the H100 and H200 rows
# match tests/engines/nvidia_smi_outputs.py. Only cards whose total we could source are listed:
# for any other, --gpu-mem with the MiB figure nvidia-smi prints.
GPU_TOTALS_MIB = {
    "H100": ("NVIDIA H100 80GB HBM3", 81559),
    "H200": ("NVIDIA H200", 143771),
    "A100-80GB": ("NVIDIA A100-SXM4-80GB", 81920),
    "A100-40GB": ("NVIDIA A100-SXM4-40GB", 40960),
}
_ALIASES = {"h10080gb": "H100", "h10080gbhbm3": "H100", "a10080gb": "A100-80GB", "a100sxm480gb": "A100-80GB",
            "a10040gb": "A100-40GB", "a100sxm440gb": "A100-40GB"}


def _hint(number: str, command: str) -> str:
    return f"{command} --gpu-mem {number}GB  # or {number}GiB: GB = 10^9 bytes as vendors state it, GiB = 2^30"


def parse_gpu_mem(text: str, command: str = "introspect plan PROFILE.json --gpus N") -> int:
    """``"141GB"`` -> 141 x 10^9, ``"131GiB"`` -> 131 x 2^30; a bare number or ``G`` is a UsageError."""
    found = _SIZE.match(str(text or ""))
    if found is None:
        raise UsageError(f"--gpu-mem {text!r} is not a memory size",
                         hint=_hint("141", command) + " (or --gpu H200)")
    number, unit = found.group(1), found.group(2).lower()
    if unit in ("", "b", "k", "m", "g", "t"):
        raise UsageError(f"--gpu-mem {text!r} does not say GB (10^9 bytes) or GiB (2^30 bytes)",
                         hint=_hint(number, command))
    if unit not in _UNITS or float(number) <= 0:
        raise UsageError(f"--gpu-mem {text!r} is not a memory size", hint=_hint("141", command))
    return int(float(number) * _UNITS[unit])


def gpu_by_name(text: str, command: str = "introspect plan PROFILE.json --gpus N") -> tuple[str, int]:
    """``"H200"`` -> ("NVIDIA H200", 143771 MiB in bytes), from :data:`GPU_TOTALS_MIB`."""
    key = re.sub(r"[^a-z0-9]", "", text.lower()).removeprefix("nvidia")
    names = {re.sub(r"[^a-z0-9]", "", name.lower()): name for name in GPU_TOTALS_MIB}
    name = names.get(key) or _ALIASES.get(key)
    if name is None:
        known = ", ".join(GPU_TOTALS_MIB)
        raise UsageError(f"--gpu {text!r} is not in the table of nvidia-smi totals ({known})",
                         hint=f"{command} --gpu-mem 143771MiB"
                              "  # memory.total from: nvidia-smi --query-gpu=memory.total --format=csv")
    full, mib = GPU_TOTALS_MIB[name]
    return full, mib * 2**20
