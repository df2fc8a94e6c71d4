"""The layer map: one cell per decoder layer, coloured by its mixer, marked dense or MoE, with
the cache it keeps, the MTP layers after the last one and the drafter taps on it.

Everything is read from the profile's ``architecture`` (``layers.pattern`` and ``layers.ffn``
per layer, ``kv_cache.per_kind`` per kind, ``mtp.layers``, ``speculative.drafter_plan`` and the
drafters found beside the model); a layer whose kind or cache the profile does not state is
drawn as unknown, never guessed. The cells carry ``data-*`` attributes (index, kind, FFN, KV
bytes, taps) so that a test or a script reads the same facts the picture shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from introspect.analysis.architecture import kinds as k
from introspect.analysis.architecture.mixers import words as kind_words
from introspect.cli.render_term import human_bytes
from introspect.documents.profile_architecture import Architecture, KvKind, Speculative
from introspect.report.svg import Picture, group, legend, rect, tag, text, title

# The mixer families the map colours (a kind keeps its own name in data-kind and the tooltip).
GROUPS = {k.FULL: "full", k.SLIDING: "sliding", k.CHUNKED: "chunked", k.CSA: "compressed", k.HCA: "compressed",
          k.LINEAR: "linear", k.GDN: "linear", k.KDA: "linear", k.MAMBA: "recurrent", k.MAMBA2: "recurrent",
          k.RWKV: "recurrent", k.CONV: "recurrent", k.RECURRENT: "recurrent", k.CROSS: "cross", k.MLP: "mlp"}
DARK_GROUPS = frozenset({"full", "chunked", "compressed", "recurrent"})  # white text reads better on these
TAPS = (("dflash", "DFlash target layer"), ("eagle3", "EAGLE-3 aux layer"), ("found", "a found drafter's target layer"))

COLUMNS, CELL_W, CELL_H, GAP, TAP_BAND, MARGIN = 16, 66, 50, 6, 14, 10


@dataclass
class LayerCell:
    index: int
    kind: str  # "unknown" when the profile does not say
    ffn: str | None  # "dense", "moe", or None (no FFN / not stated)
    kv_per_token: int | None  # bytes this layer adds per token of context
    state_bytes: int | None  # bytes of fixed state per sequence (recurrent mixers, compressed attention)
    shared_kv: bool = False  # its kind has layers that reuse another layer's KV (which ones is not stated)
    taps: list[str] = field(default_factory=list)

    @property
    def groups(self) -> list[str]:
        return [GROUPS.get(part, "unknown") for part in self.kind.split("+")]


@dataclass
class LayerMap:
    cells: list[LayerCell]
    mtp_layers: int
    taps: dict[str, list[int]]  # tap kind -> layer ids, as the profile states them
    notes: list[str]
    reason: str | None = None  # why there is no map


def layer_map(arch: Architecture) -> LayerMap:
    """The cells of ``arch`` (a profile's architecture section)."""
    count, pattern, ffn = arch.num_layers, arch.layers.pattern or [], arch.layers.ffn or []
    taps = _taps(arch.speculative)
    mtp_layers = max(arch.mtp.layers, 0)
    if count is None or count <= 0:
        return LayerMap([], 0, taps, [], reason="the profile does not state the number of decoder layers")
    per_kind = arch.kv_cache.per_kind if arch.kv_cache is not None else {}
    cells = []
    for index in range(count):
        kind = pattern[index] if index < len(pattern) and pattern[index] else "unknown"
        per_token, state, shared = _cache_of(kind, per_kind)
        moe_or_dense = ffn[index] if index < len(ffn) and ffn[index] in ("dense", "moe") else None
        cells.append(LayerCell(index, kind, moe_or_dense, per_token, state, shared,
                               [name for name, ids in taps.items() if index in ids]))
    return LayerMap(cells, mtp_layers, taps, _notes(arch, pattern, count))


def _cache_of(kind: str, per_kind: dict[str, KvKind]) -> tuple[int | None, int | None, bool]:
    """(KV bytes per token, state bytes per sequence, shares KV) of one layer of ``kind``; a parallel
    ``a+b`` layer keeps both parts' caches. None where the profile states no figure."""
    per_token: int | None = None
    state: int | None = None
    shared = False
    for part in kind.split("+"):
        entry = per_kind.get(part)
        if entry is None:
            continue
        if entry.bytes_per_token_per_layer is not None:
            per_token = (per_token or 0) + entry.bytes_per_token_per_layer
        if entry.state_bytes_per_layer is not None:
            state = (state or 0) + entry.state_bytes_per_layer
        shared = shared or bool(entry.kv_shared_layers)
    return per_token, state, shared


def _taps(spec: Speculative) -> dict[str, list[int]]:
    plan = spec.drafter_plan
    found = [i for drafter in spec.drafters for i in drafter.target_layer_ids or []]
    return {"dflash": list(plan.dflash.target_layer_ids) if plan else [],
            "eagle3": list(plan.eagle3.aux_layer_ids) if plan else [], "found": sorted(set(found))}


def _notes(arch: Architecture, pattern: list[str], count: int) -> list[str]:
    kv = arch.kv_cache
    notes = []
    if not pattern:
        notes.append(f"which mixer each of the {count} layers has is not stated: {arch.layers.why or 'no layout'}")
    for kind, entry in (kv.per_kind if kv is not None else {}).items():
        by_engine = entry.state_bytes_per_layer_by_engine or {}
        if len(set(by_engine.values())) > 1:  # the engines keep the state in different dtypes
            notes.append(f"{kind_words(kind)} state per layer differs by engine: " + ", ".join(
                f"{engine} {human_bytes(size)}" for engine, size in by_engine.items())
                + f"; the cells show the profile's {human_bytes(entry.state_bytes_per_layer)}")
        if entry.kv_shared_layers:
            notes.append(f"{entry.kv_shared_layers} of the {entry.layers} {kind_words(kind)} layers reuse another "
                         "layer's KV (kv_shared_layers) and keep none of their own; the profile does not say "
                         "which, so each cell shows what a layer that keeps its own adds")
    if kv is not None and kv.sliding_window_cap:
        notes.append(f"windowed layers keep at most {kv.sliding_window_cap} tokens of KV "
                     "(the sliding window or attention chunk)")
    if kv is None:
        notes.append("the profile states no KV cache geometry: no bytes are shown per layer")
    return notes


# --------------------------------------------------------------------------- drawing


def _short(value: float) -> str:
    """Bytes in at most 6 characters and a unit, to fit a cell: 1.1KiB, 304KiB, 2.0MiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.1f}{unit}" if value < 10 and unit != "B" else f"{value:.0f}{unit}"
        value /= 1024
    return str(value)


def _cache_words(cell: LayerCell) -> tuple[list[str], str]:
    """(the cell's lines, the tooltip's words) of a layer's cache."""
    lines, words = [], []
    if cell.kv_per_token is not None:
        lines.append(f"{_short(cell.kv_per_token)}/tok" + ("*" if cell.shared_kv else ""))
        words.append(f"{human_bytes(cell.kv_per_token)} of KV per token")
    if cell.state_bytes is not None:
        lines.append(f"{_short(cell.state_bytes)}/seq")
        words.append(f"{human_bytes(cell.state_bytes)} of state per sequence")
    if not lines:
        return ["no cache", "stated"], "the profile states no cache for this layer's kind"
    return lines, "; ".join(words)


def _cell(cell: LayerCell, x: float, y: float) -> str:
    fills = cell.groups
    width = CELL_W / len(fills)
    shapes = [rect(x + i * width, y, width, CELL_H, f"cell k-{g}") for i, g in enumerate(fills)]
    ink = "on-dark" if fills[0] in DARK_GROUPS else ""
    lines, cache = _cache_words(cell)
    ffn = {"moe": "MoE", "dense": "dense"}.get(cell.ffn or "", "FFN not stated")
    tip = (f"layer {cell.index}: {' + '.join(kind_words(p) for p in cell.kind.split('+'))}; {ffn}; {cache}"
           + "".join(f"; {words}" for name, words in TAPS if name in cell.taps))
    shapes.append(text(x + 4, y + 12, f"{cell.index}", f"label {ink}".strip()))
    shapes += [text(x + 4, y + 23 + 10 * n, line, f"small mono {ink}".strip()) for n, line in enumerate(lines[:2])]
    if cell.ffn == "moe":
        shapes += [rect(x, y + CELL_H - 12, CELL_W, 12, "moe-band"), text(x + 4, y + CELL_H - 3, "MoE", "small on-dark")]
    elif cell.ffn == "dense":
        shapes.append(text(x + CELL_W - 4, y + 12, "dense", f"small {ink}".strip(), text_anchor="end"))
    shapes += _tap_marks(cell.taps, x, y - TAP_BAND)
    attrs = {"class_": "layer", "data-layer": cell.index, "data-kind": cell.kind, "data-group": "+".join(fills),
             "data-ffn": cell.ffn or "none", "data-moe": "true" if cell.ffn == "moe" else "false",
             "data-kv-bytes-per-token": cell.kv_per_token, "data-state-bytes": cell.state_bytes,
             "data-taps": " ".join(cell.taps) or None}
    return group(attrs, [title(tip), *shapes])


def _tap_marks(taps: list[str], x: float, y: float) -> list[str]:
    marks = []
    for slot, (name, words) in enumerate(TAPS):
        if name not in taps:
            continue
        cx = x + 10 + slot * 22
        points = f"{cx - 6},{y + 2} {cx + 6},{y + 2} {cx},{y + 12}"  # points down at its layer
        marks.append(tag("polygon", {"points": points, "class_": f"tap-{name}", "data-tap": name}, title(words)))
    return marks


def draw(layer_map: LayerMap, label: str) -> Picture | None:
    """The map as a picture (None when the layer count is unknown)."""
    cells = layer_map.cells
    if not cells:
        return None
    columns = min(COLUMNS, len(cells) + layer_map.mtp_layers)
    width = 2 * MARGIN + columns * (CELL_W + GAP) - GAP
    slots = len(cells) + layer_map.mtp_layers
    rows = -(-slots // columns)
    picture = Picture(width, 0, label, "layer-map")
    step = TAP_BAND + CELL_H + GAP
    for slot in range(slots):
        x = MARGIN + (slot % columns) * (CELL_W + GAP)
        y = MARGIN + (slot // columns) * step + TAP_BAND
        picture.add(_cell(cells[slot], x, y) if slot < len(cells) else _mtp(slot - len(cells), x, y))
    items = [(f"k-{g}", _group_words(g, cells)) for g in dict.fromkeys(g for c in cells for g in c.groups)]
    items += [("moe-band", "MoE layer (dense layers say so)")]
    items += [(f"tap-{name}", words) for name, words in TAPS if layer_map.taps.get(name)]
    items += [("k-mtp dash", "MTP layer")] if layer_map.mtp_layers else []
    marks, used = legend(items, MARGIN, MARGIN + rows * step + 4, width - 2 * MARGIN)
    picture.add(*marks)
    picture.height = MARGIN + rows * step + 4 + used + MARGIN
    return picture


def _group_words(name: str, cells: list[LayerCell]) -> str:
    members = sorted({part for c in cells for part in c.kind.split("+") if GROUPS.get(part, "unknown") == name})
    return "unknown mixer" if name == "unknown" else ", ".join(kind_words(m) for m in members)


def _mtp(index: int, x: float, y: float) -> str:
    return group({"class_": "mtp", "data-mtp": index},
                 [title(f"MTP layer {index}: a next-token-prediction head after the last decoder layer"),
                  rect(x, y, CELL_W, CELL_H, "cell k-mtp dash"), text(x + 4, y + 13, f"MTP {index}")])


__all__ = ["GROUPS", "LayerCell", "LayerMap", "draw", "layer_map"]
