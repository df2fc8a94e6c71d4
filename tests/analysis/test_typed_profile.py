"""The aggregator builds the typed profile: sections are the document models, the JSON is theirs,
and damaged raw facts become findings naming the value the records cannot hold."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from introspect.analysis.architecture.section import architecture_section
from introspect.analysis.profile import analyze, build_profile, build_profile_document
from introspect.documents.profile import ProfileDocument
from introspect.documents.profile_architecture import Architecture, Quantization, SafetensorsCount
from introspect.documents.profile_files import Target
from tests.golden.cases import DATA, config_raw

RAW = DATA / "golden" / "raw"


def _raw(name: str) -> dict[str, Any]:
    return json.loads((RAW / f"{name}.json").read_text(encoding="utf-8"))


def _messages(profile: dict[str, Any], code: str) -> list[str]:
    return [f["message"] for f in profile["findings"] if f["code"] == code]


def test_the_document_is_typed_and_its_json_is_build_profile() -> None:
    """Kimi-K2.5 INT4 over 8 shards: the quantization and the weights' count are records, not dicts."""
    raw = _raw("kimi-k25-int4-8shards")
    profile = analyze(raw)
    assert isinstance(profile.architecture, Architecture) and isinstance(profile.target, Target)
    document = build_profile_document(raw)
    assert isinstance(document, ProfileDocument)
    quant = document.architecture.quantization
    assert isinstance(quant, Quantization) and (quant.method, quant.bits) == ("compressed-tensors", 4)
    stored = document.architecture.params.safetensors
    assert isinstance(stored, SafetensorsCount) and stored.shards == 8
    assert document.architecture.params.total == stored.total - stored.mtp
    assert document.to_json() == json.dumps(build_profile(raw), indent=2)


def test_the_architecture_section_answers_with_its_record() -> None:
    config = json.loads((DATA / "realconfigs" / "deepseek-v3" / "config.json").read_text(encoding="utf-8"))
    arch, findings = architecture_section(config, config_path="/m/config.json")
    assert (arch.attention.type, arch.attention.kv_lora_rank, arch.moe.routed_experts) == ("MLA", 512, 256)
    assert arch.layers.pattern is not None and len(arch.layers.pattern) == arch.num_layers == 61
    assert arch.evidence.attention is not None and arch.evidence.attention["kv_lora_rank"] == 512
    assert arch.summary.experts is not None and arch.summary.experts.startswith("MoE: 256 routed")
    assert not [f for f in findings if f.code == "analysis-failed"]


def test_unset_members_stay_out_of_the_json() -> None:
    """A dense model: no quantization extras, no drafters, no text_architectures (the document's
    optional members appear only where the analysis set them, as before the records)."""
    config = json.loads((DATA / "realconfigs" / "llama-3.1-8b" / "config.json").read_text(encoding="utf-8"))
    architecture = build_profile(config_raw("llama", config))["architecture"]
    assert architecture["quantization"] is None and "text_architectures" not in architecture
    assert "attention_chunk_size" not in architecture["attention"] and "sparse_indexer" not in architecture["attention"]
    assert list(architecture["speculative"]) == ["mtp_layers", "mtp_source", "drafters", "drafter_plan"]


@pytest.mark.parametrize(("where", "value", "words"), [
    (("target", "port"), "22", "target.port is str, expected an integer"),
    (("timings", "files"), "slow", "timings.files is str, expected a number"),
])
def test_damaged_scalars_are_dropped_with_a_finding(where: tuple[str, str], value: object, words: str) -> None:
    raw = _raw("kimi-k2.6-loaded")
    raw.setdefault(where[0], {})[where[1]] = value
    profile = build_profile(raw)
    assert any(words in message for message in _messages(profile, "raw-damaged")), profile["findings"]
    assert profile[where[0]].get(where[1]) is None


def test_a_value_a_section_cannot_hold_empties_that_section_and_names_it() -> None:
    """One listing row with a list for its size: the files section is left empty, the finding says
    where and what (not pydantic's paragraph), and every other section stands."""
    raw = _raw("kimi-k2.6-loaded")
    clean = build_profile(copy.deepcopy(raw))
    raw["files"]["listing"][0]["size"] = [1]
    profile = build_profile(raw)
    [message] = _messages(profile, "raw-damaged")
    assert message == ("raw facts: the files facts are damaged (listing.0.size: input should be a valid integer, "
                       "not list); that section is left empty")
    assert profile["files"]["listing"] == [] and profile["files"]["model_path"] is None
    assert profile["architecture"] == clean["architecture"] and profile["tokenizer"] == clean["tokenizer"]


def test_settings_and_cache_are_records_of_the_raw_blocks() -> None:
    raw = _raw("kimi-k2.6-loaded")
    raw["cache"] = {"hit": True, "digest": "abc"}
    raw["settings"] = {"inventory": None, "remote_code": {"value": True, "source": "default", "where": "built-in"}}
    document = build_profile_document(raw)
    assert document.cache is not None and document.cache.hit is True
    assert document.settings is not None and document.settings.remote_code.source == "default"
    raw["settings"] = {"inventory": None}  # no remote_code: not a settings block
    damaged = build_profile(raw)
    assert "settings" not in damaged
    assert any("the settings facts are damaged (remote_code: field required" in m
               for m in _messages(damaged, "raw-damaged"))


def test_a_model_code_witness_that_settles_the_layers_keeps_the_documented_order() -> None:
    """The layers section's members come in the document's order whichever witness set them last."""
    from tests.witnesses.test_code_layers import mixer
    from tests.witnesses.test_witnesses import DSV3_ACTIVE, DSV3_COMPONENTS, built_probe, raw_with

    probe = built_probe(DSV3_COMPONENTS, DSV3_ACTIVE)
    probe["layers"]["runs"] = [dict(run, mixers=[mixer("DeepseekV3Attention", outputs={"kv_a_proj_with_mqa": 576},
                                                       attrs={"kv_lora_rank": 512, "qk_rope_head_dim": 64})])
                               for run in probe["layers"]["runs"]]
    layers = build_profile(raw_with(probe))["architecture"]["layers"]
    assert layers["settled_by"] == "model_code" and layers["understood"] is True
    assert list(layers) == ["pattern", "kinds", "pure_attention", "source", "ffn", "ffn_source", "understood",
                            "sources", "why", "settled_by"]


def test_every_golden_raw_file_profiles_into_a_valid_document() -> None:
    for path in sorted(Path(RAW).glob("*.json")):
        document = build_profile_document(json.loads(path.read_text(encoding="utf-8")))
        assert ProfileDocument.model_validate(json.loads(document.to_json())) == document, path.name
