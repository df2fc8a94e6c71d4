"""``plan --gpu-mem``: GB is 10^9 bytes, GiB 2^30, MiB as nvidia-smi prints it; a bare number is refused.

The plan runs on the Kimi-like fixture of tests/engines/test_plan.py (64 sparse
shards in the shapes of Kimi-K2.5's INT4 release). nvidia-smi totals: the H200
row of tests/engines/nvidia_smi_outputs.py (143771 MiB).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from introspect.cli.gpu_mem import GPU_TOTALS_MIB, gpu_by_name, parse_gpu_mem
from introspect.errors import UsageError
from tests.conftest import assert_clean_error, run_cli
from tests.engines.nvidia_smi_outputs import H100_CSV, H200_CSV

GIB = 2**30
MIB = 2**20


def _plan(profile: Path, *args: str) -> dict:
    result = run_cli("plan", str(profile), "--gpus", "8", *args, "--json")
    assert result.code == 0, result.stderr
    return result.json()


@pytest.mark.parametrize(("text", "expected"), [
    ("141GB", 141 * 10**9),            # decimal, as vendors state it
    ("141000MB", 141 * 10**9),
    ("131GiB", 131 * GIB),             # binary
    ("131.5GiB", int(131.5 * GIB)),
    ("143771MiB", 143771 * MIB),       # as nvidia-smi prints it
    ("1.5TB", 15 * 10**11),
    ("141 gb", 141 * 10**9),
])
def test_each_spelling_through_the_parser(text: str, expected: int) -> None:
    assert parse_gpu_mem(text) == expected


@pytest.mark.parametrize("text", ["141", "150754820096", "80G", "96g", "141B"])
def test_ambiguous_sizes_are_refused_with_both_spellings(text: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_gpu_mem(text)
    number = text.rstrip("GgB")
    assert "GB" in caught.value.message and "GiB" in caught.value.message
    assert f"--gpu-mem {number}GB" in str(caught.value.hint) and f"{number}GiB" in str(caught.value.hint)


@pytest.mark.parametrize("text", ["lots", "", "0GB", "12XB", "-3GiB"])
def test_non_sizes_are_refused(text: str) -> None:
    with pytest.raises(UsageError, match="not a memory size"):
        parse_gpu_mem(text)


@pytest.mark.parametrize(("spelling", "memory"), [
    (("--gpu-mem", "141GB"), 141 * 10**9),
    (("--gpu-mem", "131GiB"), 131 * GIB),
    (("--gpu-mem", "143771MiB"), 143771 * MIB),
    (("--gpu", "H200"), 143771 * MIB),
])
def test_each_spelling_through_plan(kimi_profile: Path, spelling: tuple[str, str], memory: int) -> None:
    plan = _plan(kimi_profile, *spelling)
    assert plan["gpus"]["memory_bytes"] == memory and plan["gpus"]["count"] == 8
    tp8 = {item["name"]: item for item in plan["layouts"]}["TP8"]
    assert tp8["usable_bytes_per_gpu"] == int(memory * 0.9)
    assert tp8["kv_room_bytes_per_gpu"] == int(memory * 0.9) - tp8["weight_bytes_per_gpu"]


def test_141_gb_and_131_3_gib_leave_the_same_kv_room(kimi_profile: Path) -> None:
    # 141 x 10^9 B = 131.3155 GiB: the two spellings differ by under 0.01 GiB.
    decimal = {item["name"]: item for item in _plan(kimi_profile, "--gpu-mem", "141GB")["layouts"]}["TP8"]
    binary = {item["name"]: item for item in _plan(kimi_profile, "--gpu-mem", "131.3155GiB")["layouts"]}["TP8"]
    assert decimal["kv_room_bytes_per_gpu"] > 0
    assert abs(decimal["kv_room_bytes_per_gpu"] - binary["kv_room_bytes_per_gpu"]) < MIB
    # ... and an H200's real total (nvidia-smi) is 9.1 GiB more than "141GB".
    h200 = {item["name"]: item for item in _plan(kimi_profile, "--gpu", "H200")["layouts"]}["TP8"]
    assert h200["usable_bytes_per_gpu"] - decimal["usable_bytes_per_gpu"] == int(143771 * MIB * 0.9) - int(141e9 * 0.9)


def test_text_plan_shows_the_gpu_and_its_gib(kimi_profile: Path) -> None:
    result = run_cli("plan", str(kimi_profile), "--gpus", "8", "--gpu", "h200")
    assert result.code == 0, result.stderr
    assert "8 x 140.4 GiB NVIDIA H200 (flags)" in " ".join(result.stdout.split())
    result = run_cli("plan", str(kimi_profile), "--gpus", "8", "--gpu-mem", "141GB")
    assert "8 x 131.3 GiB (flags)" in " ".join(result.stdout.split())


@pytest.mark.parametrize("value", ["141", "80G"])
def test_bare_number_exits_2_with_both_spellings(kimi_profile: Path, value: str) -> None:
    result = run_cli("plan", str(kimi_profile), "--gpus", "8", "--gpu-mem", value)
    number = value.rstrip("G")
    assert_clean_error(result, 2, "does not say GB", f"--gpu-mem {number}GB", f"{number}GiB")
    fix = next(line for line in result.stderr.splitlines() if line.startswith("fix: "))
    assert fix.startswith(f"fix: introspect plan {kimi_profile} --gpus 8 --gpu-mem {number}GB  #")


def test_gpu_names_and_conflicts(kimi_profile: Path) -> None:
    assert_clean_error(run_cli("plan", str(kimi_profile), "--gpus", "8", "--gpu", "A100"), 2,
                       "not in the table", "A100-80GB", "--gpu-mem 143771MiB")
    assert_clean_error(run_cli("plan", str(kimi_profile), "--gpus", "8", "--gpu", "H200", "--gpu-mem", "141GB"), 2,
                       "both give", "--gpu H200")
    assert gpu_by_name("NVIDIA H100 80GB HBM3") == ("NVIDIA H100 80GB HBM3", 81559 * MIB)
    assert gpu_by_name("a100-sxm4-40gb") == ("NVIDIA A100-SXM4-40GB", 40960 * MIB)


def test_table_matches_the_nvidia_smi_examples() -> None:
    # The constructed nvidia-smi rows (name, memory.total in MiB) agree with the table.
    for csv in (H100_CSV, H200_CSV):
        _, name, total = (field.strip() for field in csv.splitlines()[0].split(",")[:3])
        assert gpu_by_name(name) == (name, int(total) * MIB)
    assert all(total > 0 and full.startswith("NVIDIA ") for full, total in GPU_TOTALS_MIB.values())
