"""What a DFlash or EAGLE-3 drafter for this target needs. Pure.

Layer ids here are the trainers' convention (SpecForge, the DFlash reference, the published
drafters): **0-based decoder-layer outputs**; id ``i`` is HF ``output_hidden_states[i + 1]`` (the
embeddings are at 0). The engines do not all read them so: SGLang adds 1 for both methods, vLLM
adds 1 to DFlash ids and takes EAGLE-3 ids as hidden-states indices (engine_conventions.py, with
the lines of both engines' sources); ``introspect plan --engine`` writes each engine's ids.

DFlash taps ``k`` target layers (``--draft-taps``) spread with SGLang's ``build_target_layer_ids``
(sglang/srt/speculative/dflash_utils.py): ``round(1 + i * (n - 4) / (k - 1))`` for i in 0..k-1
(``[n // 2]`` when k = 1). The number of taps is independent of the drafter's depth
(``--draft-layers``): the published drafters tap 5 layers whatever their depth (SpecForge's
configs/qwen3-8b-dflash.json 5 layers, qwen3.5-35b-a3b-dflash.json 8 layers, both 5 taps). For
Kimi-K2.5 (n = 61) k = 5 gives [1, 15, 30, 44, 58]; k = 6 gives [1, 12, 24, 35, 47, 58], the
published Kimi-K2.5 drafter's ids. EAGLE-3's default capture points are hidden-states indices
``[2, n // 2, n - 3]`` (sglang/srt/models/llama.py ``set_eagle3_layers_to_capture``; vLLM
``get_eagle3_default_aux_hidden_state_layers``), i.e. decoder outputs ``[1, n // 2 - 1, n - 4]``.

The mask token follows preflight's order of preference: the tokenizer's own mask
token, else ``[UNK]`` (what the published Kimi-K2.5 DFlash drafter uses), else a
reserved placeholder token, else the first embedding row no token has. Here it is
not checked against the chat template; ``introspect preflight`` does that.

Mask and stop ids come from the tokenizer only when it is the model's: after a stand-in
(AutoTokenizer built one from ``model_type`` in a directory without tokenizer files, see
``tokenizer_autotokenizer.stand_in_reason``) both are null, ``mask_token_reason`` /
``stop_ids_reason`` say why. A drafter beside the model whose mask id is an ordinary token of
the target's tokenizer (below its base vocabulary, neither special nor named) is a finding:
the drafter would read that text token as the mask.
"""

from __future__ import annotations

import re

from introspect.analysis.findings import Finding, make
from introspect.analysis.serving.drafter_fields import target_fields
from introspect.analysis.serving.shapes import MaskAndStops
from introspect.documents.base import TokenId
from introspect.documents.profile_architecture import (
    Architecture,
    DflashPlan,
    Drafter,
    DrafterPlan,
    Eagle3Plan,
    MaskToken,
)
from introspect.documents.profile_tokenizer import Tokenizer
from introspect.remote.contract import as_dict

# The published DFlash drafters (docs/plan.md "Published drafters"): 5 target layers tapped, 5 draft
# layers, block 16 (SpecForge configs/qwen3-8b-dflash.json, qwen3-4b-dflash.json, qwen3.6-27b-dflash.json;
# z-lab/Qwen3-8B-DFlash-b16). 16 is also SGLang's block size when the drafter gives none
# (sglang/srt/arg_groups/speculative_hook.py L416) and SpecForge's generated config's
# (specforge 0.2.0 algorithms/model_providers.py populate_dflash_generated_config).
DEFAULT_DRAFT_TAPS = 5
DEFAULT_DRAFT_LAYERS = 5
DEFAULT_BLOCK_SIZE = 16
# EAGLE-3's reduced draft vocabulary: SpecForge's target-derived default (specforge 0.2.0
# algorithms/eagle3/providers.py, draft_vocab_size=32000) and every SpecForge configs/*-eagle3.json.
DEFAULT_DRAFT_VOCAB = 32000
CONVENTION = ("layer ids are the trainers': 0-based decoder-layer outputs (HF hidden_states index - 1); "
              "SGLang adds 1 to DFlash and EAGLE-3 ids, vLLM adds 1 to DFlash ids and reads EAGLE-3 ids as "
              "hidden-states indices: `introspect plan --engine` writes each engine's")
DFLASH_RULE = "round(1 + i * (n - 4) / (k - 1)) over k taps, SGLang build_target_layer_ids"
EAGLE3_RULE = "[1, n // 2 - 1, n - 4] (capture before [2, n // 2, n - 3])"
_RESERVED = re.compile(r"reserved|unused", re.I)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _id(token: TokenId | None) -> int | None:
    return token.id if token is not None else None


def spread_layer_ids(num_layers: int, count: int) -> list[int]:
    """SGLang's ``build_target_layer_ids``: ``count`` 0-based decoder layers spread over ``num_layers``."""
    if num_layers < 4 or count < 1:
        raise ValueError(f"need at least 4 target layers and 1 tap, got {num_layers} and {count}")
    if count > num_layers - 3:  # more taps than layers 1..n-3: the spread would tap a layer twice
        raise ValueError(f"{count} taps over layers 1..{num_layers - 3} of {num_layers} would repeat a layer")
    if count == 1:
        return [num_layers // 2]
    span = num_layers - 4  # from layer 1 to layer n - 3
    return [int(round(1 + i * span / (count - 1))) for i in range(count)]


def eagle3_layer_ids(num_layers: int) -> list[int]:
    """EAGLE-3's default auxiliary layers as 0-based decoder-layer outputs."""
    return [1, num_layers // 2 - 1, num_layers - 4]


def mask_token(tokenizer: Tokenizer | None, vocab: int | None) -> MaskToken | None:
    if tokenizer is None:
        return None
    tok_len = tokenizer.len or tokenizer.vocab_size
    taken = {_id(tokenizer.pad), _id(tokenizer.eos), _id(tokenizer.bos)}
    mask, unk = tokenizer.mask, tokenizer.unk
    if mask is not None and mask.id is not None:
        return MaskToken(id=mask.id, token=mask.token, kind="mask_token")
    if unk is not None and unk.id is not None and unk.id not in taken:
        return MaskToken(id=unk.id, token=unk.token, kind="unk")
    for item in tokenizer.special_tokens:
        if item.id is not None and item.id not in taken and _RESERVED.search(str(item.token)):
            return MaskToken(id=item.id, token=item.token, kind="reserved")
    if tok_len is not None and vocab is not None and vocab > tok_len:
        return MaskToken(id=tok_len, token=None, kind="unassigned-row")
    return None


def stop_ids(tokenizer: Tokenizer | None, generation_config: object) -> list[int]:
    """The tokenizer's EOS plus generation_config's eos_token_id(s) (generation_config.json as read): where a
    turn ends."""
    ids = set()
    eos = _id(tokenizer.eos) if tokenizer is not None else None
    if eos is not None:
        ids.add(eos)
    gen = as_dict(generation_config).get("eos_token_id")
    for value in gen if isinstance(gen, list) else [gen]:
        if _int(value) is not None:
            ids.add(value)
    return sorted(ids)


def stand_in(tokenizer: Tokenizer | None) -> str | None:
    """Why no id may come from this tokenizer section (a stand-in), or None."""
    block = tokenizer.autotokenizer if tokenizer is not None else None
    if block is None or block.stand_in is not True:
        return None
    return (f"AutoTokenizer built a stand-in tokenizer ({block.stand_in_reason}): "
            "copy the model's tokenizer files into its directory and probe again")


def _mask_and_stops(tok: Tokenizer | None, vocab: int | None, generation_config: object) -> MaskAndStops:
    """mask_token / stop_ids with their reasons when null."""
    reason = stand_in(tok)
    if reason is not None:
        return MaskAndStops(mask_token=None, mask_token_reason=reason, stop_ids=None, stop_ids_reason=reason)
    mask = mask_token(tok, vocab)
    return MaskAndStops(mask_token=mask, mask_token_reason=None if mask is not None else _no_mask(tok, vocab),
                        stop_ids=stop_ids(tok, generation_config), stop_ids_reason=None)


def _no_mask(tok: Tokenizer | None, vocab: int | None) -> str:
    """Why mask_token found nothing."""
    size = (tok.len or tok.vocab_size) if tok is not None else None
    if size is None and (tok is None or (tok.mask is None and tok.unk is None and not tok.special_tokens)):
        return "no tokenizer facts: no tokenizer file was read and no load gave any"
    rows = (f"its {size} tokens fill the embedding's {vocab} rows" if size is not None and vocab is not None
            else "its length or the embedding's row count is unknown")
    return f"the tokenizer names no mask, unk or reserved token, and {rows}"


def drafter_plan(arch: Architecture, tokenizer: Tokenizer | None, generation_config: object, config: object = None,
                 ) -> DrafterPlan | None:
    """The target-derived fields of a DFlash and an EAGLE-3 drafter; None without layer count.
    ``generation_config`` and ``config``: the target's generation_config.json and config.json as read
    (stop ids; RoPE, norm eps, FFN width for the emitted configs)."""
    layers, hidden, vocab = arch.num_layers, arch.hidden_size, arch.vocab_size
    if layers is None or layers < 4:
        return None
    eagle_ids = eagle3_layer_ids(layers)
    ids = _mask_and_stops(tokenizer, vocab, generation_config)
    fields, notes = target_fields(arch, config)
    # A target of fewer than 8 layers has fewer than 5 distinct layers 1..n-3 to tap.
    taps = min(DEFAULT_DRAFT_TAPS, layers - 3)
    tapped = spread_layer_ids(layers, taps)
    dflash = DflashPlan(hidden_size=hidden, vocab_size=vocab, num_target_layers=layers, stop_ids=ids["stop_ids"],
                        stop_ids_reason=ids["stop_ids_reason"], draft_taps=taps, draft_layers=DEFAULT_DRAFT_LAYERS,
                        block_size=DEFAULT_BLOCK_SIZE, target_layer_ids=tapped,
                        hidden_states_indices=[i + 1 for i in tapped], rule=DFLASH_RULE,
                        mask_token=ids["mask_token"], mask_token_reason=ids["mask_token_reason"])
    eagle3 = Eagle3Plan(hidden_size=hidden, vocab_size=vocab, num_target_layers=layers, stop_ids=ids["stop_ids"],
                        stop_ids_reason=ids["stop_ids_reason"],
                        draft_vocab_size=min(DEFAULT_DRAFT_VOCAB, vocab) if vocab else None,
                        aux_layer_ids=eagle_ids, hidden_states_indices=[i + 1 for i in eagle_ids], rule=EAGLE3_RULE)
    return DrafterPlan(convention=CONVENTION, dflash=dflash, eagle3=eagle3, target_fields=fields, target_field_notes=notes)


def reshape_dflash(dflash: DflashPlan, taps: int, layers: int, block_size: int) -> DflashPlan:
    """The DFlash plan for ``taps`` target layers, a ``layers``-deep drafter and ``block_size``
    (``introspect plan --draft-taps/--draft-layers/--block-size``)."""
    ids = spread_layer_ids(dflash.num_target_layers or 0, taps)
    return dflash.model_copy(update={"draft_taps": taps, "draft_layers": layers, "block_size": block_size,
                                     "target_layer_ids": ids, "hidden_states_indices": [i + 1 for i in ids],
                                     "rule": DFLASH_RULE})


def check_drafters(plan: DrafterPlan | None, drafters: list[Drafter], tokenizer: Tokenizer | None = None,
                   ) -> list[Finding]:
    """A drafter beside the model that disagrees with its target is a finding; so is one whose
    mask id is an ordinary token of the target's tokenizer (``tokenizer``: the profile's section)."""
    if plan is None:
        return []
    out = []
    for drafter in drafters:
        if drafter.kind not in ("dflash", "eagle3") or drafter.error:
            continue
        problems = _mismatches(plan.dflash if drafter.kind == "dflash" else plan.eagle3, drafter)
        if problems:
            out.append(make("warning", "drafter-mismatch",
                               f"drafter {drafter.path} does not match its target: " + "; ".join(problems),
                               "retrain or re-export the drafter for this target (see the plan's drafter fields)"))
        out += mask_collision(drafter, tokenizer, plan.dflash.mask_token)
    return out


def ordinary_token(tokenizer: Tokenizer | None, token_id: int | None) -> str | None:
    """How ``token_id`` is an ordinary token of the tokenizer, or None (it is not, or unknown).

    Ordinary: below the base vocabulary (``vocab_size``: transformers' count without the added
    tokens) and neither a special token nor a named one. Unknown for a stand-in, without a base
    vocabulary, or when the special-token list was cut."""
    if tokenizer is None:
        return None
    tid, base = token_id, tokenizer.vocab_size
    if tid is None or base is None or not 0 <= tid < base or stand_in(tokenizer) is not None:
        return None
    if tokenizer.special_tokens_truncated:
        return None
    special = {t.id for t in tokenizer.special_tokens}
    special |= {_id(t) for t in (tokenizer.bos, tokenizer.eos, tokenizer.pad, tokenizer.unk, tokenizer.mask)}
    if tid in special:
        return None
    source = tokenizer.sources.vocab_size or "the tokenizer"
    return (f"id {tid} lies below the tokenizer's base vocabulary of {base} ({source}) and is no special "
            "or named token: an ordinary text token")


def mask_collision(drafter: Drafter, tokenizer: Tokenizer | None, proposed: MaskToken | None) -> list[Finding]:
    """The warning for a drafter whose mask_token_id is an ordinary token of its target."""
    how = ordinary_token(tokenizer, drafter.mask_token_id)
    if how is None:
        return []
    if proposed is not None and proposed.id is not None:
        label = f" ({proposed.token})" if proposed.token is not None else " (an embedding row no token uses)"
        fix = (f"# set dflash_config.mask_token_id to {proposed.id}{label} in {drafter.path}/config.json, "
               "as the plan proposes, and retrain: every training block masked that text token instead")
    else:
        fix = (f"# set dflash_config.mask_token_id in {drafter.path}/config.json to a special token the "
               "data never contains, or to an embedding row past len(tokenizer), and retrain")
    return [make("warning", "mask-token-collision",
                 f"drafter {drafter.path}: mask_token_id {drafter.mask_token_id} collides with a "
                 f"real token of the target: {how}", fix)]


def _mismatches(want: DflashPlan | Eagle3Plan, drafter: Drafter) -> list[str]:
    problems = []
    for key, have, target in (("hidden_size", drafter.hidden_size, want.hidden_size),
                              ("vocab_size", drafter.vocab_size, want.vocab_size),
                              ("num_target_layers", drafter.num_target_layers, want.num_target_layers)):
        if have is not None and target is not None and have != target:
            problems.append(f"{key} {have}, target {target}")
    layers = want.num_target_layers
    outside = [i for i in drafter.target_layer_ids or [] if layers is not None and not 0 <= i < layers]
    if outside:
        problems.append(f"layer ids {outside} outside the target's 0..{(layers or 0) - 1}")
    mask, vocab = drafter.mask_token_id, want.vocab_size
    if mask is not None and vocab is not None and not 0 <= mask < vocab:
        problems.append(f"mask_token_id {mask} outside the vocab {vocab}")
    return problems
