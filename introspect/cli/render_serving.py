"""The Engines, GPUs and Plan sections of the human report (and ``introspect plan``)."""

from __future__ import annotations

import shlex
from typing import Any

from rich.markup import escape
from rich.table import Table

from introspect.analysis.serving.engine_readiness import best_for, cite, served_by
from introspect.cli.render import _kv, _row, human_bytes
from introspect.cli.render_fold import Rows
from introspect.cli.render_term import Col
from introspect.remote.contract import as_dict


def _yes(flag: Any) -> str:
    return {True: "[green]yes[/green]", False: "[red]no[/red]"}.get(flag, "?")


def _registered(item: Any) -> str | None:
    item = as_dict(item)
    if not item:
        return None
    where = f" ({escape(str(item.get('module')))})" if item.get("module") else ""
    return f"{escape(str(item.get('architecture')))}: {_yes(item.get('registered'))}{where}"


def _engine_rows(table: Table, engine: dict[str, Any]) -> None:
    name = f"{engine.get('name')} {engine.get('version') or '?'}"
    if engine.get("layout") != "read":
        _row(table, name, "version only: " + ("; ".join(engine.get("notes") or []) or "sources not read"))
        return
    table.add_row(name, _registered(engine.get("architecture")) or "-")
    if engine.get("text_architecture"):
        table.add_row("  text model", _registered(engine["text_architecture"]) or "-")
    spec = as_dict(engine.get("speculative"))
    if spec:
        _speculative_rows(table, spec, as_dict(engine.get("readiness")))
    drafters = [f"{d.get('class')} ({d.get('kind')}{', same family' if d.get('match') == 'family' else ''})"
                for d in engine.get("drafters") or []]
    drafters += [f"{name} (generic)" for name in engine.get("generic_drafters") or []]
    _row(table, "  drafter classes", ", ".join(drafters) or "none for this family")
    quant = as_dict(engine.get("quantization"))
    if quant.get("checkpoint_method"):
        condition = f" when {quant['condition']}" if quant.get("condition") else ""
        table.add_row("  quantization", f"{escape(str(quant['checkpoint_method']))}: "
                      f"{_yes(quant.get('supported'))}{escape(condition)}")


_VERDICT = {"yes": "[green]yes[/green]", "no": "[red]no[/red]", "unknown": "[yellow]unknown[/yellow]"}
# Drafter kinds with a row each; the engine's other methods share one row.
_MAIN_KINDS = ("dflash", "eagle3", "eagle", "mtp")


def _verdict_of(readiness: dict[str, Any], kind: str) -> str | None:
    method = best_for({"readiness": readiness}, kind)
    return _VERDICT[method["verdict"]] if method else None


def _readiness_text(method: dict[str, Any]) -> str:
    """``yes (hook in Class, file:line)`` or ``no — requires hook (engine file:line): why``."""
    verdict, where = method.get("verdict"), as_dict(method.get("provided_by"))
    if verdict == "yes":
        shown, place = str(method.get("why")), f"{where.get('file')}:{where.get('line')}"
        if where and place not in shown:
            shown += f"; {where.get('class')} at {place}"
        text = f"{_VERDICT['yes']} ({escape(shown)})"
    else:
        text = f"{_VERDICT.get(str(verdict), '?')} — {escape(cite(method))}"
    return text + (f"; {escape(str(method['note']))}" if method.get("note") else "")


def _speculative_rows(table: Table, spec: dict[str, Any], readiness: dict[str, Any]) -> None:
    """Per method: can this engine serve it for the model's class (readiness), not merely does it know it."""
    knows = escape(", ".join(spec.get("algorithms") or []))
    if readiness.get("methods"):  # the per-family MTP names of vLLM shown once, as "mtp"
        knows = escape(", ".join(str(m.get("method")) + (f" (+{len(m['aliases'])} names)" if m.get("aliases") else "")
                                 for m in (as_dict(m) for m in readiness["methods"])))
    if not readiness:
        table.add_row("  speculative", f"knows {knows} (whether this model's class provides what each needs "
                      "was not read)")
        return
    dflash, eagle3 = _verdict_of(readiness, "dflash") or "?", _verdict_of(readiness, "eagle3") or "?"
    table.add_row("  speculative", f"DFlash {dflash}, EAGLE-3 {eagle3} for {escape(str(readiness.get('architecture')))}"
                  f"; knows {knows}")
    methods = [as_dict(m) for m in readiness.get("methods") or []]
    for method in methods:
        if method.get("kind") in _MAIN_KINDS:
            table.add_row(f"  {escape(str(method.get('method')))}", _readiness_text(method))
    rest = [f"{escape(str(m.get('method')))} {_VERDICT.get(str(m.get('verdict')), '?')}" for m in methods
            if m.get("kind") not in _MAIN_KINDS]
    if rest:
        table.add_row("  other methods", ", ".join(rest))


def _served_rows(table: Table, profile: dict[str, Any]) -> None:
    """Which installed engines can serve each planned drafter for this model's class."""
    served = served_by([as_dict(e) for e in as_dict(profile.get("engines")).get("engines") or []])
    for kind, label in (("dflash", "DFlash served by"), ("eagle3", "EAGLE-3 served by")):
        if served.get(kind):
            table.add_row(label, ", ".join(f"{escape(str(s['engine']))} {escape(str(s['version']))} "
                                           f"{escape(str(s['method']))} {_VERDICT[s['verdict']]}"
                                           for s in served[kind]))


def engines_section(profile: dict[str, Any]) -> Table:
    section = as_dict(profile.get("engines"))
    table = _kv("Engines")
    if not section.get("probed"):
        _row(table, "engines", "not probed")
    elif not section.get("engines"):
        _row(table, "engines", "none installed (searched " + ", ".join(section.get("searched") or []) + ")")
    for engine in section.get("engines") or []:
        _engine_rows(table, as_dict(engine))
    return table


def gpus_section(profile: dict[str, Any]) -> Table:
    gpus = as_dict(profile.get("gpus"))
    table = _kv("GPUs")
    if not gpus.get("probed"):
        _row(table, "GPUs", "not probed")
        return table
    if not gpus.get("available"):
        _row(table, "GPUs", f"none ({gpus.get('reason')})")
        return table
    models = ", ".join(f"{n} x {name}" for name, n in as_dict(gpus.get("models")).items())
    _row(table, "GPUs", models)
    mib = gpus.get("memory_total_mib_min")
    _row(table, "memory", human_bytes(mib * 1024 * 1024) + " each (smallest)" if isinstance(mib, int) else None)
    _row(table, "driver / CUDA", f"{gpus.get('driver_version')} / {gpus.get('cuda_version')}")
    inter = as_dict(gpus.get("interconnect"))
    if inter:
        _row(table, "interconnect", f"{inter.get('summary')} ({', '.join(f'{k} x{v}' for k, v in as_dict(inter.get('links')).items())})")
    return table


# Verdict and reason apart: the reason is the one free-text column, so a narrow terminal puts it
# on its own line under the layout instead of folding it into a sliver (render_table.py).
LAYOUT_COLUMNS = (Col("layout"), Col("GPUs", "num"), Col("weights/GPU", "num"), Col("KV room/GPU", "num"),
                  Col("KV tokens", "num"), Col("max context", "num"), Col("requests", "num"), Col("fits"),
                  Col("why not", "text"))


def _context_cells(item: dict[str, Any]) -> list[str]:
    """The longest request that fits, and how many of max-model-len (and of --context-len) fit at once."""
    longest, requests = item.get("max_context_fits"), item.get("concurrent_requests")
    if not isinstance(longest, int) or not item.get("kv_room_bytes_per_gpu"):
        return ["-", "-"]
    shown = f"{requests:,}" if isinstance(requests, int) else "-"
    at = item.get("concurrent_requests_at_context_len")
    if isinstance(at, int):
        shown += f" ({at:,} of {item.get('context_len'):,})"
    return [f"{longest:,}", shown]


def _layout_table(layouts: list[Any]) -> Rows:
    rows = []
    for item in layouts:
        item = as_dict(item)
        tokens = item.get("kv_tokens_per_gpu")
        replicas = item.get("replicas") or 1
        fitting = bool(item.get("fits"))
        shown = f"{tokens:,}" if isinstance(tokens, int) and fitting else "-"
        if fitting and isinstance(tokens, int) and replicas > 1:
            shown += f" (x{replicas} = {item.get('kv_tokens_total'):,})"
        rows.append([escape(str(item.get("name"))), str(item.get("gpus")), human_bytes(item.get("weight_bytes_per_gpu")),
                     human_bytes(item.get("kv_room_bytes_per_gpu")) if fitting else "-", shown,
                     *_context_cells(item), "[green]fits[/green]" if fitting else "[red]no[/red]",
                     "" if fitting else escape("; ".join(item.get("reasons") or []))])
    return Rows(LAYOUT_COLUMNS, rows, header_style="dim")


def plan_section(profile: dict[str, Any]) -> Table:
    plan = as_dict(profile.get("plan"))
    table = _kv("Plan")
    weights = as_dict(plan.get("weights"))
    if weights:
        split = as_dict(weights.get("bytes"))
        _row(table, "weights", f"{human_bytes(weights.get('total_bytes'))} stored ("
             + ", ".join(f"{k} {human_bytes(v)}" for k, v in split.items() if v) + ")")
    gpus = as_dict(plan.get("gpus"))
    if gpus:
        _row(table, "for", f"{gpus.get('count')} x {human_bytes(gpus.get('memory_bytes'))}"
             f"{' ' + str(gpus['name']) if gpus.get('name') else ''} ({gpus.get('source')}), "
             f"memory fraction {plan.get('memory_fraction')}")
    if isinstance(plan.get("max_model_len"), int):
        _row(table, "context", f"one request of {plan['max_model_len']:,} tokens must fit "
             f"(max-model-len from {plan.get('max_model_len_source')}), KV cache {plan.get('kv_dtype')}; "
             "requests = how many of that length fit at once")
    _row(table, "KV per token", plan.get("kv_rule"))
    if plan.get("layouts"):
        table.add_row("layouts", _layout_table(plan["layouts"]))
    _row(table, "best", plan.get("best"))
    _row(table, "note", plan.get("reason"))
    drafter = as_dict(as_dict(as_dict(profile.get("architecture")).get("speculative")).get("drafter_plan"))
    if as_dict(plan.get("drafter")):
        _engine_drafter_rows(table, as_dict(plan["drafter"]), drafter)
    elif drafter:
        dflash, eagle = as_dict(drafter.get("dflash")), as_dict(drafter.get("eagle3"))
        mask = as_dict(dflash.get("mask_token"))
        shown = f"{escape(str(mask.get('token')))}={mask.get('id')} ({mask.get('kind')})" if mask else "unknown"
        _row(table, "DFlash drafter", f"target_layer_ids {dflash.get('target_layer_ids')} "
             f"(hidden_states {dflash.get('hidden_states_indices')}; {_shape(dflash)}), mask {shown}, "
             f"stop ids {dflash.get('stop_ids') or 'unknown'}")
        _row(table, "EAGLE-3 drafter", f"aux layer ids {eagle.get('aux_layer_ids')} (hidden_states "
             f"{eagle.get('hidden_states_indices')}), draft vocab {eagle.get('draft_vocab_size')}")
        _row(table, "layer ids", drafter.get("convention"))
    if drafter:
        _served_rows(table, profile)
    return table


def _shape(dflash: dict[str, Any]) -> str:
    taps = dflash.get("draft_taps") or len(dflash.get("target_layer_ids") or [])
    return f"{taps} taps, {dflash.get('draft_layers')} layers, block {dflash.get('block_size')}"


def _engine_drafter_rows(table: Table, member: dict[str, Any], drafter: dict[str, Any]) -> None:
    """The drafter lines of ``introspect plan``: ids, config keys and serving flags in one engine's terms."""
    _row(table, "drafter engine", escape(f"{member.get('conventions')} ({member.get('choice')})"
                                         + (f"; {member['unknown']}" if member.get("unknown") else "")))
    dflash, eagle = as_dict(member.get("dflash")), as_dict(member.get("eagle3"))
    plan_dflash = as_dict(drafter.get("dflash"))
    mask = f"{dflash.get('mask_token')}={dflash.get('mask_token_id')}" if dflash.get("mask_token_id") is not None \
        else f"unknown ({plan_dflash.get('mask_token_reason')})"
    _row(table, "DFlash drafter", escape(f"{dflash.get('ids_key')} {dflash.get('target_layer_ids')} "
                                         f"({_shape(dflash)}), mask {mask}, "
                                         f"stop ids {plan_dflash.get('stop_ids') or 'unknown'}"))
    _row(table, "  layer ids", escape(str(dflash.get("ids_convention"))))
    _serve_row(table, dflash)
    _row(table, "EAGLE-3 drafter", escape(f"{eagle.get('ids_key')} {eagle.get('aux_layer_ids')}, "
                                          f"draft vocab {eagle.get('draft_vocab_size')}"))
    _row(table, "  layer ids", escape(str(eagle.get("ids_convention"))))
    _serve_row(table, eagle)


def _serve_row(table: Table, item: dict[str, Any]) -> None:
    serving = as_dict(item.get("serving"))
    _row(table, "  serve with", escape(shlex.join(serving.get("args") or [])
                                       + f"  # {serving.get('draft_tokens_rule')}"))


SERVING_SECTIONS = (engines_section, gpus_section, plan_section)
