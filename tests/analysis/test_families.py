"""One case per model family in tests/data/families: {config, expected, source}.

Each file holds a family's real documented config.json (see its "source") and the
facts the architecture section must state for it. A new family is a new file.
Keys of "expected" and where the profile answers them are listed in ANSWERS;
params are compared with the published figure within ``params_tolerance``
(default 3%), using the realconfigs README convention unless the file says its
figure counts the input embedding (``active_counts_embedding``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from introspect.analysis.architecture.section import analyze_architecture

ROOT = Path(__file__).resolve().parents[1] / "data" / "families"
CASES = sorted(ROOT.glob("*.json"))

ANSWERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "model_type": lambda a: a["model_type"],
    "text_model_type": lambda a: a["text_model_type"],
    "num_layers": lambda a: a["num_layers"],
    "hidden_size": lambda a: a["hidden_size"],
    "vocab_size": lambda a: a["vocab_size"],
    "max_context": lambda a: a["max_context"],
    "layer_kinds": lambda a: a["layers"]["kinds"],
    "first_layers": lambda a: a["layers"]["pattern"][:2],
    "pure_attention": lambda a: a["layers"]["pure_attention"],
    "attention_type": lambda a: a["attention"]["type"],
    "num_heads": lambda a: a["attention"]["num_heads"],
    "num_kv_heads": lambda a: a["attention"]["num_kv_heads"],
    "head_dim": lambda a: a["attention"]["head_dim"],
    "sliding_window": lambda a: a["attention"]["sliding_window"],
    "q_lora_rank": lambda a: a["attention"]["q_lora_rank"],
    "kv_lora_rank": lambda a: a["attention"]["kv_lora_rank"],
    "qk_rope_head_dim": lambda a: a["attention"]["qk_rope_head_dim"],
    "is_moe": lambda a: a["moe"]["is_moe"],
    "routed_experts": lambda a: a["moe"]["routed_experts"],
    "shared_experts": lambda a: a["moe"]["shared_experts"],
    "experts_per_token": lambda a: a["moe"]["experts_per_token"],
    "moe_layers": lambda a: a["moe"]["moe_layers"],
    "dense_layers": lambda a: a["moe"]["dense_layers"],
    "moe_intermediate_size": lambda a: a["moe"]["moe_intermediate_size"],
    "n_group": lambda a: a["moe"]["n_group"],
    "topk_group": lambda a: a["moe"]["topk_group"],
    "scoring_func": lambda a: a["moe"]["scoring_func"],
    "topk_method": lambda a: a["moe"]["topk_method"],
    "routed_scaling_factor": lambda a: a["moe"]["routed_scaling_factor"],
    "norm_topk_prob": lambda a: a["moe"]["norm_topk_prob"],
    "mtp_layers": lambda a: a["speculative"]["mtp_layers"],
    "quantization_method": lambda a: (a["quantization"] or {}).get("method"),
    "kv_bytes_per_token": lambda a: a["kv_cache"]["bytes_per_token"],
    "state_bytes_per_sequence": lambda a: a["kv_cache"]["state_bytes_per_sequence"],
    "embedding_params": lambda a: a["params"]["embedding"],
}
PARAM_KEYS = ("total_params", "active_params", "mtp_params", "non_embedding_params")
OPTIONS = ("params_tolerance", "active_counts_embedding")
# Expected values that are dicts (or lists of dicts) checked key by key: only the keys the file states.
SUBSETS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "quantization": lambda a: a["quantization"],
    "drafters": lambda a: a["speculative"]["drafters"],
}


def _subset_errors(key: str, got: Any, want: Any) -> list[str]:
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return [f"{key}: got {got!r}, want {len(want)} entries"]
        return [
            err
            for i, (g, w) in enumerate(zip(got, want, strict=True))
            for err in _subset_errors(f"{key}[{i}]", g, w)
        ]
    if not isinstance(got, dict):
        return [f"{key}: got {got!r}, want {want!r}"]
    return [f"{key}.{k}: got {got.get(k)!r}, want {v!r}" for k, v in want.items() if got.get(k) != v]


def _params(arch: dict[str, Any], key: str, expected: dict[str, Any]) -> float:
    params = arch["params"]
    if key == "total_params":
        return params["total"]
    if key == "active_params":
        extra = params["embedding"] if expected.get("active_counts_embedding") else 0
        return params["active"] + extra
    if key == "mtp_params":
        return arch["mtp"]["params"]
    return params["total"] - params["embedding"] - params["breakdown"]["lm_head"]  # non-embedding


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_family(path: Path) -> None:
    case = json.loads(path.read_text())
    assert case.get("source"), "every family file names where its config comes from"
    expected: dict[str, Any] = case["expected"]
    arch, findings = analyze_architecture(
        case["config"], config_path=f"{path.stem}/config.json", drafters=case.get("drafters")
    )

    # Errors only where the case expects them ("unknown" is an error: the verdicts it voids are not stated).
    assert not [f for f in findings if f["severity"] == "error" and f["code"] not in expected.get("findings", [])], \
        findings
    assert sorted(f["code"] for f in findings) == sorted(expected.get("findings", [])), findings
    for word in expected.get("finding_mentions", []):
        assert any(word in f["message"] for f in findings), (word, findings)
    json.dumps(arch)  # the section must be plain JSON

    wrong: list[str] = []
    tolerance = float(expected.get("params_tolerance", 0.03))
    for key, want in expected.items():
        if key in OPTIONS or key in ("findings", "finding_mentions"):
            continue
        if key in SUBSETS:
            wrong.extend(_subset_errors(key, SUBSETS[key](arch), want))
            continue
        if key in PARAM_KEYS:
            got = _params(arch, key, expected)
            if got != pytest.approx(want, rel=tolerance):
                wrong.append(f"{key}: {got / 1e9:.4g}B, published {want / 1e9:.4g}B (±{tolerance:.0%})")
            continue
        assert key in ANSWERS, f"{path.name}: no reader for expected key {key!r}"
        got = ANSWERS[key](arch)
        if got != want:
            wrong.append(f"{key}: got {got!r}, want {want!r}")
    assert not wrong, f"{path.stem}: " + "; ".join(wrong)
