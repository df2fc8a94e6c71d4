"""YAML with line marks: PyYAML's safe loader, keeping the line of every key and item.

The validator names ``file:line: key`` in every error, and must see duplicate keys
that plain ``yaml.safe_load`` drops silently.
"""

from __future__ import annotations

from typing import Any

import yaml

from introspect.inventory.marked import MarkedMap, MarkedSeq
from introspect.inventory.model import InventoryError

__all__ = ["MarkedLoader", "MarkedMap", "MarkedSeq", "load_marked_yaml"]


class MarkedLoader(yaml.SafeLoader):
    source = "<string>"


def _construct_map(loader: MarkedLoader, node: yaml.MappingNode) -> MarkedMap:
    # Duplicates are checked on the raw node before merge keys (<<) are flattened:
    # an explicit key overriding a merged one is legal YAML, a repeated key is not.
    # Plain yaml.safe_load keeps the last duplicate silently.
    seen: dict[Any, int] = {}
    duplicates: list[tuple[str, int, int]] = []
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if not isinstance(key, str):
            raise InventoryError(f"keys must be strings, got {type(key).__name__} {key!r}",
                                 source=loader.source, line=line, key=str(key))
        if key in seen:
            # Reported by the validator, which knows the full key path (hosts.gpu-a...).
            duplicates.append((key, line, seen[key]))
        else:
            seen[key] = line
    loader.flatten_mapping(node)
    out = MarkedMap()
    out.line = node.start_mark.line + 1
    out.key_lines = {}
    out.duplicates = duplicates
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[key] = key_node.start_mark.line + 1
    return out


def _construct_seq(loader: MarkedLoader, node: yaml.SequenceNode) -> MarkedSeq:
    out = MarkedSeq(loader.construct_object(child, deep=True) for child in node.value)
    out.line = node.start_mark.line + 1
    out.item_lines = [child.start_mark.line + 1 for child in node.value]
    return out


MarkedLoader.add_constructor("tag:yaml.org,2002:map", _construct_map)
MarkedLoader.add_constructor("tag:yaml.org,2002:seq", _construct_seq)


_FAST: dict[type[MarkedLoader], type[MarkedLoader]] = {}


def _init_fast(self: Any, stream: str) -> None:
    # As yaml.cyaml.CSafeLoader.__init__: libyaml's parser, then the Python constructor and resolver.
    from yaml._yaml import CParser

    CParser.__init__(self, stream)
    yaml.constructor.SafeConstructor.__init__(self)
    yaml.resolver.Resolver.__init__(self)


def _fast_loader(loader_class: type[MarkedLoader]) -> type[MarkedLoader] | None:
    """``loader_class`` with libyaml's parser (``yaml.CParser``) in place of PyYAML's pure-Python
    reader, scanner, parser and composer; None when PyYAML was built without libyaml. The same
    constructors and resolver run on the same nodes, marks included, ~5x faster on a fleet's
    inventory (https://pyyaml.org/wiki/PyYAMLDocumentation, "CLoader")."""
    if not getattr(yaml, "__with_libyaml__", False):
        return None
    fast = _FAST.get(loader_class)
    if fast is None:
        from yaml._yaml import CParser  # importable: yaml set __with_libyaml__ after importing it

        fast = _FAST[loader_class] = type(f"C{loader_class.__name__}", (CParser, loader_class),
                                          {"__init__": _init_fast})
    return fast


def load_marked_yaml(text: str, source: str, loader_class: type[MarkedLoader] | None = None) -> Any:
    fast = _fast_loader(loader_class or MarkedLoader)
    if fast is not None:
        try:
            return _load(fast, text, source)
        except Exception:  # rejected (or odd) input: read again below, for PyYAML's own error
            pass
    return _load(loader_class or MarkedLoader, text, source)


def _load(loader_class: type[MarkedLoader], text: str, source: str) -> Any:
    loader = loader_class(text)
    loader.source = source
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise InventoryError(f"invalid YAML: {exc.problem or exc}", source=source, line=line) from None
    except yaml.YAMLError as exc:
        raise InventoryError(f"invalid YAML: {exc}", source=source) from None
    finally:
        loader.dispose()
