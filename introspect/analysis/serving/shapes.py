"""Intermediate shapes passed between the modules of analysis/serving/ and to the profile builder.

The sections themselves are the document models (documents/profile_serving.py); these only
bundle them on their way into the profile.
"""

from __future__ import annotations

from typing import TypedDict

from introspect.documents.profile_serving import Engines, Gpus, Plan


class ServingSections(TypedDict):
    """The profile's serving sections, as ``serving_sections`` builds them (analysis/profile.py reads them)."""

    engines: Engines
    gpus: Gpus
    plan: Plan


class MaskToken(TypedDict):
    """The DFlash mask token the drafter plan proposes (drafter_plan.py ``mask_token``)."""

    id: int
    token: str | None
    kind: str  # mask_token, unk, reserved, unassigned-row


class MaskAndStops(TypedDict):
    """The plan's mask token and stop ids, each with the reason it is null (drafter_plan.py)."""

    mask_token: MaskToken | None
    mask_token_reason: str | None
    stop_ids: list[int] | None
    stop_ids_reason: str | None


class VllmSpeculativeConfig(TypedDict, total=False):
    """vLLM's ``--speculative-config`` JSON for a drafter (drafter_config.py ``_serving``): method, model path,
    and the draft tokens where the block size gives them."""

    method: str
    model: str
    num_speculative_tokens: int
