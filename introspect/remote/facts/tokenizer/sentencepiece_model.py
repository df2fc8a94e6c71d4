"""A minimal, bounded reader of sentencepiece's ModelProto (protobuf wire format).

Runs on the host: standard library only, Python 3.8+. Reads only the fields the
profile needs, from sentencepiece's ``sentencepiece_model.proto``
(https://github.com/google/sentencepiece/blob/master/src/sentencepiece_model.proto):

* ``ModelProto.pieces = 1``: ``SentencePiece {piece = 1 (string), score = 2 (float),
  type = 3 (enum: NORMAL=1, UNKNOWN=2, CONTROL=3, USER_DEFINED=4, UNUSED=5, BYTE=6)}``
* ``ModelProto.trainer_spec = 2``: ``model_type = 3``, ``vocab_size = 4``,
  ``byte_fallback = 35``, ``unk_id = 40``, ``bos_id = 41``, ``eos_id = 42``,
  ``pad_id = 43``, ``unk_piece = 45``, ``bos_piece = 46``, ``eos_piece = 47``,
  ``pad_piece = 48``.
* ``ModelProto.normalizer_spec = 3``: ``name = 1``, ``add_dummy_prefix = 3``.

The named ids follow ``SentencePieceProcessor``: bos/eos/pad are the id of the
trainer spec's piece string when that piece is a CONTROL piece, else -1; unk is the
id of ``unk_piece`` when it is the UNKNOWN piece (sentencepiece_processor.cc,
``bos_id()`` / ``unk_id()``). Nothing here raises on corrupt input: a file that is
not a ModelProto gives ``(None, error)``.
"""

from __future__ import annotations

import os
import struct
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ... import confine
from ...contract import ErrorRecord, error_record
from ...readers import open_regular, os_error

SENTENCEPIECE_CAP = 64 * 1024 * 1024  # real models are 0.2-5 MB
MAX_LISTED_PIECES = 4096  # control/unknown/user-defined pieces shipped with their ids

PIECE_TYPES = {1: "normal", 2: "unknown", 3: "control", 4: "user_defined", 5: "unused", 6: "byte"}
MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}
# proto2 defaults of TrainerSpec (sentencepiece_model.proto)
TRAINER_DEFAULTS = {
    "model_type": 1, "vocab_size": 8000, "byte_fallback": 0, "unk_id": 0, "bos_id": 1, "eos_id": 2,
    "pad_id": -1, "unk_piece": "<unk>", "bos_piece": "<s>", "eos_piece": "</s>", "pad_piece": "<pad>",
}  # type: Dict[str, Any]
_TRAINER_FIELDS = {
    3: "model_type", 4: "vocab_size", 35: "byte_fallback", 40: "unk_id", 41: "bos_id", 42: "eos_id",
    43: "pad_id", 45: "unk_piece", 46: "bos_piece", 47: "eos_piece", 48: "pad_piece",
}


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message."""


# ---------------------------------------------------------------- wire format


def _varint(data: bytes, pos: int) -> Tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise WireError("varint runs past the end")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise WireError("varint longer than 10 bytes")


def _signed32(value: int) -> int:
    """int32 fields: a negative value is sent as a 64-bit two's complement varint."""
    value &= 0xFFFFFFFFFFFFFFFF
    if value >= 1 << 63:
        value -= 1 << 64
    return value


def fields(data: bytes) -> Iterable[Tuple[int, int, Any]]:
    """(field number, wire type, value) of one message; bytes for length-delimited fields."""
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: Any
        if number == 0:
            raise WireError("field number 0")
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            if pos + 8 > end:
                raise WireError("fixed64 runs past the end")
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > end:
                raise WireError("field %d: %d bytes announced, %d left" % (number, length, end - pos))
            value, pos = data[pos:pos + length], pos + length
        elif wire == 5:
            if pos + 4 > end:
                raise WireError("fixed32 runs past the end")
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise WireError("unsupported wire type %d" % wire)
        yield number, wire, value


def _text(value: Any) -> str:
    if not isinstance(value, bytes):
        raise WireError("expected a length-delimited string")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise WireError("a string field is not UTF-8") from None


# ---------------------------------------------------------------- ModelProto


def parse_model(data: bytes) -> Dict[str, Any]:
    """pieces [(piece, score, type)], trainer spec and normalizer facts; raises WireError."""
    pieces = []  # type: List[Tuple[str, float, str]]
    trainer = dict(TRAINER_DEFAULTS)
    normalizer = {"name": None, "add_dummy_prefix": True}  # type: Dict[str, Any]
    for number, wire, value in fields(data):
        if number == 1 and wire == 2:
            pieces.append(_piece(value))
        elif number == 2 and wire == 2:
            _trainer(value, trainer)
        elif number == 3 and wire == 2:
            _normalizer(value, normalizer)
    if not pieces:
        raise WireError("no pieces: not a sentencepiece model")
    return {"pieces": pieces, "trainer": trainer, "normalizer": normalizer}


def _piece(data: bytes) -> Tuple[str, float, str]:
    piece, score, kind = None, 0.0, 1
    for number, wire, value in fields(data):
        if number == 1 and wire == 2:
            piece = _text(value)
        elif number == 2 and wire == 5:
            score = struct.unpack("<f", value)[0]
        elif number == 3 and wire == 0:
            kind = value
    if piece is None:
        raise WireError("a piece without its string")
    if kind not in PIECE_TYPES:
        raise WireError("piece %r has unknown type %d" % (piece, kind))
    return piece, score, PIECE_TYPES[kind]


def _trainer(data: bytes, trainer: Dict[str, Any]) -> None:
    for number, wire, value in fields(data):
        name = _TRAINER_FIELDS.get(number)
        if name is None:
            continue
        if name.endswith("_piece") and wire == 2:
            trainer[name] = _text(value)
        elif wire == 0:
            trainer[name] = _signed32(value)


def _normalizer(data: bytes, normalizer: Dict[str, Any]) -> None:
    for number, wire, value in fields(data):
        if number == 1 and wire == 2:
            normalizer["name"] = _text(value)
        elif number == 3 and wire == 0:
            normalizer["add_dummy_prefix"] = bool(value)


# ---------------------------------------------------------------- summary


def summarize_model(model: Dict[str, Any], wanted: Iterable[str] = ()) -> Dict[str, Any]:
    """What the profile needs of a parsed model (pure). ``wanted``: strings to look up."""
    pieces = model["pieces"]
    trainer = model["trainer"]
    index = {}  # type: Dict[str, int]
    counts = dict.fromkeys(PIECE_TYPES.values(), 0)
    for i, (piece, _score, kind) in enumerate(pieces):
        index.setdefault(piece, i)
        counts[kind] += 1
    unk = next((i for i, p in enumerate(pieces) if p[2] == "unknown"), None)
    listed = [{"id": i, "token": p, "type": k, "score": s}
              for i, (p, s, k) in enumerate(pieces) if k in ("unknown", "control", "user_defined")]
    # The fallback's specials are the control and unknown pieces: the cap cuts user-defined
    # pieces before any of them (a stable sort keeps ids in order within each kind).
    kept = sorted(sorted(listed, key=lambda p: p["type"] == "user_defined")[:MAX_LISTED_PIECES],
                  key=lambda p: p["id"])
    return {
        "model_type": MODEL_TYPES.get(trainer["model_type"], str(trainer["model_type"])),
        "pieces": len(pieces),
        "types": counts,
        "byte_fallback": bool(trainer["byte_fallback"]),
        "trainer_spec": {k: trainer[k] for k in sorted(TRAINER_DEFAULTS)},
        "normalizer": model["normalizer"],
        "bos": _named(pieces, index, trainer["bos_piece"], "control", unk),
        "eos": _named(pieces, index, trainer["eos_piece"], "control", unk),
        "pad": _named(pieces, index, trainer["pad_piece"], "control", unk),
        "unk": _named(pieces, index, trainer["unk_piece"], "unknown", unk),
        "special_pieces": kept,
        "special_pieces_total": len(listed),
        "special_pieces_truncated": len(kept) < len(listed),
        "lookup": {t: index[t] for t in wanted if t in index},
    }


def _named(pieces: List[Tuple[str, float, str]], index: Dict[str, int], piece: str, kind: str,
           unk: Optional[int]) -> Optional[Dict[str, Any]]:
    """SentencePieceProcessor's rule: the piece's id when it has the expected type, else none."""
    token_id = index.get(piece, unk)  # PieceToId of an unknown string is unk_id
    if token_id is None or pieces[token_id][2] != kind:
        return None
    return {"token": pieces[token_id][0], "id": token_id}


def read_sentencepiece(file: str, wanted: Iterable[str] = (), cap: int = SENTENCEPIECE_CAP
                       ) -> Tuple[Optional[Dict[str, Any]], Optional[ErrorRecord]]:
    """(summary, None) or (None, error record) for one file; never raises."""
    try:
        confine.check(file)  # before the size: a link out's target is not even sized
        size = os.path.getsize(file)
        if size > cap:
            return None, error_record("too-large", "%s is %d bytes, above the %d-byte cap" % (file, size, cap), file)
        with open_regular(file) as fh:
            data = fh.read(cap + 1)
    except OSError as exc:
        return None, os_error(exc, file)
    try:
        summary = summarize_model(parse_model(data), wanted)
    except (WireError, struct.error, RecursionError) as exc:
        return None, error_record("malformed-sentencepiece", "%s is not a sentencepiece model: %s" % (file, exc), file)
    summary["size"] = size
    return summary, None


def looks_like_model_proto(file: str) -> bool:
    """Cheap sniff: the first field is a length-delimited ``pieces`` entry (tag 0x0a)."""
    try:
        with open_regular(file) as fh:
            head = fh.read(2)
    except OSError:
        return False
    return len(head) == 2 and head[0] == 0x0A
