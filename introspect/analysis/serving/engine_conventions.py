"""How each serving engine version reads a drafter and its target: one table per engine version. Pure data.

The same drafter ``config.json`` means different things to SGLang and vLLM. Each row says what one
version does and cites the line of its installed source that does it (``Cite.path`` is relative to
site-packages; ``Cite.url`` the same line on GitHub). tests/engines/test_engine_conventions.py reads every
cited line in the real distributions (installed ``--no-deps``) and fails when a line no longer says
what the row claims, so an engine bump cannot silently keep a stale rule.

Layer ids: the trainers (SpecForge, the DFlash reference) and the published drafters write
**0-based decoder-layer outputs** (HF ``output_hidden_states[id + 1]``). An engine captures the
hidden state *entering* layer ``k`` (= the output of layer ``k - 1``, hidden-states index ``k``);
``layer_id_offset`` is what it adds to a configured id to get ``k``. With offset 1 the engine reads
the trainers' ids as they are; with offset 0 a file must hold ``id + 1`` to tap the same layer.

A version the table does not know is ``unknown``: :func:`lookup` names the nearest known version
and never falls back silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

ENGINES = ("sglang", "vllm")
_REPOS = {"sglang": ("https://github.com/sgl-project/sglang/blob/v{v}/python/{p}#L{n}"),
          "vllm": ("https://github.com/vllm-project/vllm/blob/v{v}/{p}#L{n}")}


@dataclass(frozen=True)
class Cite:
    """One line of an engine's installed source: ``text`` is a substring of line ``line`` of ``path``."""

    path: str
    line: int
    text: str

    def url(self, engine: str, version: str) -> str:
        return _REPOS[engine].format(v=version, p=self.path, n=self.line)


@dataclass(frozen=True)
class Rule:
    value: Any
    says: str
    cites: tuple[Cite, ...]


_SG_LLAMA = "sglang/srt/models/llama.py"
_SG_HOOK = "sglang/srt/arg_groups/speculative_hook.py"
_SG_DFLASH = "sglang/srt/speculative/dflash_utils.py"
_VL_EAGLE3 = "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"
_VL_RUNNER = "vllm/v1/worker/gpu_model_runner.py"
_VL_SPEC = "vllm/config/speculative.py"

SGLANG_0_5_23: dict[str, Rule] = {
    "dflash.layer_id_offset": Rule(
        1, "a DFlash target_layer_id k is captured before layer k + 1: the output of layer k",
        (Cite(_SG_LLAMA, 953, "self.model.layers_to_capture = [val + 1 for val in layer_ids]"),
         Cite("sglang/srt/models/qwen3.py", 805, "self.model.layers_to_capture = [val + 1 for val in layer_ids]"),
         Cite("sglang/srt/models/deepseek_v2.py", 3485,
              "self.model.layers_to_capture = [val + 1 for val in layer_ids]"))),
    "eagle3.layer_id_offset": Rule(
        1, "an EAGLE-3 aux layer id k is captured before layer k + 1: the output of layer k",
        (Cite(_SG_LLAMA, 939, "we plus 1 here because in sglang"),
         Cite(_SG_LLAMA, 941, "self.model.layers_to_capture = [val + 1 for val in layer_ids]"))),
    "eagle3.default_capture": Rule(
        "[2, n // 2, n - 3]", "without ids in the drafter config: capture before layers 2, n // 2, n - 3",
        (Cite(_SG_LLAMA, 936, "self.model.layers_to_capture = [2, num_layers // 2, num_layers - 3]"),)),
    "eagle3.ids_key": Rule(
        "eagle_config.eagle_aux_hidden_state_layer_ids", "where the EAGLE-3 ids are read from the drafter config",
        (Cite("sglang/srt/model_executor/model_runner_components/spec_aux_hidden_state.py", 193,
              '"eagle_aux_hidden_state_layer_ids"'),)),
    "dflash.block_size_default": Rule(
        16, "--speculative-num-draft-tokens unset: the drafter config's block_size, else 16",
        (Cite(_SG_HOOK, 407, ").resolve_block_size(default=None)"),
         Cite(_SG_HOOK, 416, "inferred_block_size = 16"))),
    "dflash.draft_tokens": Rule(
        {"flag": "--speculative-num-draft-tokens", "minus": 0},
        "--speculative-num-draft-tokens is the block size (it must equal --speculative-dflash-block-size)",
        (Cite(_SG_HOOK, 376, "!= int(cfg.speculative_dflash_block_size)"),
         Cite(_SG_HOOK, 386, "speculative_num_draft_tokens=int(cfg.speculative_dflash_block_size)"))),
    "eagle3.draft_tokens": Rule(
        None, "--speculative-num-steps / -eagle-topk / -num-draft-tokens unset: SGLang chooses them per model",
        (Cite(_SG_HOOK, 1165, "_auto_choose_speculative_params("),)),
    "algorithm": Rule(
        {"dflash": "DFLASH", "eagle3": "EAGLE3"}, "--speculative-algorithm",
        (Cite("sglang/srt/speculative/spec_info.py", 39, "DFLASH = auto()"),
         Cite("sglang/srt/speculative/spec_info.py", 43, "EAGLE3 = auto()"))),
    "dflash.mask_token_default": Rule(
        "<|MASK|>", "dflash_config.mask_token when the drafter names none; its tokenizer id must equal mask_token_id",
        (Cite(_SG_DFLASH, 27, 'DEFAULT_DFLASH_MASK_TOKEN = "<|MASK|>"'),)),
    "kv_cache_dtypes": Rule(
        ["auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16"],
        "--kv-cache-dtype choices (auto: the model's dtype)",
        (Cite("sglang/srt/arg_groups/fields/model.py", 197, "kv_cache_dtype: A["),
         Cite("sglang/srt/arg_groups/fields/model.py", 221, '] = "auto"'))),
    "state_dtype_default": Rule(
        "float32", "recurrent (SSM / linear-attention) state: float32 unless the config's mamba_ssm_dtype "
        "or --mamba-ssm-dtype (float32, bfloat16, float16) says otherwise",
        (Cite("sglang/srt/configs/mamba_utils.py", 71, "ssm_dtype = torch.float32"),
         Cite("sglang/srt/arg_groups/fields/exec_.py", 494, 'choices=["float32", "bfloat16", "float16"]'))),
}

VLLM_0_33_0: dict[str, Rule] = {
    "dflash.layer_id_offset": Rule(
        1, "DFlash target_layer_ids get + 1 before capture: id k is the output of layer k",
        (Cite(_VL_EAGLE3, 124, 'layer_ids = [i + 1 for i in (dflash_config.get("target_layer_ids") or [])]'),
         Cite(_VL_RUNNER, 5213, "# Add 1 to convert DFlash's aux layer id semantics"))),
    "eagle3.layer_id_offset": Rule(
        0, "EAGLE-3 ids are used as given, and id k is stored after layer k - 1 (the hidden-states index)",
        (Cite(_VL_EAGLE3, 119, 'layer_ids = getattr(hf_config, "eagle_aux_hidden_state_layer_ids", None)'),
         Cite("vllm/model_executor/models/llama.py", 440, "aux_hidden_states, idx + 1, hidden_states, residual"))),
    "eagle3.default_capture": Rule(
        "(2, n // 2, n - 3)", "without ids in the drafter config: the hidden states entering layers 2, n // 2, n - 3",
        (Cite("vllm/model_executor/models/interfaces.py", 1772, "return (2, num_layers // 2, num_layers - 3)"),)),
    "eagle3.ids_key": Rule(
        "eagle_aux_hidden_state_layer_ids", "read at the config's top level (the V1 runner also reads eagle_config)",
        (Cite(_VL_EAGLE3, 119, '"eagle_aux_hidden_state_layer_ids"'),
         Cite(_VL_RUNNER, 5207, '"eagle_aux_hidden_state_layer_ids"'),
         Cite(_VL_RUNNER, 5219, 'eagle_config.get("eagle_aux_hidden_state_layer_ids")'))),
    "dflash.block_size_default": Rule(
        None, "no default: num_speculative_tokens must be given",
        (Cite(_VL_SPEC, 1617, "`num_speculative_tokens` was not provided"),)),
    "dflash.draft_tokens": Rule(
        {"flag": "num_speculative_tokens", "minus": 1},
        "each request drafts in one block of 1 + num_speculative_tokens queries: block size - 1",
        (Cite("vllm/v1/spec_decode/dflash.py", 126, "num_query_per_req = 1 + self.num_speculative_tokens"),)),
    "eagle3.draft_tokens": Rule(
        None, "no default: add num_speculative_tokens (the draft steps to run) to --speculative-config",
        (Cite(_VL_SPEC, 1617, "`num_speculative_tokens` was not provided"),)),
    "algorithm": Rule(
        {"dflash": "dflash", "eagle3": "eagle3"}, '"method" in --speculative-config',
        (Cite(_VL_SPEC, 69, 'DFlashModelTypes = Literal["dflash"]'),
         Cite(_VL_SPEC, 72, '"eagle", "eagle3", "extract_hidden_states"'))),
    "dflash.mask_token_default": Rule(
        None, "no default: the drafter config must give dflash_config.mask_token_id (or mask_token_id)",
        (Cite("vllm/v1/spec_decode/llm_base_proposer.py", 364,
              'self.parallel_drafting_token_id = dflash_config["mask_token_id"]'),
         Cite("vllm/v1/spec_decode/llm_base_proposer.py", 376, "`dflash_config.mask_token_id`, `mask_token_id`"))),
    "kv_cache_dtypes": Rule(
        ["auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla", "nvfp4_ds_mla",
         "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc", "octave_k3v4",
         "octave_k3v3", "octave_k3v3_compact", "ultraquant_4bit", "int4_per_token_head", "int8_per_token_head",
         "fp8_per_token_head", "nvfp4", "nvfp4_4over6"],
        "--kv-cache-dtype choices (auto: the model's dtype)",
        (Cite("vllm/config/cache.py", 44, "CacheDType = Literal["),
         Cite("vllm/config/cache.py", 235, 'cache_dtype: CacheDType | str = "auto"'))),
    "state_dtype_default": Rule(
        "auto", "mamba_ssm_cache_dtype auto: the conv state's dtype (the model's); KDA keeps float32",
        (Cite("vllm/config/cache.py", 300, 'mamba_ssm_cache_dtype: MambaDType = "auto"'),
         Cite("vllm/model_executor/layers/mamba/mamba_utils.py", 106, "temporal_state_dtype = conv_state_dtype"),
         Cite("vllm/model_executor/layers/mamba/mamba_utils.py", 141, "recurrent_state_dtype = torch.float32"))),
}

TABLES: dict[str, dict[str, dict[str, Rule]]] = {
    "sglang": {"0.5.23": SGLANG_0_5_23},
    "vllm": {"0.33.0": VLLM_0_33_0},
}


def version_key(version: str) -> tuple[int, ...]:
    """``"0.5.23"`` -> (0, 5, 23); a suffix (``.post1``, ``rc2``, ``+cu128``) is dropped."""
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0].split("rc")[0])[:3])


def nearest_version(engine: str, version: str | None) -> str:
    """The known version closest to ``version``: the newest not after it, else the oldest after it."""
    known = sorted(TABLES[engine], key=version_key)
    if version is None:
        return known[-1]
    before = [v for v in known if version_key(v) <= version_key(version)]
    return before[-1] if before else known[0]


@dataclass(frozen=True)
class Conventions:
    """The rules one engine version follows; ``known`` False: ``rules`` are the nearest known version's."""

    engine: str
    version: str | None  # what the host has (None: not installed there)
    table_version: str  # the table the rules come from
    known: bool
    rules: dict[str, Rule]

    def value(self, key: str) -> Any:
        return self.rules[key].value

    def source(self, key: str) -> str:
        """Where ``key``'s rule comes from: the first cited line's URL."""
        return self.rules[key].cites[0].url(self.engine, self.table_version)

    def unknown_reason(self) -> str | None:
        if self.known:
            return None
        known = ", ".join(sorted(TABLES[self.engine], key=version_key))
        if self.version is None:
            return (f"no {self.engine} version from the probed host (not installed there, or engines not probed): these are "
                    f"{self.engine} {self.table_version}'s conventions (known: {known}); check them against the "
                    "version you serve with")
        return (f"{self.engine} {self.version} is not in introspect's engine-conventions table (known: {known}): "
                f"its layer-id offsets, block size and flags are unknown; these follow the nearest known version, "
                f"{self.engine} {self.table_version}")


def lookup(engine: str, version: str | None) -> Conventions:
    """The conventions of ``engine`` at ``version``; an unknown version is ``known=False`` with the nearest table."""
    if engine not in TABLES:
        raise ValueError(f"no conventions table for engine {engine!r}; known: {', '.join(ENGINES)}")
    table = version if version in TABLES[engine] else nearest_version(engine, version)
    return Conventions(engine, version, table, table == version, TABLES[engine][table])


def engine_ids(ids: list[int], kind: str, conv: Conventions) -> list[int]:
    """Trainer-convention ids (0-based decoder-layer outputs) as this engine must read them to tap the same layers."""
    shift = 1 - int(conv.value(f"{kind}.layer_id_offset"))
    return [i + shift for i in ids]
