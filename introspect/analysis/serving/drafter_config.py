"""A drafter plan for one engine, and the drafter config.json that engine and the trainer load. Pure.

``introspect plan --engine sglang|vllm`` (default: the engine the probe found on the host) turns the
profile's drafter plan (trainer-convention layer ids, drafter_plan.py) into the ids, flags and
config that engine version reads (engine_conventions.py):

* DFlash ``dflash_config.target_layer_ids``: the same ids for both engines (both add 1);
* EAGLE-3 aux ids: as planned for SGLang (``eagle_config.eagle_aux_hidden_state_layer_ids``, +1 at
  capture), + 1 for vLLM (top-level ``eagle_aux_hidden_state_layer_ids``, read as given);
* draft tokens: SGLang ``--speculative-num-draft-tokens`` = block size, vLLM
  ``num_speculative_tokens`` = block size - 1.

The config holds every key the drafter classes read (drafter_fields.py: from the target, or null
with the reason in ``introspect.notes``), so loaded through ``Qwen3Config`` / ``LlamaConfig`` it
never takes those classes' defaults; tests/engines/test_drafter_configs_load.py builds each on the
meta device with SpecForge's classes.
"""

from __future__ import annotations

import json

from introspect.analysis.serving.engine_conventions import ENGINES, Conventions, engine_ids, lookup
from introspect.analysis.serving.shapes import DrafterNote, VllmSpeculativeConfig
from introspect.documents.profile_architecture import DrafterPlan
from introspect.documents.profile_serving import (
    DrafterServing,
    Engines,
    PlanDflashDrafter,
    PlanDrafter,
    PlanEagle3Drafter,
)
from introspect.remote.contract import JSONObject

DRAFTER_DIR = "DRAFTER_DIR"  # the trained drafter's directory, unknown before training: replace it
# SpecForge's DFlash provider checks the auto_map published DFlash drafters ship
# (specforge 0.2.0 algorithms/dflash/providers.py, expected_auto_map_model="dflash.DFlashDraftModel").
DFLASH_AUTO_MAP = {"AutoModel": "dflash.DFlashDraftModel"}


def choose_engine(engines: Engines | None, requested: str | None) -> tuple[Conventions, str]:
    """(the conventions to follow, why this engine): ``requested``, else the one engine the probe found
    on the host; with both or neither, SGLang's, whose layer ids are the trainers' as written."""
    found_engines = engines.engines if engines is not None else []
    installed = {str(e.name): e.version for e in found_engines if e.name in ENGINES}
    if requested:
        version = installed.get(requested)
        where = f"{requested} {version} is on the probed host" if version else "not installed on the probed host"
        return lookup(requested, version), f"--engine {requested} ({where})"
    if len(installed) == 1:
        name, version = next(iter(installed.items()))
        return (lookup(name, version),
                f"{name} {version or '(version unknown)'} is the engine installed on the probed host")
    found = ("both SGLang and vLLM are installed on the probed host" if installed
             else "the probe found neither SGLang nor vLLM" if engines is not None and engines.probed
             else "the profile has no engine facts")
    return (lookup("sglang", installed.get("sglang")),
            f"{found}: SGLang's conventions, whose layer ids are the trainers' as written; --engine vllm for vLLM's")


def _serving(kind: str, conv: Conventions, block_size: int | None) -> DrafterServing:
    """The flags that serve this drafter, the draft tokens and how they follow from the block size."""
    method = conv.value("algorithm")[kind]
    if kind == "dflash":
        rule = conv.value("dflash.draft_tokens")
        tokens = block_size - rule["minus"] if block_size else None
        how = f"{rule['flag']} = block size" + (f" - {rule['minus']}" if rule["minus"] else "")
        source = conv.source("dflash.draft_tokens")
    else:
        tokens, how, source = None, conv.rules["eagle3.draft_tokens"].says, conv.source("eagle3.draft_tokens")
    if conv.engine == "sglang":
        args = ["--speculative-algorithm", method, "--speculative-draft-model-path", DRAFTER_DIR]
        args += ["--speculative-num-draft-tokens", str(tokens)] if tokens is not None else []
    else:
        spec = VllmSpeculativeConfig(method=method, model=DRAFTER_DIR)
        if tokens is not None:
            spec["num_speculative_tokens"] = tokens
        args = ["--speculative-config", json.dumps(spec)]
    return DrafterServing(args=args, draft_tokens=tokens, draft_tokens_rule=how, source=source)


def _ids_convention(kind: str, conv: Conventions) -> str:
    offset = conv.value(f"{kind}.layer_id_offset")
    read = ("0-based decoder-layer outputs (it captures before layer id + 1)" if offset == 1
            else "hidden-states indices: id k is the output of layer k - 1 (trainer id + 1)")
    return f"{conv.engine} {conv.table_version} reads these as {read}; {conv.source(f'{kind}.layer_id_offset')}"


def plan_drafter(plan: DrafterPlan, conv: Conventions, why: str) -> PlanDrafter:
    """The plan's ``drafter`` member: the drafter plan in ``conv``'s engine's terms."""
    dflash, eagle, mask = plan.dflash, plan.eagle3, plan.dflash.mask_token
    mask_default = conv.value("dflash.mask_token_default")
    return PlanDrafter(
        engine=conv.engine, engine_version=conv.version, conventions=f"{conv.engine} {conv.table_version}",
        conventions_known=conv.known, choice=why, unknown=conv.unknown_reason(),
        dflash=PlanDflashDrafter(
            target_layer_ids=engine_ids(dflash.target_layer_ids, "dflash", conv),
            ids_key="dflash_config.target_layer_ids", ids_convention=_ids_convention("dflash", conv),
            # Taps are absent only in profiles from before taps and depth were apart: one per layer id.
            draft_taps=dflash.draft_taps or len(dflash.target_layer_ids), draft_layers=dflash.draft_layers,
            block_size=dflash.block_size,
            mask_token=mask.token if mask is not None and mask.token is not None else mask_default,
            mask_token_id=mask.id if mask is not None else None,
            serving=_serving("dflash", conv, dflash.block_size)),
        eagle3=PlanEagle3Drafter(
            aux_layer_ids=engine_ids(eagle.aux_layer_ids, "eagle3", conv),
            ids_key=conv.value("eagle3.ids_key"), ids_convention=_ids_convention("eagle3", conv),
            draft_vocab_size=eagle.draft_vocab_size, serving=_serving("eagle3", conv, None)),
    )


def _note(plan: DrafterPlan, engine: PlanDrafter, kind: str, target_architecture: str | None) -> DrafterNote:
    chosen = engine.dflash if kind == "dflash" else engine.eagle3
    stop_ids, rule = (plan.dflash.stop_ids, plan.dflash.rule) if kind == "dflash" else (plan.eagle3.stop_ids,
                                                                                         plan.eagle3.rule)
    return DrafterNote(target_architecture=target_architecture, engine=engine.conventions,
                       ids_convention=chosen.ids_convention, stop_ids=stop_ids, rule=rule,
                       serving=list(chosen.serving.args), notes=dict(plan.target_field_notes or {}))


def drafter_config(plan: DrafterPlan, kind: str, target_architecture: str | None, engine: PlanDrafter) -> JSONObject:
    """The drafter's config.json (free-form by nature: the target's RoPE values as its config.json writes
    them): every key the drafter class and the trainer read (``engine``: the plan's ``drafter`` member,
    :func:`plan_drafter`)."""
    fields = dict(plan.target_fields or {})
    note = _note(plan, engine, kind, target_architecture)
    if kind == "dflash":
        dflash, chosen = plan.dflash, engine.dflash
        extra: JSONObject = {"mask_token_id": chosen.mask_token_id}
        if dflash.mask_token is not None and dflash.mask_token.token is not None:
            extra["mask_token"] = chosen.mask_token
        layers = dflash.draft_layers
        return {"architectures": ["DFlashDraftModel"], "model_type": "qwen3", "auto_map": dict(DFLASH_AUTO_MAP),
                **fields, "num_hidden_layers": layers,
                # SpecForge's DFlash model wants one entry per layer (modeling/draft/dflash.py
                # resolve_dflash_attention_layout); left out, Qwen3Config derives them from its own sliding defaults.
                "layer_types": ["full_attention"] * layers, "use_sliding_window": False, "sliding_window": None,
                "tie_word_embeddings": False, "num_target_layers": dflash.num_target_layers,
                "block_size": dflash.block_size,
                "dflash_config": {"target_layer_ids": chosen.target_layer_ids, **extra}, "introspect": note}
    eagle = {"eagle_aux_hidden_state_layer_ids": engine.eagle3.aux_layer_ids, "use_aux_hidden_state": True}
    config: JSONObject = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", **fields,
                          "num_hidden_layers": 1, "draft_vocab_size": plan.eagle3.draft_vocab_size,
                          "tie_word_embeddings": False, "eagle_config": eagle}
    if engine.eagle3.ids_key == "eagle_aux_hidden_state_layer_ids":  # vLLM reads the top level only
        config["eagle_aux_hidden_state_layer_ids"] = engine.eagle3.aux_layer_ids
    config["introspect"] = note
    return config
