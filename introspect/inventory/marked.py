"""The containers of YAML with line marks, apart from the loader (:mod:`.marked_yaml`), so that
the validator can be imported without PyYAML: only reading a YAML file needs it."""

from __future__ import annotations


class MarkedMap(dict):
    """A mapping that remembers the line of each key (PyYAML node marks, 1-based)."""

    line: int
    key_lines: dict[str, int]
    duplicates: list[tuple[str, int, int]]  # (key, line, line of its first definition)


class MarkedSeq(list):
    line: int
    item_lines: list[int]
