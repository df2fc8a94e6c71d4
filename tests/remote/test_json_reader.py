"""The probe's JSON reader: each way a file can be unusable is its own error, with a position
where there is one; BOM-marked and UTF-16 files are read as transformers would not, with a
warning; a FIFO is never opened for a blocking read; deep nesting never reaches the recursive
parser, on the host or in the controller."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from introspect.errors import ProtocolError
from introspect.remote.readers import (
    JSON_CONSTANT_KEY,
    MAX_JSON_DEPTH,
    read_json_file,
    read_text_capped,
    sha256_file,
)
from introspect.transport.shipping import parse_reply

GOOD = {"model_type": "llama", "num_hidden_layers": 3}


@pytest.mark.parametrize(("content", "kind", "words"), [
    (b'{"a": 1} trailing', "malformed-json", "Extra data at line 1 column 10"),
    (b'{"a": 1}\n{"b": 2}', "malformed-json", "Extra data at line 2 column 1"),
    (b'{"a": 1,\n "b": ', "malformed-json", "Expecting value at line 2 column 7"),
    (b'{"a": "x\x00y"}', "malformed-json", "Invalid control character at line 1 column 9"),
    (b"42", "wrong-type", "holds a JSON number"),
    (b'"x"', "wrong-type", "holds a JSON string"),
    (b"[" * 5000 + b"]" * 5000, "too-deep", f"deeper than {MAX_JSON_DEPTH} levels"),
    (b'{"a": ' * 5000 + b"1" + b"}" * 5000, "too-deep", f"deeper than {MAX_JSON_DEPTH} levels"),
])
def test_each_way_of_not_being_a_json_object(tmp_path: Path, content: bytes, kind: str, words: str) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(content)
    value, err, warning = read_json_file(str(path))
    assert value is None and warning is None
    assert err is not None and err["type"] == kind, err
    assert words in err["message"] and str(path) in err["message"]


def test_nan_outside_config_json_is_malformed_with_its_position(tmp_path: Path) -> None:
    # Only config.json is read in Python's dialect (readers.CONSTANT_FILES); tokenizer.json is read by
    # the tokenizers library's serde_json, which refuses a bare NaN.
    path = tmp_path / "tokenizer.json"
    path.write_bytes(b'{"a": 1,\n  "b": NaN}')
    value, err, warning = read_json_file(str(path))
    assert value is None and warning is None
    assert err is not None and err["type"] == "malformed-json"
    assert "NaN at line 2 column 8" in err["message"] and str(path) in err["message"]


def test_nan_and_infinity_in_config_json_are_kept_as_markers(tmp_path: Path) -> None:
    # transformers configuration_utils.py PreTrainedConfig._dict_from_json_file (line 1137): json.loads
    # with its default parse_constant, so a bare NaN / Infinity / -Infinity is a float there.
    path = tmp_path / "config.json"
    path.write_bytes(b'{"time_step_limit": [0.0, Infinity], "a": NaN, "b": {"c": -Infinity}}')
    value, err, warning = read_json_file(str(path))
    assert err is None and warning is None
    assert value == {"time_step_limit": [0.0, {JSON_CONSTANT_KEY: "Infinity"}], "a": {JSON_CONSTANT_KEY: "NaN"},
                     "b": {"c": {JSON_CONSTANT_KEY: "-Infinity"}}}
    json.dumps(value, allow_nan=False)  # the marker is strict JSON on the wire
    assert read_json_file(str(path), constants=False)[1]["type"] == "malformed-json"


def test_brackets_inside_strings_do_not_count_as_nesting(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer_config.json"
    path.write_text(json.dumps({"chat_template": "[" * 10000 + "{{ x }}", "layer_types": ["full"] * 10**5}))
    value, err, _ = read_json_file(str(path))
    assert err is None and len(value["layer_types"]) == 10**5


@pytest.mark.parametrize(("encode", "label"), [
    (lambda text: b"\xef\xbb\xbf" + text.encode("utf-8"), "UTF-8 with a byte-order mark"),
    (lambda text: text.encode("utf-16"), "UTF-16"),
    (lambda text: b"\xfe\xff" + text.encode("utf-16-be"), "UTF-16 (big-endian"),
])
def test_bom_and_utf16_are_read_with_a_warning(tmp_path: Path, encode, label: str) -> None:
    # transformers: open(json_file, encoding="utf-8") then json.loads, which refuses both.
    path = tmp_path / "config.json"
    path.write_bytes(encode(json.dumps(GOOD)))
    value, err, warning = read_json_file(str(path))
    assert err is None and value == GOOD
    assert warning is not None and warning["type"] == "encoding"
    assert label in warning["message"] and "transformers" in warning["message"]


def test_missing_too_large_and_directory_are_told_apart(tmp_path: Path) -> None:
    assert read_json_file(str(tmp_path / "absent.json"))[1]["type"] == "not-found"
    (tmp_path / "big.json").write_text(json.dumps({"pad": "x" * 2000}))
    assert read_json_file(str(tmp_path / "big.json"), cap=1000)[1]["type"] == "too-large"
    (tmp_path / "dir.json").mkdir()
    assert read_json_file(str(tmp_path / "dir.json"))[1]["type"] == "is-a-directory"


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "tokenizer_config.json"
    os.mkfifo(fifo)
    started = time.monotonic()
    for result in (read_json_file(str(fifo))[1], read_text_capped(str(fifo))[1], sha256_file(str(fifo))[1]):
        assert result is not None and result["type"] == "not-a-regular-file", result
    assert time.monotonic() - started < 5  # a plain open() would wait for a writer forever


def test_a_deep_reply_is_a_protocol_error_not_a_recursion_error() -> None:
    from introspect.remote.contract import BEGIN, END, PROTOCOL

    body = b'{"protocol": %d, "facts": ' % PROTOCOL + b"[" * 100000 + b"]" * 100000 + b"}"
    with pytest.raises(ProtocolError, match="nests too deeply"):
        parse_reply(BEGIN + body + END)
