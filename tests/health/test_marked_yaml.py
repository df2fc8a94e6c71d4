"""The inventory's YAML read with libyaml's parser gives what PyYAML's pure-Python one gives:
the same values, the same line marks and duplicates, and for rejected input PyYAML's own error."""

from __future__ import annotations

from typing import Any

import pytest

from introspect.inventory import marked_yaml
from introspect.inventory.ansible_yaml import AnsibleLoader
from introspect.inventory.marked import MarkedMap, MarkedSeq
from introspect.inventory.marked_yaml import MarkedLoader, load_marked_yaml

DOCUMENTS = [
    "defaults:\n  parallel: 4\nhosts:\n  gpu-a:\n    address: 10.0.0.1\n    venvs:\n"
    "      - path: /opt/v\n        requires: [transformers, 'tiktoken>=0.7']\n      -   path: /opt/w\n",
    "a: 1\na: 2\n", "base: &b {x: 1}\nh:\n  <<: *b\n  x: 2\n", "x: !vault |\n  $ANSIBLE_VAULT;1.1\n  abc\n",
    "x: !unsafe '{{ a }}'\n", "\ufeffa: 1\n", "a: [1, 2,\n  3]\n", "a: |\n  x\n  y\n", "- a\n- {b: [c, {d: e}]}\n",
    "a: 2001-12-14\nb: 0o17\nc: yes\nd: ~\ne: .inf\nf: !!str 1\n", "", "# only a comment\n",
    # rejected: libyaml words these errors differently, so they are read again by PyYAML
    "a:\n\t- 1\n", "a: @x\n", "a: *x\n", "%YAML 2.0\n---\na: 1\n", "a: b\n  c: d\n", "1: a\n", "a: !foo x\n",
    "---\na: 1\n---\nb: 2\n", "a: '\ufeff'\n",
]


def _marked(value: Any) -> Any:
    if isinstance(value, MarkedMap):
        return ("map", value.line, dict(value.key_lines), list(value.duplicates),
                [(k, _marked(v)) for k, v in value.items()])
    if isinstance(value, MarkedSeq):
        return ("seq", value.line, list(value.item_lines), [_marked(v) for v in value])
    return (type(value).__name__, value)


def _read(read: Any) -> Any:
    try:
        return ("ok", _marked(read()))
    except Exception as exc:  # noqa: BLE001 - compared, error against error
        return ("error", type(exc).__name__, str(exc))


@pytest.mark.parametrize("loader", [MarkedLoader, AnsibleLoader])
@pytest.mark.parametrize("text", DOCUMENTS)
def test_libyaml_reads_as_pure_python_pyyaml(text: str, loader: type[MarkedLoader]) -> None:
    pure = _read(lambda: marked_yaml._load(loader, text, "hosts.yaml"))
    assert _read(lambda: load_marked_yaml(text, "hosts.yaml", loader)) == pure


def test_the_fast_loader_is_libyamls_when_pyyaml_has_it() -> None:
    import yaml

    fast = marked_yaml._fast_loader(MarkedLoader)
    assert (fast is not None) == bool(yaml.__with_libyaml__)
