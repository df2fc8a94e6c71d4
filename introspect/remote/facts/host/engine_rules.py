"""What each engine requires of the target model class per speculative method, and where it says so.

Standard library only, Python 3.8+. Each requirement names the pattern of the engine's
own line that states it; engine_readiness.py finds that line in the installed version
and cites it, so a moved line is cited where it now is and a removed one turns the
verdict into "unknown" (never "yes"). Read in SGLang 0.5.23 and vLLM 0.33.0:

SGLang (``python/sglang/srt``):

* EAGLE3 and DFLASH: ``model_executor/model_runner_components/attention_backend_setup.py``
  ``configure_aux_hidden_state_capture`` raises ``ValueError`` unless
  ``hasattr(model, "set_eagle3_layers_to_capture")`` (EAGLE3) or
  ``set_dflash_layers_to_capture`` (DFLASH; DSPARK also accepts
  ``set_dspark_layers_to_capture``) on the target model.
* EAGLE, EAGLE3 and NEXTN (an alias of EAGLE, ``speculative/spec_registry.py``
  ``_RESERVED_ALIASES``) share the target's embedding and head:
  ``speculative/pp_draft_embedding.py`` ``target_model.get_embed_and_head()``.
* DFLASH embeds the draft's tokens with the target's embedding:
  ``speculative/dflash_worker_v2.py`` ``target_model.get_input_embeddings()``.
* NEXTN: ``configs/model_config.py`` rewrites the target's architecture to its NextN / MTP
  class under ``is_draft_model`` (``DeepseekV3ForCausalLM`` -> ``DeepseekV3ForCausalLMNextN``);
  that class must be registered (an ``EntryClass`` of ``models/*.py``).
* STANDALONE (a separate draft model: ``StandaloneDraftWorker.init_lm_head`` shares nothing)
  and NGRAM ask nothing of the target class.

vLLM (``vllm``):

* eagle3: ``v1/worker/gpu_model_runner.py`` raises ``RuntimeError`` when
  ``not supports_eagle3(self.get_model())``: the class must inherit ``SupportsEagle3``
  (``model_executor/models/interfaces.py``, a runtime-checkable Protocol).
* dflash, dspark and extract_hidden_states turn on the same auxiliary hidden-state
  outputs (``v1/worker/gpu/spec_decode/eagle/eagle3_utils.py``
  ``requires_aux_hidden_states``), hence the same ``SupportsEagle3`` check.
* mtp (and its per-family names, ``config/speculative.py`` ``MTPModelTypes``):
  ``SpeculativeConfig.hf_config_override`` rewrites the target's model_type /
  architecture to its MTP class, which must be registered
  (``model_executor/models/registry.py``).
* eagle, ngram, ngram_gpu, suffix, draft_model ask nothing of the target class.
"""

from __future__ import annotations

from typing import Any, Dict, Tuple


def _hook_call(*hooks: str) -> str:
    names = "|".join(hooks)
    return r"hasattr\(\s*(?:self\.)?model\s*,\s*[\"'](?:%s)[\"']|\bmodel\.(?:%s)\(" % (names, names)


SGLANG_CAPTURE = ("srt/model_executor/model_runner_components/*.py", "srt/model_executor/model_runner.py")
SGLANG_SPEC = ("srt/speculative/*.py",)

SGLANG_CHECKS: Dict[str, Dict[str, Any]] = {
    "eagle3": {"hooks": ("set_eagle3_layers_to_capture",), "files": SGLANG_CAPTURE,
               "pattern": _hook_call("set_eagle3_layers_to_capture")},
    "dflash": {"hooks": ("set_dflash_layers_to_capture",), "files": SGLANG_CAPTURE,
               "pattern": _hook_call("set_dflash_layers_to_capture")},
    "dspark": {"hooks": ("set_dspark_layers_to_capture", "set_dflash_layers_to_capture"), "files": SGLANG_CAPTURE,
               "pattern": _hook_call("set_dspark_layers_to_capture")},
    # A draft model of its own embedding asks for get_embed_and_head_for_draft first, when the target has it.
    "embed_head": {"hooks": ("get_embed_and_head", "get_embed_and_head_for_draft"), "files": SGLANG_SPEC,
                   "pattern": r"(?:target_model|model_runner\.model)\.get_embed_and_head\(\)"},
    "input_embeddings": {"hooks": ("get_input_embeddings",), "files": ("srt/speculative/dflash*.py",),
                         "pattern": r"target_model\.get_input_embeddings\(\)"},
    "nextn": {"draft": ("srt/configs/model_config.py", None, "is_draft_model")},
}

# method -> (kind, checks); a method with no checks asks nothing of the class (FREE: where that is seen).
SGLANG_METHODS: Dict[str, Tuple[str, Tuple[str, ...]]] = {
    "DFLASH": ("dflash", ("dflash", "input_embeddings")),
    "DSPARK": ("dspark", ("dspark",)),
    "EAGLE": ("eagle", ("embed_head",)),
    "EAGLE3": ("eagle3", ("eagle3", "embed_head")),
    "NEXTN": ("mtp", ("nextn", "embed_head")),
    "STANDALONE": ("standalone", ()),
    "NGRAM": ("ngram", ()),
}

SGLANG_FREE: Dict[str, Tuple[Tuple[str, ...], str]] = {
    "STANDALONE": (("srt/speculative/standalone_worker_v2.py", "srt/speculative/standalone_worker.py"),
                   r"def init_lm_head"),
    "NGRAM": (("srt/speculative/spec_info.py",), r"^\s*NGRAM\s*="),
}

# Names the engine accepts besides its enum (SGLang maps NEXTN to EAGLE).
SGLANG_ALIASES = ("srt/speculative/spec_registry.py", "_RESERVED_ALIASES")

VLLM_RUNNER = ("v1/worker/gpu_model_runner.py", "v1/worker/gpu/spec_decode/eagle/eagle3_utils.py",
               "v1/spec_decode/eagle.py")
_EAGLE3 = {"base": ("model_executor/models/interfaces.py", "SupportsEagle3"), "files": VLLM_RUNNER,
           "pattern": r"not supports_eagle3\("}

VLLM_CHECKS: Dict[str, Dict[str, Any]] = {
    "eagle3": _EAGLE3,
    # The method turns on the EAGLE-3 auxiliary outputs: where it does is cited in the why.
    "aux": dict(_EAGLE3, trigger=(("v1/worker/gpu/spec_decode/eagle/eagle3_utils.py", "v1/worker/gpu_model_runner.py"),
                                  r"method in \([^)]*[\"']{method}[\"']|use_{method}\(\)")),
    "mtp": {"draft": ("config/speculative.py", "hf_config_override", None)},
}

VLLM_METHODS: Dict[str, Tuple[str, Tuple[str, ...]]] = {
    "eagle3": ("eagle3", ("eagle3",)),
    "dflash": ("dflash", ("aux",)),
    "dspark": ("dspark", ("aux",)),
    "extract_hidden_states": ("other", ("aux",)),
    "mtp": ("mtp", ("mtp",)),
    "eagle": ("eagle", ()),
    "ngram": ("ngram", ()),
    "ngram_gpu": ("ngram", ()),
    "suffix": ("other", ()),
    "draft_model": ("draft_model", ()),
}

VLLM_FREE: Dict[str, Tuple[Tuple[str, ...], str]] = {
    "eagle": (VLLM_RUNNER[:1], r"use_eagle\(\)"),
    "ngram": (VLLM_RUNNER[:1], r"method == [\"']ngram[\"']"),
    "ngram_gpu": (VLLM_RUNNER[:1], r"use_ngram_gpu\(\)"),
    "suffix": (VLLM_RUNNER[:1], r"method == [\"']suffix[\"']"),
    "draft_model": (VLLM_RUNNER[:1], r"uses_draft_model\(\)"),
}

# vLLM's per-family MTP method names, all served by the one "mtp" rule.
VLLM_MTP_TYPES = ("config/speculative.py", "MTPModelTypes")

RULES = {
    "sglang": (SGLANG_CHECKS, SGLANG_METHODS, SGLANG_FREE),
    "vllm": (VLLM_CHECKS, VLLM_METHODS, VLLM_FREE),
}
