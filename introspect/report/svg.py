"""The few SVG primitives the report's pictures are drawn with, escaped and self-contained.

Every picture is one ``<svg>`` element with a ``viewBox`` (it scales to the page's width, so
no picture makes the page scroll sideways) and its own ``<style>``: the same text works inline
in the HTML page and as a file beside the Markdown, light or dark (``prefers-color-scheme``),
with no font, script or request. Host-controlled text (model types, host names, package
versions) only ever reaches the SVG through :func:`tag`, which escapes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from html import escape

from markupsafe import Markup

Attrs = Mapping[str, object]

# Paul Tol's "bright" and "muted" qualitative schemes: told apart by the common colour-vision
# deficiencies (https://personal.sron.nl/~pault/#sec:qualitative), on white and on near-black.
STYLE = """
text{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;fill:#1b1b1b}
.small{font-size:9px}.label{font-size:11px}.title{font-size:12px;font-weight:600}
.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.on-dark{fill:#fff}.muted{fill:#5a5a5a}
.cell{stroke:#1b1b1b;stroke-width:.6}.frame{fill:none;stroke:#1b1b1b;stroke-width:.8}
.dash{stroke-dasharray:3 2}.grid{stroke:#8a8a8a;stroke-width:.6;stroke-dasharray:2 2}
.k-full{fill:#4477aa}.k-sliding{fill:#66ccee}.k-chunked{fill:#44aa99}.k-compressed{fill:#aa3377}
.k-linear{fill:#ccbb44}.k-recurrent{fill:#228833}.k-cross{fill:#ee6677}.k-mlp{fill:#bbbbbb}
.k-unknown{fill:#eeeeee}.k-mtp{fill:#ffffff}
.moe-band{fill:#1b1b1b}.tap-dflash{fill:#ee7733}.tap-eagle3{fill:#0077bb}.tap-found{fill:#cc3311}
.s-pass{fill:#228833}.s-warn{fill:#ccbb44}.s-fail{fill:#ee6677}.s-unreachable{fill:#1b1b1b}
.s-none{fill:#eeeeee}.changed{fill:#ffffff;stroke:#1b1b1b;stroke-width:.8}
.b-weights{fill:#4477aa}.b-kv{fill:#66ccee}.b-headroom{fill:#dddddd}.b-over{fill:#ee6677}
.b-memory{stroke:#1b1b1b;stroke-width:1.4}.b-usable{stroke:#1b1b1b;stroke-width:.8;stroke-dasharray:3 2}
.p-0{fill:#4477aa}.p-1{fill:#66ccee}.p-2{fill:#228833}.p-3{fill:#ccbb44}.p-4{fill:#ee6677}
.p-5{fill:#aa3377}.p-6{fill:#bbbbbb}.p-7{fill:#44aa99}.p-8{fill:#999933}.p-9{fill:#882255}
.p-10{fill:#dddddd}
@media (prefers-color-scheme:dark){
text{fill:#e8e8e8}.muted{fill:#b0b0b0}.cell,.changed{stroke:#e8e8e8}.frame{stroke:#e8e8e8}
.k-unknown{fill:#3a3a3a}.k-mtp{fill:#2a2a2a}.moe-band{fill:#000}.s-unreachable{fill:#000;stroke:#e8e8e8}
.s-none{fill:#333}.b-headroom{fill:#4a4a4a}.b-memory,.b-usable{stroke:#e8e8e8}.changed{fill:#2a2a2a}
}
"""


def _attrs(attrs: Attrs) -> str:
    """``name="value"`` pairs; None and False leave the attribute out, True writes it bare."""
    out = []
    for name, value in attrs.items():
        if value is None or value is False:
            continue
        key = name.rstrip("_").replace("_", "-")  # class_ -> class, data_layer -> data-layer
        out.append(f" {key}" if value is True else f' {key}="{escape(_text(value), quote=True)}"')
    return "".join(out)


def _text(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return str(value)


def tag(name: str, attrs: Attrs | None = None, *children: str, text: str | None = None) -> str:
    """One element; ``text`` is escaped, ``children`` are markup made by this module."""
    inner = escape(text, quote=False) if text is not None else ""
    body = inner + "".join(children)
    opening = f"<{name}{_attrs(attrs or {})}"
    return f"{opening}>{body}</{name}>" if body else f"{opening}/>"


def title(text: str) -> str:
    """The tooltip a browser shows over its parent (and what a screen reader reads)."""
    return tag("title", text=text)


@dataclass
class Picture:
    """An SVG being drawn: ``width`` x ``height`` user units, its elements in order."""

    width: float
    height: float
    label: str  # the picture's accessible name
    kind: str  # data-picture: which picture this is (layer-map, plan-bars, ...)
    parts: list[str] = field(default_factory=list)

    def add(self, *elements: str) -> None:
        self.parts.extend(elements)

    def markup(self) -> Markup:
        attrs = {"xmlns": "http://www.w3.org/2000/svg", "viewBox": f"0 0 {_text(self.width)} {_text(self.height)}",
                 "width": _text(self.width), "role": "img", "aria-label": self.label, "class_": "picture",
                 "data-picture": self.kind, "preserveAspectRatio": "xMinYMin meet"}
        svg = tag("svg", attrs, tag("style", text=STYLE), title(self.label), *self.parts)
        return Markup(svg)  # every part was escaped by tag()


def rect(x: float, y: float, w: float, h: float, cls: str, *children: str, **attrs: object) -> str:
    """A rectangle; ``children`` (a :func:`title`) and ``attrs`` (``data_x=1`` -> ``data-x="1"``) as given."""
    return tag("rect", {"x": x, "y": y, "width": max(w, 0.0), "height": max(h, 0.0), "class_": cls, **attrs},
               *children)


def text(x: float, y: float, words: str, cls: str = "label", **attrs: object) -> str:
    return tag("text", {"x": x, "y": y, "class_": cls, **attrs}, text=words)


def line(x1: float, y1: float, x2: float, y2: float, cls: str, **attrs: object) -> str:
    return tag("line", {"x1": x1, "y1": y1, "x2": x2, "y2": y2, "class_": cls, **attrs})


def group(attrs: Attrs, children: Iterable[str]) -> str:
    return tag("g", attrs, *children)


def legend(items: Iterable[tuple[str, str]], x: float, y: float, width: float) -> tuple[list[str], float]:
    """Swatches with their words, wrapped to ``width``; returns the elements and the height used."""
    parts: list[str] = []
    cx, cy = x, y
    for cls, words in items:
        span = 18 + 6.2 * len(words) + 14
        if cx + span > x + width and cx > x:
            cx, cy = x, cy + 18
        parts += [rect(cx, cy, 12, 12, f"cell {cls}"), text(cx + 17, cy + 10, words)]
        cx += span
    return parts, cy - y + 18


__all__ = ["STYLE", "Picture", "group", "legend", "line", "rect", "tag", "text", "title"]
