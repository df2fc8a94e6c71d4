"""The Engines, GPUs and Plan sections of the human report (and ``introspect plan``)."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

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
        table.add_row("  speculative", f"DFlash {_yes(spec.get('dflash'))}, EAGLE-3 {_yes(spec.get('eagle3'))}; "
                      + escape(", ".join(spec.get("algorithms") or [])))
    drafters = [f"{d.get('class')} ({d.get('kind')}{', same family' if d.get('match') == 'family' else ''})"
                for d in engine.get("drafters") or []]
    drafters += [f"{name} (generic)" for name in engine.get("generic_drafters") or []]
    _row(table, "  drafter classes", ", ".join(drafters) or "none for this family")
    quant = as_dict(engine.get("quantization"))
    if quant.get("checkpoint_method"):
        condition = f" when {quant['condition']}" if quant.get("condition") else ""
        table.add_row("  quantization", f"{escape(str(quant['checkpoint_method']))}: "
                      f"{_yes(quant.get('supported'))}{escape(condition)}")


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
    if drafter:
        dflash, eagle = as_dict(drafter.get("dflash")), as_dict(drafter.get("eagle3"))
        mask = as_dict(dflash.get("mask_token"))
        shown = f"{escape(str(mask.get('token')))}={mask.get('id')} ({mask.get('kind')})" if mask else "unknown"
        _row(table, "DFlash drafter", f"target_layer_ids {dflash.get('target_layer_ids')} "
             f"(hidden_states {dflash.get('hidden_states_indices')}), mask {shown}, "
             f"stop ids {dflash.get('stop_ids') or 'unknown'}")
        _row(table, "EAGLE-3 drafter", f"aux layer ids {eagle.get('aux_layer_ids')} (hidden_states "
             f"{eagle.get('hidden_states_indices')}), draft vocab {eagle.get('draft_vocab_size')}")
        _row(table, "layer ids", drafter.get("convention"))
    return table


SERVING_SECTIONS = (engines_section, gpus_section, plan_section)
