"""A JSON document whose big list is written one member at a time, byte for byte the text that
``client.documents.dumps`` makes of the whole document.

``probe --all-hosts`` prints one document holding every host's profile; building it whole (Python
objects, then one string) costs memory per host at the end of a run that kept none until then. The
document is dumped once with a marker in place of the list, and the list's members are dumped one by
one (each through the same strict, masked ``dumps``) at the indentation ``json.dumps(indent=2)``
gives them inside the document.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from introspect.client.documents import dumps

_INDENT = 2  # documents.dumps' indent
_MARKER = "\x00introspect-streamed-list\x00"


def chunks(document: Mapping[str, object], key: str, items: Iterable[Any]) -> Iterator[str]:
    """The text of ``dumps({**document, key: list(items)})``, in pieces, holding one item at a time:
    the part before the list first (a reader of a pipe sees the document start at once)."""
    text = dumps({**document, key: _MARKER})
    head, found, tail = text.partition(json.dumps(_MARKER))
    if not found:
        raise ValueError(f"the document has no member {key!r} to stream")  # a bug in the caller
    yield head
    line = head[head.rfind("\n") + 1:]
    depth = len(line) - len(line.lstrip(" "))
    inner = "\n" + " " * (depth + _INDENT)
    first = True
    for item in items:
        yield ("[" if first else ",") + inner + dumps(item).replace("\n", inner)
        first = False
    yield "[]" if first else "\n" + " " * depth + "]"
    yield tail


__all__ = ["chunks"]
