"""Intermediate shapes passed between the modules of analysis/serving/ and to the profile builder.

The sections themselves are the document models (documents/profile_serving.py); these only
bundle them on their way into the profile.
"""

from __future__ import annotations

from typing import TypedDict

from introspect.documents.profile_architecture import MaskToken
from introspect.documents.profile_serving import Engines, Gpus, Plan, Verdict


class ServingSections(TypedDict):
    """The profile's serving sections, as ``serving_sections`` builds them (analysis/profile.py reads them)."""

    engines: Engines
    gpus: Gpus
    plan: Plan


class MaskAndStops(TypedDict):
    """The plan's mask token and stop ids, each with the reason it is null (drafter_plan.py)."""

    mask_token: MaskToken | None  # its kind: mask_token, unk, reserved, unassigned-row
    mask_token_reason: str | None
    stop_ids: list[int] | None
    stop_ids_reason: str | None


class VllmSpeculativeConfig(TypedDict, total=False):
    """vLLM's ``--speculative-config`` JSON for a drafter (drafter_config.py ``_serving``): method, model path,
    and the draft tokens where the block size gives them."""

    method: str
    model: str
    num_speculative_tokens: int


class DrafterNote(TypedDict):
    """The ``introspect`` member of an emitted drafter config.json (drafter_config.py ``_note``): which target
    and engine it was made for, and why each null or derived key is so."""

    target_architecture: str | None
    engine: str  # the conventions followed, e.g. "sglang 0.5.23"
    ids_convention: str
    stop_ids: list[int] | None
    rule: str
    serving: list[str]  # the serving flags
    notes: dict[str, str]  # target field -> why it is null or how it was derived


class EngineQuantization(TypedDict):
    """An engine's ``quantization`` member (engines.py ``_quantization``): the methods it registers, and
    whether the checkpoint's is one of them (null without a checkpoint method)."""

    source: str | None
    methods: list[str]
    checkpoint_method: str | None
    supported: bool | None
    condition: str | None  # the condition SGLang registers the method under, if any


class ServedBy(TypedDict):
    """One engine's verdict on serving a drafter kind for this model's class (engine_readiness.py ``served_by``)."""

    engine: str | None
    version: str | None
    method: str  # the engine's own name for it
    verdict: Verdict
