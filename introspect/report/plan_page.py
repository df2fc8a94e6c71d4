"""The plan page: per TP / EP / PP layout, a stacked bar of what one GPU holds (weights, KV room,
headroom) against its memory, the longest context that fits, the concurrency, and why a layout
does not fit; read from ``introspect plan --json`` (``introspect.plan/v1``) or a profile's plan.

The figures are the plan's (:mod:`introspect.analysis.serving.plan`): weights and KV room per GPU as it
states them, headroom the rest of the GPU's memory (its ``1 - memory_fraction`` share kept for
activations and CUDA graphs, or less when the weights crowd it out), and the part past the
GPU's memory drawn as overflow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from markupsafe import Markup

from introspect.cli.render_term import human_bytes
from introspect.documents.profile_serving import Layout, Plan
from introspect.report.svg import Picture, group, legend, line, rect, text, title

NAME_W, STATS_W, ROW_H, BAR_H, MARGIN = 120.0, 250.0, 30.0, 18.0, 10.0
STATS_CHARS = 44  # what the stats column holds at its font size; the table under the picture has it all
WIDTH = 1120.0
SCALE_CAP = 2.0  # bars are drawn up to this many times the GPU's memory; longer ones are cut and say so


@dataclass
class Bar:
    layout: Layout
    memory: int
    weights: int
    kv_room: int
    headroom: int
    over: int  # bytes past the GPU's memory


@dataclass
class PlanPage:
    id: str
    title: str
    plan: Plan
    bars: list[Bar]
    svg: Markup | None
    kind: str = field(default="plan", init=False)


def plan_page(plan: Plan, page_id: str, label: str) -> PlanPage:
    memory = plan.gpus.memory_bytes if plan.gpus is not None else 0
    bars = [_bar(layout, memory) for layout in plan.layouts] if memory else []
    gpu = f"{plan.gpus.count} x {plan.gpus.name or 'GPU'}" if plan.gpus is not None else "GPUs unknown"
    picture = _draw(bars, plan, f"what one GPU holds per layout on {gpu}") if bars else None
    return PlanPage(page_id, f"plan: {label} on {gpu}", plan, bars, picture.markup() if picture else None)


def _bar(layout: Layout, memory: int) -> Bar:
    weights, kv = layout.weight_bytes_per_gpu, layout.kv_room_bytes_per_gpu
    return Bar(layout, memory, weights, kv, max(0, memory - weights - kv), max(0, weights + kv - memory))


def _draw(bars: list[Bar], plan: Plan, label: str) -> Picture:
    memory = bars[0].memory
    scale_max = min(max(memory, *(b.weights + b.kv_room for b in bars)), SCALE_CAP * memory)
    span = WIDTH - NAME_W - STATS_W - 2 * MARGIN
    picture = Picture(WIDTH, 0, label, "plan-bars")

    def x_of(value: float) -> float:
        return MARGIN + NAME_W + span * min(value, scale_max) / scale_max

    top = MARGIN + 16
    picture.add(text(x_of(memory) - 4, MARGIN + 10, f"GPU memory {human_bytes(memory)}", "small", text_anchor="end"))
    for row, bar in enumerate(bars):
        picture.add(_row(bar, top + row * ROW_H, x_of, best=bar.layout.name == plan.best))
    bottom = top + len(bars) * ROW_H
    picture.add(line(x_of(memory), MARGIN + 12, x_of(memory), bottom, "b-memory"))
    usable = bars[0].layout.usable_bytes_per_gpu
    picture.add(line(x_of(usable), MARGIN + 12, x_of(usable), bottom, "b-usable",
                     data_usable=usable))
    items = [("b-weights", "weights per GPU"), ("b-kv", "KV cache room per GPU"),
             ("b-headroom", "headroom (the rest of the GPU)"), ("b-over", "past the GPU's memory")]
    marks, used = legend(items, MARGIN + NAME_W, bottom + 8, span + STATS_W)
    picture.add(*marks, text(MARGIN + NAME_W, bottom + used + 20,
                             f"dashed line: usable memory ({plan.memory_fraction:g} of the GPU, "
                             "--mem-fraction); solid line: the GPU's memory", "small muted"))
    picture.height = bottom + used + 30 + MARGIN
    return picture


def _row(bar: Bar, y: float, x_of: Callable[[float], float], *, best: bool) -> str:
    layout = bar.layout
    segments = [("weights", "b-weights", 0, bar.weights), ("kv", "b-kv", bar.weights, bar.kv_room),
                ("headroom", "b-headroom", bar.weights + bar.kv_room, bar.headroom)]
    parts = [text(MARGIN, y + 13, layout.name + (" (best)" if best else ""), "label" + (" title" if best else ""))]
    for name, cls, start, size in segments:
        if size > 0:
            parts.append(rect(x_of(start), y, x_of(start + size) - x_of(start), BAR_H, f"cell {cls}",
                              title(f"{layout.name}: {name} {human_bytes(size)} per GPU"),
                              data_segment=name, data_bytes=size))
    if bar.over:
        cut = bar.weights + bar.kv_room > SCALE_CAP * bar.memory  # drawn only up to the scale's end
        parts.append(rect(x_of(bar.memory), y + 4, x_of(bar.weights + bar.kv_room) - x_of(bar.memory), BAR_H - 8,
                          "b-over", title(f"{human_bytes(bar.over)} past the GPU's memory"),
                          data_segment="over", data_bytes=bar.over))
        if cut:
            parts.append(text(x_of(float("inf")) + 3, y + 13, "»", "label"))
    parts.append(text(WIDTH - MARGIN - STATS_W + 14, y + 13, _stats(layout), "small"))
    attrs = {"class_": "layout", "data-layout": layout.name, "data-fits": "true" if layout.fits else "false",
             "data-memory": bar.memory, "data-weights": bar.weights, "data-kv-room": bar.kv_room,
             "data-headroom": bar.headroom, "data-over": bar.over, "data-max-context": layout.max_context_fits,
             "data-concurrency": layout.concurrent_requests}
    return group(attrs, parts)


def _stats(layout: Layout) -> str:
    if not layout.fits:
        reason = "no fit: " + (layout.reasons[0] if layout.reasons else "no reason stated")
        return reason if len(reason) <= STATS_CHARS else reason[:STATS_CHARS - 1] + "…"
    context = f"{layout.max_context_fits:,} tokens" if layout.max_context_fits is not None else "context ?"
    concurrency = (f", {layout.concurrent_requests} at once" if layout.concurrent_requests is not None else "")
    return f"fits {context}{concurrency}"


__all__ = ["Bar", "PlanPage", "plan_page"]
