"""The Engines, GPUs and Plan sections of the human report (and ``introspect plan``)."""

from __future__ import annotations

import shlex

from rich.markup import escape
from rich.table import Table

from introspect.analysis.serving.engine_readiness import best_for, cite, served_by
from introspect.cli.render import _kv, _row, human_bytes
from introspect.cli.render_fold import Rows
from introspect.cli.render_term import Col
from introspect.documents.profile import ProfileDocument
from introspect.documents.profile_architecture import DflashPlan, DrafterPlan
from introspect.documents.profile_serving import (
    DrafterServing,
    Engine,
    EngineReadiness,
    Engines,
    EngineSpeculative,
    Gpus,
    Layout,
    MethodReadiness,
    Plan,
    PlanDflashDrafter,
    PlanDrafter,
    Registration,
)


def _yes(flag: bool | None) -> str:
    return "?" if flag is None else "[green]yes[/green]" if flag else "[red]no[/red]"


def _registered(item: Registration | None) -> str | None:
    if item is None:
        return None
    where = f" ({escape(str(item.module))})" if item.module else ""
    return f"{escape(str(item.architecture))}: {_yes(item.registered)}{where}"


def _engine_rows(table: Table, engine: Engine) -> None:
    name = f"{engine.name} {engine.version or '?'}"
    if engine.layout != "read":
        _row(table, name, "version only: " + ("; ".join(engine.notes) or "sources not read"))
        return
    table.add_row(name, _registered(engine.architecture) or "-")
    if engine.text_architecture is not None:
        table.add_row("  text model", _registered(engine.text_architecture) or "-")
    if engine.speculative is not None:
        _speculative_rows(table, engine.speculative, engine.readiness)
    drafters = [f"{d.class_} ({d.kind}{', same family' if d.match == 'family' else ''})" for d in engine.drafters]
    drafters += [f"{name} (generic)" for name in engine.generic_drafters]
    _row(table, "  drafter classes", ", ".join(drafters) or "none for this family")
    quant = engine.quantization or {}
    if quant.get("checkpoint_method"):
        condition = f" when {quant['condition']}" if quant.get("condition") else ""
        table.add_row("  quantization", f"{escape(str(quant['checkpoint_method']))}: "
                      f"{_yes(quant.get('supported'))}{escape(condition)}")


_VERDICT = {"yes": "[green]yes[/green]", "no": "[red]no[/red]", "unknown": "[yellow]unknown[/yellow]"}
# Drafter kinds with a row each; the engine's other methods share one row.
_MAIN_KINDS = ("dflash", "eagle3", "eagle", "mtp")


def _verdict_of(readiness: EngineReadiness, kind: str) -> str | None:
    method = best_for(readiness, kind)
    return _VERDICT[method.verdict] if method else None


def _readiness_text(method: MethodReadiness) -> str:
    """``yes (hook in Class, file:line)`` or ``no — requires hook (engine file:line): why``."""
    where = method.provided_by
    if method.verdict == "yes":
        shown = method.why
        if where is not None and f"{where.file}:{where.line}" not in shown:
            shown += f"; {where.class_} at {where.file}:{where.line}"
        text = f"{_VERDICT['yes']} ({escape(shown)})"
    else:
        text = f"{_VERDICT[method.verdict]} — {escape(cite(method))}"
    return text + (f"; {escape(method.note)}" if method.note else "")


def _speculative_rows(table: Table, spec: EngineSpeculative, readiness: EngineReadiness | None) -> None:
    """Per method: can this engine serve it for the model's class (readiness), not merely does it know it."""
    knows = escape(", ".join(spec.algorithms))
    if readiness is None:
        table.add_row("  speculative", f"knows {knows} (whether this model's class provides what each needs "
                      "was not read)")
        return
    if readiness.methods:  # the per-family MTP names of vLLM shown once, as "mtp"
        knows = escape(", ".join(m.method + (f" (+{len(m.aliases)} names)" if m.aliases else "")
                                 for m in readiness.methods))
    dflash, eagle3 = _verdict_of(readiness, "dflash") or "?", _verdict_of(readiness, "eagle3") or "?"
    table.add_row("  speculative", f"DFlash {dflash}, EAGLE-3 {eagle3} for {escape(str(readiness.architecture))}"
                  f"; knows {knows}")
    for method in readiness.methods:
        if method.kind in _MAIN_KINDS:
            table.add_row(f"  {escape(method.method)}", _readiness_text(method))
    rest = [f"{escape(m.method)} {_VERDICT[m.verdict]}" for m in readiness.methods if m.kind not in _MAIN_KINDS]
    if rest:
        table.add_row("  other methods", ", ".join(rest))


def _served_rows(table: Table, engines: Engines) -> None:
    """Which installed engines can serve each planned drafter for this model's class."""
    served = served_by(engines.engines)
    for kind, label in (("dflash", "DFlash served by"), ("eagle3", "EAGLE-3 served by")):
        if served.get(kind):
            table.add_row(label, ", ".join(f"{escape(str(s['engine']))} {escape(str(s['version']))} "
                                           f"{escape(s['method'])} {_VERDICT[s['verdict']]}"
                                           for s in served[kind]))


def engines_section(section: Engines) -> Table:
    table = _kv("Engines")
    if not section.probed:
        _row(table, "engines", "not probed")
    elif not section.engines:
        _row(table, "engines", "none installed (searched " + ", ".join(section.searched) + ")")
    for engine in section.engines:
        _engine_rows(table, engine)
    return table


def gpus_section(gpus: Gpus) -> Table:
    table = _kv("GPUs")
    if not gpus.probed:
        _row(table, "GPUs", "not probed")
        return table
    if not gpus.available:
        _row(table, "GPUs", f"none ({gpus.reason})")
        return table
    models = ", ".join(f"{n} x {name}" for name, n in (gpus.models or {}).items())
    _row(table, "GPUs", models)
    mib = gpus.memory_total_mib_min
    _row(table, "memory", human_bytes(mib * 1024 * 1024) + " each (smallest)" if mib is not None else None)
    _row(table, "driver / CUDA", f"{gpus.driver_version} / {gpus.cuda_version}")
    inter = gpus.interconnect
    if inter is not None:
        _row(table, "interconnect", f"{inter.summary} ({', '.join(f'{k} x{v}' for k, v in inter.links.items())})")
    return table


# Verdict and reason apart: the reason is the one free-text column, so a narrow terminal puts it
# on its own line under the layout instead of folding it into a sliver (render_table.py).
LAYOUT_COLUMNS = (Col("layout"), Col("GPUs", "num"), Col("weights/GPU", "num"), Col("KV room/GPU", "num"),
                  Col("KV tokens", "num"), Col("max context", "num"), Col("requests", "num"), Col("fits"),
                  Col("why not", "text"))


def _context_cells(item: Layout) -> list[str]:
    """The longest request that fits, and how many of max-model-len (and of --context-len) fit at once."""
    longest, requests = item.max_context_fits, item.concurrent_requests
    if longest is None or not item.kv_room_bytes_per_gpu:
        return ["-", "-"]
    shown = f"{requests:,}" if requests is not None else "-"
    at = item.concurrent_requests_at_context_len
    if at is not None:
        shown += f" ({at:,} of {item.context_len:,})"
    return [f"{longest:,}", shown]


def _layout_table(layouts: list[Layout]) -> Rows:
    rows = []
    for item in layouts:
        tokens, replicas, fitting = item.kv_tokens_per_gpu, item.replicas or 1, item.fits
        shown = f"{tokens:,}" if tokens is not None and fitting else "-"
        if fitting and tokens is not None and replicas > 1:
            shown += f" (x{replicas} = {item.kv_tokens_total:,})"
        rows.append([escape(item.name), str(item.gpus), human_bytes(item.weight_bytes_per_gpu),
                     human_bytes(item.kv_room_bytes_per_gpu) if fitting else "-", shown,
                     *_context_cells(item), "[green]fits[/green]" if fitting else "[red]no[/red]",
                     "" if fitting else escape("; ".join(item.reasons))])
    return Rows(LAYOUT_COLUMNS, rows, header_style="dim")


def plan_section(plan: Plan, drafter: DrafterPlan | None, engines: Engines) -> Table:
    """The plan; with the profile's drafter plan, its lines (in ``plan.drafter``'s engine's terms when
    ``introspect plan`` chose one) and which installed ``engines`` can serve each drafter."""
    table = _kv("Plan")
    weights = plan.weights
    if weights is not None:
        _row(table, "weights", f"{human_bytes(weights.total_bytes)} stored ("
             + ", ".join(f"{k} {human_bytes(v)}" for k, v in weights.bytes.items() if v) + ")")
    gpus = plan.gpus
    if gpus is not None:
        _row(table, "for", f"{gpus.count} x {human_bytes(gpus.memory_bytes)}"
             f"{' ' + gpus.name if gpus.name else ''} ({gpus.source}), memory fraction {plan.memory_fraction}")
    if plan.max_model_len is not None:
        _row(table, "context", f"one request of {plan.max_model_len:,} tokens must fit "
             f"(max-model-len from {plan.max_model_len_source}), KV cache {plan.kv_dtype}; "
             "requests = how many of that length fit at once")
    _row(table, "KV per token", plan.kv_rule)
    if plan.layouts:
        table.add_row("layouts", _layout_table(plan.layouts))
    _row(table, "best", plan.best)
    _row(table, "note", plan.reason)
    if plan.drafter is not None:
        _engine_drafter_rows(table, plan.drafter, drafter)
    elif drafter is not None:
        dflash, eagle, mask = drafter.dflash, drafter.eagle3, drafter.dflash.mask_token
        shown = f"{escape(str(mask.token))}={mask.id} ({mask.kind})" if mask is not None else "unknown"
        _row(table, "DFlash drafter", f"target_layer_ids {dflash.target_layer_ids} "
             f"(hidden_states {dflash.hidden_states_indices}; {_shape(dflash)}), mask {shown}, "
             f"stop ids {dflash.stop_ids or 'unknown'}")
        _row(table, "EAGLE-3 drafter", f"aux layer ids {eagle.aux_layer_ids} (hidden_states "
             f"{eagle.hidden_states_indices}), draft vocab {eagle.draft_vocab_size}")
        _row(table, "layer ids", drafter.convention)
    if drafter is not None:
        _served_rows(table, engines)
    return table


def _shape(dflash: DflashPlan | PlanDflashDrafter) -> str:
    taps = dflash.draft_taps or len(dflash.target_layer_ids)
    return f"{taps} taps, {dflash.draft_layers} layers, block {dflash.block_size}"


def _engine_drafter_rows(table: Table, member: PlanDrafter, drafter: DrafterPlan | None) -> None:
    """The drafter lines of ``introspect plan``: ids, config keys and serving flags in one engine's terms."""
    _row(table, "drafter engine", escape(f"{member.conventions} ({member.choice})"
                                         + (f"; {member.unknown}" if member.unknown else "")))
    dflash, eagle = member.dflash, member.eagle3
    planned = drafter.dflash if drafter is not None else None
    mask = f"{dflash.mask_token}={dflash.mask_token_id}" if dflash.mask_token_id is not None \
        else f"unknown ({planned.mask_token_reason if planned is not None else None})"
    _row(table, "DFlash drafter", escape(f"{dflash.ids_key} {dflash.target_layer_ids} "
                                         f"({_shape(dflash)}), mask {mask}, "
                                         f"stop ids {(planned.stop_ids if planned is not None else None) or 'unknown'}"))
    _row(table, "  layer ids", escape(dflash.ids_convention))
    _serve_row(table, dflash.serving)
    _row(table, "EAGLE-3 drafter", escape(f"{eagle.ids_key} {eagle.aux_layer_ids}, "
                                          f"draft vocab {eagle.draft_vocab_size}"))
    _row(table, "  layer ids", escape(eagle.ids_convention))
    _serve_row(table, eagle.serving)


def _serve_row(table: Table, serving: DrafterServing) -> None:
    _row(table, "  serve with", escape(shlex.join(serving.args) + f"  # {serving.draft_tokens_rule}"))


def serving_tables(profile: ProfileDocument) -> list[Table]:
    """The Engines, GPUs and Plan sections of the human report."""
    return [engines_section(profile.engines), gpus_section(profile.gpus),
            plan_section(profile.plan, profile.architecture.speculative.drafter_plan, profile.engines)]
