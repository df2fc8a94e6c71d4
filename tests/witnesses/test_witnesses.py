"""The agreement of the three witnesses (analysis.witnesses), from raw facts: pure, no torch.

The model-code results here are shaped like the task's replies (remote/tasks/model_code.py);
the numbers of the DeepSeek-V3 case are those transformers 5.24's DeepseekV3ForCausalLM
builds from tests/data/families/deepseek-v3.json on the meta device (tests/witnesses/
test_meta_models.py checks them against the real build).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from introspect.analysis.profile import build_profile
from introspect.cli.render import print_report
from tests.golden.cases import DATA, config_raw

DSV3 = json.loads((DATA / "families" / "deepseek-v3.json").read_text())["config"]
DSV3_COMPONENTS = {"embedding": 926679040, "attention": 11413547008, "experts_routed": 653908770816,
                   "experts_shared": 2554331136, "router": 106445312, "dense_ffn": 1189085184, "norms": 874496,
                   "final_norm": 7168, "lm_head": 926679040}
DSV3_TOTAL, DSV3_ACTIVE = 671026419200, 36625618432


def built_probe(components: dict[str, int], active: int, moe_layers: int = 58) -> dict[str, Any]:
    return {"built": True, "class": "DeepseekV3ForCausalLM", "module": "transformers.models.deepseek_v3",
            "built_with": "AutoModelForCausalLM", "remote_code": False, "error": None,
            "params": {"total": sum(components.values()), "components": components, "active": active,
                       "experts_per_token": 8, "moe_layers": moe_layers, "one_expert": 44040192},
            "layers": {"path": "model.layers", "count": 61, "runs": [
                {"start": 0, "count": 3, "class": "DeepseekV3DecoderLayer", "mixer": "DeepseekV3Attention",
                 "mixer_kinds": ["attention"], "ffn": "DeepseekV3MLP", "attrs": {}},
                {"start": 3, "count": 58, "class": "DeepseekV3DecoderLayer", "mixer": "DeepseekV3Attention",
                 "mixer_kinds": ["attention"], "ffn": "DeepseekV3MoE", "attrs": {}}]},
            "config": {"class": "DeepseekV3Config"}, "seconds": {"build": 1.0}, "peak_rss_kib": 1000}


def raw_with(probe: dict[str, Any] | None, config: dict[str, Any] = DSV3, **options: Any) -> dict[str, Any]:
    raw = config_raw("deepseek-v3", copy.deepcopy(config))
    raw["options"].update({"load_model_code": True, **options})
    raw["model_code_probe"] = probe
    return raw


def findings(profile: dict[str, Any], code: str) -> list[dict[str, Any]]:
    return [f for f in profile["findings"] if f["code"] == code]


def test_agreeing_witnesses_settle_on_the_code_and_say_why() -> None:
    profile = build_profile(raw_with(built_probe(DSV3_COMPONENTS, DSV3_ACTIVE)))
    params = profile["architecture"]["params"]
    assert params["sources"]["config"] == {"total": DSV3_TOTAL, "active": DSV3_ACTIVE}
    code = params["sources"]["model_code"]
    assert code["status"] == "built" and code["total"] == DSV3_TOTAL and code["active"] == DSV3_ACTIVE
    assert params["sources"]["weights"] is None
    assert (params["total"], params["source"], params["active_source"]) == (DSV3_TOTAL, "model_code", "model_code")
    assert "meta device" in params["why"]["total"] and "experts per token" in params["why"]["active"]
    assert "source: model_code" in profile["architecture"]["summary"]["size"]
    layers = profile["architecture"]["layers"]["sources"]
    assert layers["config"] == {"layers": 61, "moe_layers": 58, "recurrent_layers": 0, "sliding_layers": 0}
    assert layers["model_code"]["moe_layers"] == 58 and layers["model_code"]["layers"] == 61
    assert not findings(profile, "witnesses-disagree")


def test_a_disagreement_names_both_values_and_the_component() -> None:
    # The code builds twice the shared experts the config rules expect (a family whose MoE
    # block always has one more, say): total and active disagree in experts_shared.
    components = dict(DSV3_COMPONENTS, experts_shared=2 * DSV3_COMPONENTS["experts_shared"])
    extra = DSV3_COMPONENTS["experts_shared"]
    profile = build_profile(raw_with(built_probe(components, DSV3_ACTIVE + extra, moe_layers=57)))
    found = findings(profile, "witnesses-disagree")
    by_quantity = {f["quantity"]: f for f in found}
    assert set(by_quantity) == {"active", "moe_layers"}  # the total moves by 0.4%: within tolerance
    active = by_quantity["active"]
    assert active["severity"] == "warning" and active["witnesses"] == ["config", "model_code"]
    assert active["values"] == [DSV3_ACTIVE, DSV3_ACTIVE + extra]
    assert "experts_shared: config 2.55B, model code 5.11B" in active["message"]
    assert by_quantity["moe_layers"]["values"] == [58, 57]
    assert profile["architecture"]["params"]["active"] == DSV3_ACTIVE + extra  # the code is exact


def test_weights_against_the_code() -> None:
    raw = raw_with(built_probe(DSV3_COMPONENTS, DSV3_ACTIVE))
    stored = DSV3_TOTAL + 11_500_000_000  # a checkpoint with a second MTP-sized block the code lacks
    raw["safetensors"] = None
    profile = build_profile(raw)
    assert profile["architecture"]["params"]["sources"]["weights"] is None
    from introspect.analysis.architecture.witnesses import WitnessCounts, _params_disagreements

    code = profile["architecture"]["params"]["sources"]["model_code"]
    found = _params_disagreements(None, WitnessCounts(code["total"], code["active"], code["components"]),
                                  WitnessCounts(stored, None))
    assert [f.extra["witnesses"] for f in found] == [["weights", "model_code"]]
    assert f"({stored})" in found[0].message and f"({DSV3_TOTAL})" in found[0].message


def test_skipped_missing_refused_and_timed_out_witnesses_are_reported() -> None:
    skipped = build_profile(raw_with(None, load_model_code=False))
    assert skipped["architecture"]["params"]["sources"]["model_code"] == {"status": "skipped",
                                                                          "reason": "--no-model-code"}
    missing = {"built": False, "params": None, "error": {
        "type": "ModuleNotFoundError", "message": "No module named 'torch'", "cause": "missing-package",
        "stage": "import", "missing_packages": ["torch"]}}
    profile = build_profile(raw_with(missing))
    code = profile["architecture"]["params"]["sources"]["model_code"]
    assert (code["status"], code["cause"], code["stage"]) == ("failed", "missing-package", "import")
    [info] = findings(profile, "model-code-unavailable")
    assert info["severity"] == "info" and "/venv/bin/pip install torch" in info["fix"]
    assert profile["architecture"]["params"]["source"] == "config"  # the rules still answer

    refused = dict(missing, error={"type": "ValueError", "message": "contains custom code", "stage": "config",
                                   "cause": "remote-code-refused", "missing_packages": []})
    [info] = findings(build_profile(raw_with(refused, remote_code=False)), "model-code-unavailable")
    assert "--no-remote-code" in info["fix"]

    timed_out = raw_with(None)
    timed_out["errors"] = [{"probe": "model_code", "type": "timeout",
                            "message": "model_code probe ran past its 1 s timeout; its process group was killed"}]
    profile = build_profile(timed_out)
    code = profile["architecture"]["params"]["sources"]["model_code"]
    assert (code["status"], code["cause"]) == ("failed", "timeout")
    assert findings(profile, "probe-timeout") and not findings(profile, "model-code-failed")


def test_a_crash_in_the_code_is_a_warning() -> None:
    crashed = {"built": False, "params": None, "error": {
        "type": "AssertionError", "message": "Torch not compiled with CUDA enabled", "cause": "cuda-only",
        "stage": "build", "missing_packages": []}}
    [warning] = findings(build_profile(raw_with(crashed)), "model-code-failed")
    assert warning["severity"] == "warning" and "cuda-only" in warning["message"]


def test_profiles_without_the_witness_keep_their_verdicts() -> None:
    """Raw facts saved before the code witness existed: no model_code source, nothing else moves."""
    raw = config_raw("deepseek-v3", copy.deepcopy(DSV3))
    profile = build_profile(raw)
    params = profile["architecture"]["params"]
    assert params["sources"]["model_code"] is None and params["source"] == "config"
    assert params["total"] == DSV3_TOTAL


def test_human_report_shows_the_three_witnesses(capsys: Any) -> None:
    from rich.console import Console

    profile = build_profile(raw_with(built_probe(DSV3_COMPONENTS, DSV3_ACTIVE)))
    print_report(profile, Console(width=200, highlight=False, force_terminal=False))
    text = capsys.readouterr().out
    assert "Witnesses" in text
    assert "config rules    671.03B total, 36.63B active" in text
    assert "671.03B total, 36.63B active; DeepseekV3ForCausalLM from transformers' built-in class" in text
    assert "58 x DeepseekV3DecoderLayer (DeepseekV3Attention, DeepseekV3MoE)" in text
    assert "no safetensors headers read" in text
    assert "no disagreement between the witnesses that spoke" in text


def test_malformed_model_code_facts_never_break_the_profile() -> None:
    garbage = built_probe(DSV3_COMPONENTS, DSV3_ACTIVE)
    garbage["layers"]["runs"] = [{"count": "many", "mixer_kinds": ["recurrent"]}, "junk"]
    garbage["params"]["components"] = {"attention": "lots", "embedding": 5}
    profile = build_profile(raw_with(garbage))
    assert profile["architecture"]["num_layers"] == 61
    assert [f["code"] for f in profile["findings"] if f["code"].startswith("witnesses")] == ["witnesses-failed"]
    for probe in (["not", "a", "dict"], {"built": True, "params": "x"}, {"built": "yes", "params": {"total": "1"}}):
        build_profile(raw_with(probe))  # type: ignore[arg-type]
