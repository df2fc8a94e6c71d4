"""The parameter breakdown of the model page: what each component holds, the settled total and
active counts with their witnesses, and one stacked bar.

The breakdown is the config rules' estimate by component (``architecture.params.breakdown``);
the settled total may come from another witness (the weights' headers, the built model), so the
page names both and their sources. The profile splits *active* by component nowhere: the page
states the model's active count and the MTP layers' own, and leaves the rest unsplit rather
than deriving a split the profile does not hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from introspect.cli.render_term import human_count
from introspect.documents.profile_architecture import (
    Architecture,
    CodeWitness,
    ParamCounts,
    ParamSources,
    ParamsWhy,
)
from introspect.report.svg import Picture, legend, rect, text, title

# breakdown key -> the words of the page, in the order a forward pass meets them.
COMPONENTS = (
    ("embedding", "embedding"), ("attention", "attention"), ("recurrent", "recurrent mixers"),
    ("dense_ffn", "dense FFN"), ("experts_routed", "routed experts"), ("experts_shared", "shared experts"),
    ("router", "routers"), ("norms", "norms"), ("final_norm", "final norm and extras"),
    ("lm_head", "output head"), ("vision", "vision tower"),
)
DARK_SLOTS = frozenset({0, 2, 5, 7, 8, 9})  # the palette slots (svg.STYLE .p-N) white text reads on


@dataclass
class ParamRow:
    key: str
    words: str
    total: int
    share: float  # of the breakdown's sum


@dataclass
class Params:
    rows: list[ParamRow]
    breakdown_total: int | None
    total: int | None
    total_source: str | None
    total_why: str | None
    active: int | None
    active_source: str | None
    active_why: str | None
    mtp_layers: int | None
    mtp_params: int | None
    mtp_active: int | None
    witnesses: list[tuple[str, str]] = field(default_factory=list)
    unknown: str | None = None  # why there is no breakdown


def params_of(arch: Architecture) -> Params:
    params, mtp = arch.params, arch.mtp
    breakdown = params.breakdown or {}
    known = sum(breakdown.values())
    order = [key for key, _ in COMPONENTS] + sorted(set(breakdown) - {key for key, _ in COMPONENTS})
    words = dict(COMPONENTS)
    rows = [ParamRow(key, words.get(key, key.replace("_", " ")), breakdown[key], breakdown[key] / known)
            for key in order if breakdown.get(key)]
    why = params.why or ParamsWhy(total=None, active=None)
    unknown = None
    if not rows:
        unknown = ("unknown: " + (why.total or "no witness split the parameters by component"))
    return Params(rows, known or None, params.total, params.source, why.total, params.active, params.active_source,
                  why.active, mtp.layers, mtp.params, mtp.active, _witnesses(params.sources), unknown)


def _witnesses(sources: ParamSources | None) -> list[tuple[str, str]]:
    """What each witness counted: the config rules, the built model, the weights' headers."""
    out = []
    for words, source in (("config rules", sources.config if sources else None),
                          ("built model", sources.model_code if sources else None),
                          ("weights' headers", sources.weights if sources else None)):
        if source is None or source.total is None:
            said = [source.status, source.reason] if isinstance(source, CodeWitness) else []
            why = ": ".join(part for part in said if part)
            out.append((words, f"did not count ({why or 'not run, or nothing to read'})"))
            continue
        active = source.active if isinstance(source, (ParamCounts, CodeWitness)) else None
        out.append((words, f"{human_count(source.total)} total" + (f", {human_count(active)} active"
                                                                   if active is not None else "")))
    return out


def draw(params: Params, label: str) -> Picture | None:
    """Two bars: the total split by component (each one's share of the estimate), and the active
    count against the total (only where the profile states both)."""
    share = params.active / params.total if params.active is not None and params.total else None
    if not params.rows and share is None:
        return None
    width, bar_h, margin, name_w = 1120.0, 26.0, 10.0, 70.0
    picture = Picture(width, 0, label, "param-breakdown")
    span, y = width - 2 * margin - name_w, margin
    if params.rows:
        picture.add(text(margin, y + 17, "total", "label"))
        x = margin + name_w
        for slot, row in enumerate(params.rows):
            w = span * row.share
            tip = title(f"{row.words}: {human_count(row.total)} ({row.share:.1%})")
            picture.add(rect(x, y, w, bar_h, f"cell p-{slot % 11}", tip, data_component=row.key, data_params=row.total))
            if w > 90:
                ink = "small on-dark" if slot % 11 in DARK_SLOTS else "small"
                picture.add(text(x + 4, y + 17, f"{row.words} {row.share:.0%}", ink))
            x += w
        y += bar_h + 8
    if share is not None:
        words = f"{human_count(params.active)} active per token: {share:.1%} of {human_count(params.total)}"
        picture.add(text(margin, y + 17, "active", "label"),
                    rect(margin + name_w, y, span * share, bar_h, "cell p-0", title(words), data_params=params.active),
                    rect(margin + name_w, y, span, bar_h, "frame"),
                    text(margin + name_w + span * share + 6, y + 17, words, "small"))
        y += bar_h + 8
    marks, used = legend([(f"p-{slot % 11}", f"{row.words} {human_count(row.total)}")
                          for slot, row in enumerate(params.rows)], margin, y + 4, width - 2 * margin)
    picture.add(*marks)
    picture.height = y + 4 + (used if params.rows else 0) + margin
    return picture


__all__ = ["COMPONENTS", "ParamRow", "Params", "draw", "params_of"]
