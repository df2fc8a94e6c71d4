"""Per-model speculative readiness read from the real SGLang 0.5.23 and vLLM 0.33.0 sources, and from fake trees.

The engines venv (tests/fixtures/engine_venv.py) holds both distributions without torch;
their sources are read with ``ast`` (engine_readiness.py), never imported. Every
expectation below was read in those versions' sources (paths relative to the package):

SGLang 0.5.23:

* srt/model_executor/model_runner_components/attention_backend_setup.py:55
  ``if not hasattr(model, "set_eagle3_layers_to_capture"):`` (raises ValueError) and :65
  ``elif hasattr(model, "set_dflash_layers_to_capture"):`` (else raises ValueError);
* srt/speculative/pp_draft_embedding.py:95 ``return target_model.get_embed_and_head()`` (EAGLE, EAGLE3, NEXTN);
* srt/configs/model_config.py:1032 ``if is_draft_model and self.hf_config.architectures[0] in [``
  ("DeepseekV3ForCausalLM", ...) -> "DeepseekV3ForCausalLMNextN" (srt/models/deepseek_nextn.py:248),
  :1134 Qwen3NextForCausalLM -> Qwen3NextForCausalLMMTP;
* srt/models/deepseek_v2.py:3458 ``def set_eagle3_layers_to_capture`` and :3475 ``def
  set_dflash_layers_to_capture`` in DeepseekV2ForCausalLM (DeepseekV3ForCausalLM at :3518 inherits them);
  srt/models/kimi_k25.py:928 / :941 hand both calls to ``self.language_model`` (DeepseekV3ForCausalLM);
* srt/models/qwen3.py:778 / :793, srt/models/llama.py:929 / :943 define both hooks;
  srt/models/mistral.py:33 ``class MistralForCausalLM(LlamaForCausalLM)`` inherits them from llama.py;
* lacking: srt/models/gemma2.py:335 Gemma2ForCausalLM defines neither hook; srt/models/qwen2.py:781
  Qwen2ForCausalLM defines set_eagle3_layers_to_capture but no set_dflash_layers_to_capture;
  srt/models/qwen3_vl.py:1688 ``self.model.set_dflash_layers_to_capture(...)`` on Qwen3LLMModel
  (:1169, a Qwen3Model / Qwen2Model), which defines none.

vLLM 0.33.0:

* v1/worker/gpu_model_runner.py:5173 ``if not supports_eagle3(self.get_model()):`` (raises RuntimeError);
  model_executor/models/interfaces.py:1714 ``class SupportsEagle3``;
  v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:22 dflash / dspark / extract_hidden_states turn it on;
* model_executor/models/kimi_k25.py:291, deepseek_v2.py:1872, qwen3.py:280, llama.py:464 and
  qwen3_next.py:813 inherit SupportsEagle3; gemma2.py:316 ``class Gemma2ForCausalLM(nn.Module,
  SupportsLoRA, SupportsPP)`` does not; mistral.py:236 inherits it through LlamaForCausalLM;
* config/speculative.py:749 ``if hf_config.model_type in (`` "deepseek_v3" -> "deepseek_mtp" ->
  DeepSeekMTPModel (model_executor/models/deepseek_mtp.py:240 ``class DeepSeekMTP``); :908 qwen3_next.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from introspect.remote.facts.host import engine_readiness as er
from introspect.remote.facts.host import engines
from tests.engines.targets import drafter, target
from tests.fixtures.engine_venv import SGLANG_VERSION, VLLM_VERSION, engines_venv, venv_or_skip

SG_CAPTURE = "srt/model_executor/model_runner_components/attention_backend_setup.py"
slow = pytest.mark.slow  # the real engines' sources: about half a second per class and engine


@pytest.fixture(scope="module")
def real_engines() -> dict[str, dict[str, Any]]:
    """The engine facts describe_engine reads, built here from the installed trees (nothing imported)."""
    venv = venv_or_skip(engines_venv, "the pinned engines")
    site = next((venv / "lib").glob("python3*/site-packages"))
    out = {}
    for name, version, reader in (("sglang", SGLANG_VERSION, engines.sglang_architectures),
                                  ("vllm", VLLM_VERSION, lambda root, _d: engines.vllm_architectures(root))):
        root = str(site / name)
        spec = engines.sglang_speculative(root) if name == "sglang" else engines.vllm_speculative(root)
        out[name] = {"name": name, "version": version, "location": root,
                     "architectures": reader(root, time.time() + 60)[0], "speculative": spec[0]}
    return out


# Parsed modules per engine tree, shared by this module's calls (a probe makes one call per engine).
PARSED: dict[str, dict[str, Any]] = {}


def ready(engine: dict[str, Any], arch: str, model_type: str | None = None) -> dict[str, dict[str, Any]]:
    result, notes = er.engine_readiness(engine, {"architectures": [arch], "model_type": model_type},
                                        time.time() + 60, PARSED.setdefault(engine["location"], {}))
    assert result is not None and notes == []
    assert result["files_parsed"] <= er.MAX_PARSED  # new parses only: the shared cache holds the rest
    return {m["method"]: m for m in result["methods"]}


def site(method: dict[str, Any]) -> tuple[str, int]:
    return method["requirement"]["file"], method["requirement"]["line"]


def provided(method: dict[str, Any]) -> tuple[str, int, str]:
    where = method["provided_by"]
    return where["file"], where["line"], where["class"]


@slow
def test_sglang_kimi_k25_wrapper_is_ready_through_its_language_model(real_engines: dict) -> None:
    methods = ready(real_engines["sglang"], "KimiK25ForConditionalGeneration", "kimi_k25")
    eagle3, dflash = methods["EAGLE3"], methods["DFLASH"]
    assert eagle3["verdict"] == "yes" and site(eagle3) == (SG_CAPTURE, 55)
    assert provided(eagle3) == ("srt/models/kimi_k25.py", 928, "KimiK25ForConditionalGeneration")
    capture = eagle3["checks"][0]
    assert capture["delegate"]["attribute"] == "language_model"
    assert (capture["delegate"]["file"], capture["delegate"]["line"]) == ("srt/models/deepseek_v2.py", 3458)
    assert dflash["verdict"] == "yes" and site(dflash) == (SG_CAPTURE, 65)
    assert provided(dflash) == ("srt/models/kimi_k25.py", 941, "KimiK25ForConditionalGeneration")
    # Every EAGLE-family method shares the target's embedding and head.
    assert [c["requirement"]["file"] for c in eagle3["checks"]] == [SG_CAPTURE, "srt/speculative/pp_draft_embedding.py"]
    assert eagle3["checks"][1]["requirement"]["line"] == 95
    # No draft rewrite for the wrapper in model_config.py: no path-less NEXTN head.
    assert methods["NEXTN"]["verdict"] == "no" and methods["NEXTN"]["kind"] == "mtp"
    assert methods["NGRAM"]["verdict"] == "yes" and methods["UNO"]["verdict"] == "unknown"


@slow
def test_sglang_deepseek_v3_inherits_hooks_and_has_a_nextn_head(real_engines: dict) -> None:
    methods = ready(real_engines["sglang"], "DeepseekV3ForCausalLM", "deepseek_v3")
    assert provided(methods["EAGLE3"]) == ("srt/models/deepseek_v2.py", 3458, "DeepseekV2ForCausalLM")
    assert provided(methods["DFLASH"]) == ("srt/models/deepseek_v2.py", 3475, "DeepseekV2ForCausalLM")
    nextn = methods["NEXTN"]
    assert nextn["verdict"] == "yes"
    draft = nextn["checks"][0]
    assert (draft["requirement"]["file"], draft["requirement"]["line"]) == ("srt/configs/model_config.py", 1032)
    assert (draft["provided_by"]["file"], draft["provided_by"]["line"]) == ("srt/models/deepseek_nextn.py", 248)
    assert draft["provided_by"]["class"] == "DeepseekV3ForCausalLMNextN"


@pytest.mark.parametrize(("arch", "model_type", "file", "eagle3_line", "dflash_line"), [
    ("Qwen3ForCausalLM", "qwen3", "srt/models/qwen3.py", 778, 793),
    ("LlamaForCausalLM", "llama", "srt/models/llama.py", 929, 943),
    # Defined in llama.py, inherited across modules (srt/models/mistral.py:33).
    ("MistralForCausalLM", "mistral", "srt/models/llama.py", 929, 943),
])
@slow
def test_sglang_dense_classes_define_both_hooks(real_engines: dict, arch: str, model_type: str, file: str,
                                                eagle3_line: int, dflash_line: int) -> None:
    methods = ready(real_engines["sglang"], arch, model_type)
    assert provided(methods["EAGLE3"])[:2] == (file, eagle3_line)
    assert provided(methods["DFLASH"])[:2] == (file, dflash_line)
    assert methods["NEXTN"]["verdict"] == "no"


@slow
def test_sglang_qwen3_next_hands_hooks_to_its_model_and_has_an_mtp_head(real_engines: dict) -> None:
    methods = ready(real_engines["sglang"], "Qwen3NextForCausalLM", "qwen3_next")
    assert methods["EAGLE3"]["verdict"] == methods["DFLASH"]["verdict"] == "yes"
    assert methods["DFLASH"]["checks"][0]["delegate"]["class"] == "Qwen3NextModel"
    nextn = methods["NEXTN"]["checks"][0]
    assert nextn["requirement"]["line"] == 1134 and nextn["provided_by"]["class"] == "Qwen3NextForCausalLMMTP"


@slow
def test_sglang_classes_lacking_the_hooks_are_no(real_engines: dict) -> None:
    gemma = ready(real_engines["sglang"], "Gemma2ForCausalLM", "gemma2")
    for name, line in (("EAGLE3", 55), ("DFLASH", 65)):
        assert gemma[name]["verdict"] == "no" and site(gemma[name]) == (SG_CAPTURE, line)
        assert gemma[name]["provided_by"] is None and "Gemma2ForCausalLM defines no" in gemma[name]["why"]
    qwen2 = ready(real_engines["sglang"], "Qwen2ForCausalLM", "qwen2")
    assert qwen2["EAGLE3"]["verdict"] == "yes" and provided(qwen2["EAGLE3"])[:2] == ("srt/models/qwen2.py", 781)
    assert qwen2["DFLASH"]["verdict"] == "no"
    # The wrapper defines the hook, but the model it hands the call to does not: no.
    vl = ready(real_engines["sglang"], "Qwen3VLForConditionalGeneration", "qwen3_vl")
    assert vl["DFLASH"]["verdict"] == "no" and "Qwen3LLMModel defines no" in vl["DFLASH"]["why"]
    # Its EAGLE3 hook falls back to setting layers_to_capture itself (srt/models/qwen3_vl.py:1792).
    assert vl["EAGLE3"]["verdict"] == "yes"


@slow
def test_vllm_supports_eagle3_decides_eagle3_and_dflash(real_engines: dict) -> None:
    runner = ("v1/worker/gpu_model_runner.py", 5173)
    for arch, model_type, file, line in (
            ("KimiK25ForConditionalGeneration", "kimi_k25", "model_executor/models/kimi_k25.py", 291),
            ("DeepseekV3ForCausalLM", "deepseek_v3", "model_executor/models/deepseek_v2.py", 1872),
            ("Qwen3ForCausalLM", "qwen3", "model_executor/models/qwen3.py", 280),
            ("LlamaForCausalLM", "llama", "model_executor/models/llama.py", 464),
            ("Qwen3NextForCausalLM", "qwen3_next", "model_executor/models/qwen3_next.py", 813),
            ("MistralForCausalLM", "mistral", "model_executor/models/llama.py", 464)):
        methods = ready(real_engines["vllm"], arch, model_type)
        for name in ("eagle3", "dflash"):
            assert methods[name]["verdict"] == "yes", (arch, methods[name])
            assert site(methods[name]) == runner and provided(methods[name])[:2] == (file, line)
        assert "eagle3_utils.py:22" in methods["dflash"]["why"]
    gemma = ready(real_engines["vllm"], "Gemma2ForCausalLM", "gemma2")
    assert gemma["eagle3"]["verdict"] == gemma["dflash"]["verdict"] == "no"
    assert "does not inherit SupportsEagle3 (model_executor/models/interfaces.py:1714)" in gemma["eagle3"]["why"]
    assert gemma["eagle"]["verdict"] == "yes" and gemma["ngram"]["verdict"] == "yes"


@slow
def test_vllm_mtp_follows_the_model_type_rewrite(real_engines: dict) -> None:
    deepseek = ready(real_engines["vllm"], "DeepseekV3ForCausalLM", "deepseek_v3")["mtp"]
    assert deepseek["verdict"] == "yes" and site(deepseek) == ("config/speculative.py", 749)
    assert provided(deepseek) == ("model_executor/models/deepseek_mtp.py", 240, "DeepSeekMTP")
    assert "deepseek_mtp" in deepseek["aliases"] and "mtp" not in deepseek["aliases"]
    qwen_next = ready(real_engines["vllm"], "Qwen3NextForCausalLM", "qwen3_next")["mtp"]
    assert qwen_next["verdict"] == "yes" and site(qwen_next) == ("config/speculative.py", 908)
    assert ready(real_engines["vllm"], "KimiK25ForConditionalGeneration", "kimi_k25")["mtp"]["verdict"] == "no"


# ----------------------------------------------------------------- fake trees

SPEC_INFO = "from enum import Enum, auto\nclass SpeculativeAlgorithm(Enum):\n    EAGLE3 = auto()\n    DFLASH = auto()\n" \
            "    NGRAM = auto()\n    NONE = auto()\n"
CAPTURE = ("def configure(model):\n    if not hasattr(model, \"{hook}\"):\n        raise ValueError('no')\n"
           "    if hasattr(model, \"set_dflash_layers_to_capture\"):\n        model.set_dflash_layers_to_capture([])\n")


def fake_sglang(root: Path, models: dict[str, str], hook: str = "set_eagle3_layers_to_capture") -> dict[str, Any]:
    """A made-up SGLang tree: the enum, the capture check (naming ``hook``), and ``models``."""
    pkg = root / "sglang"
    files = {"srt/speculative/spec_info.py": SPEC_INFO,
             "srt/model_executor/model_runner_components/attention_backend_setup.py": CAPTURE.format(hook=hook),
             "srt/speculative/pp_draft_embedding.py": "def share(target_model):\n"
                                                      "    return target_model.get_embed_and_head()\n",
             **{f"srt/models/{name}.py": text for name, text in models.items()}}
    for rel, text in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    deadline = time.time() + 30
    return {"name": "sglang", "version": "9.9.9", "location": str(pkg),
            "architectures": engines.sglang_architectures(str(pkg), deadline)[0],
            "speculative": engines.sglang_speculative(str(pkg))[0]}


HOOKS = ("    def set_eagle3_layers_to_capture(self, ids=None):\n        self.ids = ids\n"
         "    def set_dflash_layers_to_capture(self, ids):\n        self.ids = ids\n"
         "    def get_embed_and_head(self):\n        return None, None\n")


def test_a_base_class_in_another_module_provides_the_hooks(tmp_path: Path) -> None:
    engine = fake_sglang(tmp_path, {
        "base": "import torch\nclass BaseForCausalLM(torch.nn.Module):\n" + HOOKS,
        "child": "from .base import BaseForCausalLM as Base\nclass ChildForCausalLM(Base):\n    pass\n"
                 "EntryClass = [ChildForCausalLM]\n",
        "plain": "import torch\nclass PlainForCausalLM(torch.nn.Module):\n    pass\nEntryClass = PlainForCausalLM\n"})
    child = ready(engine, "ChildForCausalLM")
    assert child["EAGLE3"]["verdict"] == "yes" and provided(child["EAGLE3"]) == ("srt/models/base.py", 3, "BaseForCausalLM")
    assert site(child["EAGLE3"]) == ("srt/model_executor/model_runner_components/attention_backend_setup.py", 2)
    plain = ready(engine, "PlainForCausalLM")
    assert plain["EAGLE3"]["verdict"] == plain["DFLASH"]["verdict"] == "no"
    assert ready(engine, "NotRegisteredForCausalLM")["EAGLE3"]["verdict"] == "no"


def test_a_renamed_hook_is_unknown_never_yes(tmp_path: Path) -> None:
    """A future engine checks another name: the requirement this reader knows is not there."""
    engine = fake_sglang(tmp_path, {"m": "class MForCausalLM:\n" + HOOKS + "EntryClass = [MForCausalLM]\n"},
                         hook="set_aux_hidden_layers")
    eagle3 = ready(engine, "MForCausalLM")["EAGLE3"]
    assert eagle3["verdict"] == "unknown" and eagle3["requirement"] is None
    assert "was not found" in eagle3["why"]


def test_an_unresolved_base_is_unknown(tmp_path: Path) -> None:
    engine = fake_sglang(tmp_path, {"m": "from sglang.srt.models.gone import Gone\nclass MForCausalLM(Gone):\n"
                                         "    pass\nEntryClass = [MForCausalLM]\n"})
    eagle3 = ready(engine, "MForCausalLM")["EAGLE3"]
    assert eagle3["verdict"] == "unknown" and "sglang.srt.models.gone.Gone" in eagle3["why"]


def test_a_wrapper_is_as_ready_as_the_model_it_hands_the_call_to(tmp_path: Path) -> None:
    wrapper = ("from sglang.srt.models.inner import {inner}\nclass WForConditionalGeneration:\n"
               "    def __init__(self):\n        self.language_model = None\n"
               "        self.language_model = {inner}()\n"
               "    def set_eagle3_layers_to_capture(self, ids=None):\n"
               "        self.language_model.set_eagle3_layers_to_capture(ids)\n"
               "    def get_embed_and_head(self):\n        return self.language_model.get_embed_and_head()\n"
               "EntryClass = [WForConditionalGeneration]\n")
    inner = "class Ready:\n" + HOOKS + "class Bare:\n    pass\n"
    ok = fake_sglang(tmp_path / "a", {"inner": inner, "w": wrapper.format(inner="Ready")})
    assert ready(ok, "WForConditionalGeneration")["EAGLE3"]["verdict"] == "yes"
    bare = fake_sglang(tmp_path / "b", {"inner": inner, "w": wrapper.format(inner="Bare")})
    eagle3 = ready(bare, "WForConditionalGeneration")["EAGLE3"]
    assert eagle3["verdict"] == "no" and "self.language_model (Bare)" in eagle3["why"]


def test_the_file_cap_and_the_deadline_make_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = fake_sglang(tmp_path, {"base": "class B:\n" + HOOKS,
                                    "m": "from .base import B\nclass MForCausalLM(B):\n    pass\nEntryClass = [MForCausalLM]\n"})
    monkeypatch.setattr(er, "MAX_PARSED", 1)
    result, _ = er.engine_readiness(engine, {"architectures": ["MForCausalLM"]}, time.time() + 60)
    assert result is not None and {m["verdict"] for m in result["methods"] if m["method"] != "NGRAM"} == {"unknown"}
    assert any("the cap" in note for note in result["notes"])
    monkeypatch.setattr(er, "MAX_PARSED", 80)
    late, _ = er.engine_readiness(engine, {"architectures": ["MForCausalLM"]}, time.time() - 1)
    assert late is not None and all(m["verdict"] == "unknown" for m in late["methods"])
    assert any("deadline" in note for note in late["notes"])


def test_targets_come_from_config_json(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"architectures": ["KimiK25ForConditionalGeneration"], '
                                          '"model_type": "kimi_k25", "text_config": {"architectures": '
                                          '["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3"}}')
    assert er.model_targets(str(tmp_path)) == {"architectures": ["KimiK25ForConditionalGeneration"],
                                               "model_type": "kimi_k25"}
    assert er.model_targets(str(tmp_path / "missing")) is None and er.model_targets(None) is None


# ------------------------------------------------- the profile's engines section

def engines_raw(real_engines: dict, arch: str, model_type: str) -> dict[str, Any]:
    """The raw ``engines`` facts of a model task on a host with both engines, for ``arch``."""
    out = []
    for engine in real_engines.values():
        facts = dict(engine, layout="read", quantization=None, notes=[])
        facts["readiness"], _ = er.engine_readiness(engine, {"architectures": [arch], "model_type": model_type},
                                                    time.time() + 60, PARSED.setdefault(engine["location"], {}))
        out.append(facts)
    return {"searched": ["sglang", "vllm"], "engines": out}


@slow
def test_a_drafter_no_engine_can_serve_is_an_error_citing_the_requirement(real_engines: dict) -> None:
    from introspect.analysis.serving.engines import analyze_engines

    arch = target("Gemma2ForCausalLM", mtp_layers=0, drafters=[drafter("eagle3", "/m/gemma2-eagle3"),
                                                               drafter("unknown", "/m/other")])
    section, findings = analyze_engines(engines_raw(real_engines, "Gemma2ForCausalLM", "gemma2"), arch)
    errors = [f for f in findings if f.code == "drafter-unservable"]
    assert len(errors) == 1 and errors[0].severity.value == "error"
    assert f"sglang {SGLANG_VERSION} EAGLE3: no, requires set_eagle3_layers_to_capture ({SG_CAPTURE}:55)" \
        in errors[0].message
    assert f"vllm {VLLM_VERSION} eagle3: no, requires SupportsEagle3 (v1/worker/gpu_model_runner.py:5173)" \
        in errors[0].message
    assert errors[0].fix is not None and errors[0].fix.startswith("# ")
    readiness = section.to_dict()["engines"][0]["readiness"]
    assert readiness["class_site"] == {"file": "srt/models/gemma2.py", "line": 335, "class": "Gemma2ForCausalLM"}


@slow
def test_a_drafter_one_engine_cannot_serve_is_a_warning(real_engines: dict) -> None:
    """Qwen2: SGLang's Qwen2ForCausalLM has no DFlash hook (srt/models/qwen2.py), vLLM's inherits SupportsEagle3."""
    from introspect.analysis.serving.engines import analyze_engines

    arch = target("Qwen2ForCausalLM", drafters=[drafter("dflash", "/m/q2-dflash"), drafter("eagle3", "/m/q2-eagle3")])
    _section, findings = analyze_engines(engines_raw(real_engines, "Qwen2ForCausalLM", "qwen2"), arch)
    codes = [(f.code, f.severity.value) for f in findings if f.code.startswith("drafter-")]
    assert codes == [("drafter-engine-unservable", "warning")]
    assert f"sglang {SGLANG_VERSION} DFLASH: no" in findings[-1].message


@slow
def test_the_report_shows_each_method_with_its_source(real_engines: dict) -> None:
    from rich.console import Console

    from introspect.analysis.serving.engines import analyze_engines
    from introspect.cli.render_serving import engines_section

    arch = target("DeepseekV3ForCausalLM", mtp_layers=1)
    section, findings = analyze_engines(engines_raw(real_engines, "DeepseekV3ForCausalLM", "deepseek_v3"), arch)
    assert not [f for f in findings if f.code.startswith("drafter-")]
    console = Console(width=400, record=True, color_system=None)
    console.print(engines_section(section))
    text = console.export_text()
    assert "DFlash yes, EAGLE-3 yes for DeepseekV3ForCausalLM" in text
    assert "yes (defines DeepseekV2ForCausalLM.set_dflash_layers_to_capture (srt/models/deepseek_v2.py:3475))" in text
    assert "rewrites DeepseekV3ForCausalLM to DeepseekV3ForCausalLMNextN (registered)" in text
    assert "mtp (+" in text  # vLLM's per-family MTP names are one method


@slow
def test_probe_reports_readiness_end_to_end(tmp_path: Path) -> None:
    """The model task reads config.json's architectures and the engines venv's sources (never imported)."""
    import json

    from tests.conftest import run_cli

    python = venv_or_skip(engines_venv, "the pinned engines") / "bin" / "python"
    model = tmp_path / "Gemma2"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({
        "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "hidden_size": 2304,
        "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
        "intermediate_size": 9216, "vocab_size": 256000, "max_position_embeddings": 8192}))
    result = run_cli("probe", "--model", str(model), "--python", str(python), "--no-tokenizer", "--json")
    profile = result.json()
    by_name = {e["name"]: e for e in profile["engines"]["engines"]}
    sglang = {m["method"]: m for m in by_name["sglang"]["readiness"]["methods"]}
    assert sglang["EAGLE3"]["verdict"] == "no" and sglang["EAGLE3"]["requirement"]["line"] == 55
    assert sglang["NGRAM"]["verdict"] == "yes"
    vllm = {m["method"]: m for m in by_name["vllm"]["readiness"]["methods"]}
    assert vllm["eagle3"]["verdict"] == "no" and vllm["eagle"]["verdict"] == "yes"
