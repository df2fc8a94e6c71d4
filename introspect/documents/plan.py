"""``introspect.plan/v1``: the profile's ``plan`` section printed alone (cli/cmd_plan.py)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from introspect.documents.base import Document, ErrorMember, Number
from introspect.documents.profile_serving import ContextFix, GpuBudget, Layout, PlanDrafter, WeightsBytes


class PlanDocument(Document):
    """Which TP / EP / PP layouts fit, with how much KV cache (the keys of ``profile_serving.Plan``)."""

    SCHEMA: ClassVar[str] = "introspect.plan/v1"
    schema_: Literal["introspect.plan/v1"] = Field(alias="schema")
    weights: WeightsBytes | None
    gpus: GpuBudget | None
    memory_fraction: Number
    layouts: list[Layout]
    best: str | None
    reason: str | None
    max_model_len: int | None = None
    max_model_len_source: str | None = None
    kv_dtype: str | None = None
    kv_bytes_per_token: int | None = None
    context_len: int | None = None
    kv_rule: str | None = None
    context_fix: ContextFix | None = None
    drafter: PlanDrafter | None = None
    error: ErrorMember | None = None
