"""Griffe extension (mkdocs.yml, mkdocstrings ``extensions:``): introspect's docstrings are
written for Sphinx and doctest, the API page renders them as Markdown.

- A doctest example (``>>>`` lines, ``...`` continuations and the expected output up to a blank
  line) becomes a fenced ``pycon`` block; as plain Markdown its ``outcome.profile["architecture"]``
  reads as a reference link, and ``>>>`` as three nested quotes.
- A Sphinx role (``:func:`probe```, ``:class:`~introspect.errors.IntrospectError```) becomes
  a code span of the name it shows (the last part after ``~``, as Sphinx shows it).

The docstrings themselves stay as they are: tests/api/test_api.py runs their examples.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|exc|data|obj|const):`(~?)([^`]+)`")


def _role(match: re.Match[str]) -> str:
    name = match.group(2)
    return f"`{name.rsplit('.', 1)[-1] if match.group(1) else name}`"


def markdown_docstring(text: str) -> str:
    """``text`` with doctest blocks fenced and Sphinx roles as code spans."""
    out: list[str] = []
    in_example = False
    for line in text.split("\n"):
        starts = line.lstrip().startswith(">>>")
        if starts and not in_example:
            out += ["```pycon"]
            in_example = True
        elif in_example and not line.strip():
            out += ["```"]
            in_example = False
        out.append(line if in_example else _ROLE.sub(_role, line))
    return "\n".join([*out, "```"] if in_example else out)


class DoctestBlocks(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, **_kwargs: Any) -> None:
        if obj.docstring is not None and "```pycon" not in obj.docstring.value:  # once per object
            obj.docstring.value = markdown_docstring(obj.docstring.value)
