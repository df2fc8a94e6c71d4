"""The serving sections of a profile: engines, GPUs, the plan and the drafter plan. Pure.

One entry point for ``build_profile``, so that the profile gains these sections
through one call; ``introspect plan`` re-plans a saved profile with
``replan`` for GPUs given on the command line.
"""

from __future__ import annotations

from introspect.analysis.findings import Finding
from introspect.analysis.serving.drafter_plan import check_drafters, drafter_plan
from introspect.analysis.serving.engines import analyze_engines
from introspect.analysis.serving.gpus import analyze_gpus, budget_from
from introspect.analysis.serving.plan import DEFAULT_FRACTION, GpuBudget, plan_section
from introspect.analysis.serving.plan_context import ContextOptions, rope_default
from introspect.analysis.serving.plan_weights import split_weights
from introspect.analysis.serving.shapes import ServingSections
from introspect.documents.profile import ProfileDocument
from introspect.documents.profile_architecture import Architecture
from introspect.documents.profile_serving import Plan
from introspect.documents.profile_tokenizer import Tokenizer
from introspect.remote.contract import RawFacts, as_dict


def serving_sections(raw: RawFacts, arch: Architecture, tokenizer: Tokenizer | None
                     ) -> tuple[ServingSections, list[Finding]]:
    """The engines, GPUs and plan sections, and their findings; the drafter plan goes into the
    profile's own ``architecture.speculative`` (the section being built)."""
    engines, engine_findings = analyze_engines(raw.get("engines"), arch)
    gpus, gpu_findings = analyze_gpus(raw.get("gpus"))
    weights = split_weights(raw.get("safetensors"), arch.num_layers)
    files = as_dict(raw.get("files"))
    # The engine's default max_model_len needs the RoPE settings, which only the raw config.json has.
    default_len = rope_default(files.get("config"), arch.nesting, arch.max_context)
    plan = plan_section(arch, weights, budget_from(gpus), default_len=default_len)
    drafters = drafter_plan(arch, tokenizer, files.get("generation_config"), files.get("config"))
    findings = engine_findings + gpu_findings
    findings += check_drafters(drafters, arch.speculative.drafters, tokenizer)
    arch.speculative.drafter_plan = drafters
    return ServingSections(engines=engines, gpus=gpus, plan=plan), findings


def replan(profile: ProfileDocument, budget: GpuBudget, fraction: float = DEFAULT_FRACTION,
           context: ContextOptions | None = None) -> Plan:
    """The plan section of a saved profile for other GPUs (``introspect plan``)."""
    saved = profile.plan
    length, source = saved.max_model_len, saved.max_model_len_source
    # The probe derived the default from config.json (RoPE included); a profile from before that has none.
    default_len = (length, str(source)) if length is not None and source != "--max-model-len" else None
    return plan_section(profile.architecture, saved.weights, budget, fraction, context, default_len)
