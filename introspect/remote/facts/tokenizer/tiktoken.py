"""tiktoken BPE rank files without a tokenizer library.

Runs on the host: standard library only, Python 3.8+. A tiktoken file is streamed
once (hash and rank statistics); which files are read is
:mod:`introspect.remote.facts.tokenizer.tokenizer_vocab_files`' job. Nothing here raises.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import os
import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ... import confine
from ...contract import TIKTOKEN_CAP, ErrorRecord, TiktokenSummary, error_record
from ...readers import open_regular, os_error

PROBE = "tokenizer_files"
MAX_MALFORMED_EXAMPLES = 5
# Read whole below this (real files are 2-4 MB), so a canonical file is summarised at C speed;
# a larger one is streamed line by line.
WHOLE_MAX = 64 * 1024 * 1024
# The largest rank tiktoken can hold: its Rust core keeps ranks as u32 (``pub type Rank = u32``,
# https://github.com/openai/tiktoken/blob/main/src/lib.rs), and a token id is a signed 32-bit
# index in every embedding table. A longer or larger number is a damaged file, not a vocab size.
MAX_RANK = 2 ** 31 - 1
MAX_RANK_DIGITS = len(str(MAX_RANK))
# Every line ``<base64> <rank>``, LF or CRLF, nothing else: split and decoded in C-level passes.
# Ranks of at most MAX_RANK_DIGITS digits only: any other line goes the per-line way, which names it.
_CANONICAL = re.compile(rb"(?:[A-Za-z0-9+/=]+ [0-9]{1,10}\r?\n)*(?:[A-Za-z0-9+/=]+ [0-9]{1,10}\r?)?")
_TIKTOKEN_LINE_RE = re.compile(rb"^[A-Za-z0-9+/=]+ [0-9]+\r?$")


def looks_like_tiktoken(file: str) -> bool:
    """The first line is ``<base64> <rank>``: tiktoken text, whatever the file's name."""
    try:
        with open_regular(file) as fh:
            first = fh.readline(512)
    except OSError:
        return False
    return bool(_TIKTOKEN_LINE_RE.match(first))


def summarize_tiktoken_file(file: str) -> Tuple[Optional[TiktokenSummary], Optional[ErrorRecord]]:
    """Stream a tiktoken BPE file once: hash and rank statistics."""
    try:
        confine.check(file)  # before the size: a link out's target is never stat'ed into a message
        size = os.path.getsize(file)
        if size > TIKTOKEN_CAP:
            return None, error_record("too-large", "%s is %d bytes, above the %d-byte cap" % (file, size, TIKTOKEN_CAP),
                                      file)
        digest = hashlib.sha256()
        with open_regular(file) as fh:
            if size <= WHOLE_MAX:
                data = fh.read(WHOLE_MAX + 1)
                digest.update(data)
                summary = _canonical_summary(data) or summarize_tiktoken_lines(io.BytesIO(data))
            else:
                summary = summarize_tiktoken_lines(_hashed(fh, digest))
    except OSError as exc:
        return None, os_error(exc, file)
    summary.update({"file": os.path.basename(file), "size": size, "sha256": digest.hexdigest()})
    return summary, None


def _hashed(lines: Iterable[bytes], digest: Any) -> Iterable[bytes]:
    for line in lines:
        digest.update(line)
        yield line


def summarize_tiktoken_lines(lines: Iterable[bytes]) -> TiktokenSummary:
    """Rank statistics of tiktoken lines ``b"<base64 token> <rank>"`` (pure; never raises).

    A line is malformed where ``tiktoken.load.load_tiktoken_bpe`` would refuse it (not
    two fields, bad base64, rank not an integer), where the rank is negative, or where it
    is above MAX_RANK (tiktoken's encoder refuses it).
    ``distinct_tokens`` is what tiktoken's loader ends with (a dict keyed by token), so
    it is the number of base ids a class like Kimi's counts its reserved ids from.
    """
    tokens: set = set()
    ranks: set = set()
    entries = single = malformed = 0
    examples: List[Dict[str, Any]] = []
    lo: Optional[int] = None
    hi: Optional[int] = None
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line:
            continue
        token, rank, reason = _parse_tiktoken_line(line)
        if reason is not None:
            malformed += 1
            if len(examples) < MAX_MALFORMED_EXAMPLES:
                examples.append({"line": number, "reason": reason})
            continue
        entries += 1
        tokens.add(token)
        ranks.add(rank)
        single += len(token) == 1
        lo = rank if lo is None or rank < lo else lo
        hi = rank if hi is None or rank > hi else hi
    return _summary(entries, len(tokens), ranks, lo, hi, single, malformed, examples)


def _canonical_summary(data: bytes) -> Optional[TiktokenSummary]:
    """:func:`summarize_tiktoken_lines` of a file whose every line is canonical, without a
    Python loop per line (163k lines for Kimi's ``tiktoken.model``); None for any other file.

    ``binascii.a2b_base64`` is what ``base64.b64decode`` calls for bytes (non-strict), and
    ``int`` reads the rank digits as the per-line path does, so the two agree (property-tested).
    """
    if _CANONICAL.fullmatch(data) is None:
        return None
    parts = data.split()
    try:
        tokens = list(map(binascii.a2b_base64, parts[0::2]))
    except (binascii.Error, ValueError):
        return None  # the per-line path names the lines
    ranks = list(map(int, parts[1::2]))
    if ranks and max(ranks) > MAX_RANK:
        return None  # the per-line path names the lines
    if not ranks:
        return _summary(0, 0, set(), None, None, 0, 0, [])
    return _summary(len(ranks), len(set(tokens)), set(ranks), min(ranks), max(ranks),
                    list(map(len, tokens)).count(1), 0, [])


def _summary(entries: int, distinct_tokens: int, ranks: "set[int]", lo: Optional[int], hi: Optional[int],
             single: int, malformed: int, examples: List[Dict[str, Any]]) -> TiktokenSummary:
    dense = entries > 0 and lo == 0 and hi == entries - 1 and len(ranks) == entries
    return {
        "entries": entries,
        "distinct_tokens": distinct_tokens,
        "distinct_ranks": len(ranks),
        "min_rank": lo,
        "max_rank": hi,
        "dense": dense,
        "gaps": (hi + 1 - len(ranks)) if hi is not None else 0,
        "duplicate_tokens": entries - distinct_tokens,
        "duplicate_ranks": entries - len(ranks),
        "single_bytes": single,
        "malformed_lines": malformed,
        "malformed_examples": examples,
    }


def _parse_tiktoken_line(line: bytes) -> Tuple[bytes, int, Optional[str]]:
    fields = line.split()
    if len(fields) != 2:
        return b"", 0, "expected 2 fields, found %d" % len(fields)
    try:
        token = base64.b64decode(fields[0])
    except (binascii.Error, ValueError):
        return b"", 0, "token is not base64"
    digits = fields[1].lstrip(b"+-").lstrip(b"0")
    if len(digits) > MAX_RANK_DIGITS:  # before int(): a 10**6-digit "rank" is quadratic to convert
        return b"", 0, "rank has %d digits, above the largest rank %d" % (len(digits), MAX_RANK)
    try:
        rank = int(fields[1])
    except ValueError:
        return b"", 0, "rank is not an integer"
    if rank < 0:
        return b"", 0, "negative rank"
    if rank > MAX_RANK:
        return b"", 0, "rank %d is above the largest rank %d" % (rank, MAX_RANK)
    return token, rank, None

