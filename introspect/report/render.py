"""The report as text: one self-contained HTML page, or Markdown with its pictures beside it.

Templates are jinja2 (already what chat templates are rendered with), shipped in the wheel
under ``introspect/report/templates``. HTML is autoescaped: host-controlled text (model types,
tokens, host names, messages) is always text, never markup; the pictures are markup made by
:mod:`introspect.report.svg`, which escapes what it draws. Markdown escapes the characters a
table or a renderer would read (``|``, ``<``, ``>``, newlines).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from introspect.cli.render_term import human_bytes, human_count
from introspect.report.build import Report
from introspect.report.fleet_page import change_rows, when


def _num(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "unknown"
    return f"{value:,}" if isinstance(value, int) else f"{value:,.2f}"


def _num_or_dash(value: Any) -> str:
    """A per-layer figure the profile does not state for that layer's kind (a recurrent layer keeps no
    per-token KV, an attention layer no fixed state): a dash, not "unknown"."""
    return "–" if value is None else _num(value)


def _bytes(value: Any) -> str:
    return "unknown" if isinstance(value, bool) or not isinstance(value, (int, float)) else human_bytes(value)


def _count(value: Any) -> str:
    return "unknown" if isinstance(value, bool) or not isinstance(value, (int, float)) else human_count(value)


_MD_SPECIAL = re.compile(r"([\\`*_\[\]|<>#])")


def _md(value: Any) -> str:
    """Text for a Markdown table cell or paragraph: read as written, on one line."""
    text = "" if value is None else str(value)
    text = _MD_SPECIAL.sub(lambda m: {"<": "&lt;", ">": "&gt;"}.get(m.group(1), "\\" + m.group(1)), text)
    return text.replace("\r", "").replace("\n", "<br>")


def _code(value: Any) -> str:
    """A code span that shows any text as written (a run of backticks inside takes a longer fence)."""
    text = "" if value is None else str(value).replace("\n", " ").replace("|", "\\|")
    fence = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _environment(autoescape: bool) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("introspect.report", "templates"), autoescape=autoescape,
                             undefined=jinja2.StrictUndefined, trim_blocks=not autoescape,
                             lstrip_blocks=not autoescape, keep_trailing_newline=True)
    env.filters.update(num=_num, num_or_dash=_num_or_dash, bytes=_bytes, count=_count, when=when, change_rows=change_rows, md=_md, code=_code)
    return env


def render_html(report: Report) -> str:
    return _environment(True).get_template("report.html.j2").render(report=report)


class Pictures:
    """Where the Markdown's pictures go: inline ``<svg>`` (``folder`` None), or one file each in
    ``folder``, linked as ``link/NAME.svg`` (wikis and pull requests show an image link, not inline SVG)."""

    def __init__(self, folder: Path | None, link: str | None) -> None:
        self.folder, self.link = folder, link
        self.files: dict[str, str] = {}

    def __call__(self, svg: Markup | None, name: str, alt: str) -> str:
        if svg is None:
            return ""
        if self.folder is None:
            return "\n" + str(svg) + "\n"
        self.files[f"{name}.svg"] = str(svg)
        return f"![{_md(alt)}]({self.link}/{name}.svg)"


def render_markdown(report: Report, pictures: Pictures) -> str:
    return _environment(False).get_template("report.md.j2").render(report=report, picture=pictures)


__all__ = ["Pictures", "render_html", "render_markdown"]
