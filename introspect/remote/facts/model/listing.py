"""The model directory itself: is it one, and what is in it (names, kinds, sizes, links).

Runs on the host: standard library only, Python 3.8+. Nothing here raises; errors
are records tagged with the ``files`` section, which reports them.
"""

from __future__ import annotations

import contextlib
import os
import stat
from typing import List, Optional, Tuple

from ... import confine
from ...contract import ErrorRecord, ListingRow, error_record, tag
from ...readers import os_error
from ..tokenizer.tokenizer_vocab_files import is_mistral_sentencepiece

PROBE = "files"

MAX_SCAN_NAMES = 100000   # directory entries iterated at most (names only, cheap)
MAX_LISTING = 10000       # entries stat'ed and shipped

# A directory counts as a model dir when it has config.json or one of these.
MODEL_MARKERS = (
    "config.json", "model.safetensors.index.json", "model.safetensors", "pytorch_model.bin",
    "pytorch_model.bin.index.json", "params.json", "tokenizer_config.json", "tokenizer.json",
    "tiktoken.model", "adapter_config.json", "consolidated.safetensors",
    # Tokenizer-only layouts are model dirs too (sentencepiece, Mistral tekken).
    "tokenizer.model", "spiece.model", "sentencepiece.bpe.model", "tekken.json",
)
MODEL_SUFFIXES = (".safetensors", ".gguf", ".bin", ".pt", ".tiktoken")


def _err(kind: str, message: str, path: Optional[str] = None) -> ErrorRecord:
    return error_record(kind, message, path, probe=PROBE)


def check_model_dir(model_path: str) -> Tuple[str, Optional[ErrorRecord]]:
    """Status of the model path: "ok" or the error type, with its error record."""
    try:
        st = os.stat(model_path)
    except OSError as exc:
        rec = os_error(exc, model_path)
        return rec["type"], tag(rec, PROBE)
    except (ValueError, TypeError) as exc:  # embedded NUL, not a str
        return "not-found", _err("not-found", "%r: %s" % (model_path, exc), str(model_path))
    if not stat.S_ISDIR(st.st_mode):
        return "not-a-directory", _err(
            "not-a-directory", "%s is not a directory (a model path names the model's folder)" % model_path,
            model_path)
    if not os.access(model_path, os.R_OK | os.X_OK):
        return "permission-denied", _err(
            "permission-denied", "%s: no permission to list this directory" % model_path, model_path)
    return "ok", None


def looks_like_model_dir(path: str, names: List[str]) -> bool:
    present = set(names)
    if any(marker in present for marker in MODEL_MARKERS):
        return True
    if any(name.endswith(MODEL_SUFFIXES) or is_mistral_sentencepiece(name) for name in names):
        return True
    # The name scan may have stopped early in a huge directory: ask for the markers directly.
    return any(os.path.lexists(os.path.join(path, marker)) for marker in MODEL_MARKERS)


def scan_names(path: str, limit: Optional[int] = None,
               probe: str = PROBE) -> Tuple[List[str], bool, Optional[ErrorRecord]]:
    """Entry names of a directory (sorted), whether the scan stopped at ``limit``, and an error."""
    limit = MAX_SCAN_NAMES if limit is None else limit
    names: List[str] = []
    truncated = False
    try:
        with os.scandir(path) as it:
            for entry in it:
                if len(names) >= limit:
                    truncated = True
                    break
                names.append(entry.name)
    except OSError as exc:
        return sorted(names), truncated, tag(os_error(exc, path), probe)
    return sorted(names), truncated, None


def describe_entry(dir_path: str, name: str, root: Optional[str] = None) -> ListingRow:
    """One listing row. Symlinks report their target's kind and size (HF cache blobs); one that
    leads out of ``root`` reports nothing of its target, not even where it points."""
    full = os.path.join(dir_path, name)
    row = ListingRow(name=name, kind="other", size=None, link=None, resolved=None, link_error=None)
    try:
        lst = os.lstat(full)
    except OSError as exc:
        row["kind"] = "broken"
        row["link_error"] = os_error(exc, full)["type"]
        return row
    target_st = lst
    if stat.S_ISLNK(lst.st_mode):
        if root is not None and not confine.within(os.path.realpath(full), root):
            row["link_error"] = "link-outside"
            return row
        with contextlib.suppress(OSError):
            row["link"] = os.readlink(full)
        with contextlib.suppress(OSError, ValueError, RuntimeError):  # RuntimeError: loops, old Pythons
            row["resolved"] = os.path.realpath(full)
        try:
            target_st = os.stat(full)
        except OSError as exc:
            kind = os_error(exc, full)["type"]
            row["kind"] = "broken"
            row["link_error"] = "dangling" if kind == "not-found" else kind
            return row
    if stat.S_ISDIR(target_st.st_mode):
        row["kind"] = "dir"
    elif stat.S_ISREG(target_st.st_mode):
        row["kind"] = "file"
        row["size"] = target_st.st_size
    return row


def list_dir(model_path: str, names: List[str]) -> Tuple[List[ListingRow], List[ErrorRecord]]:
    """Listing rows for the first MAX_LISTING names, plus errors for broken links."""
    rows = []
    errors = []
    root = confine.allowed_root(model_path)
    for name in names[:MAX_LISTING]:
        row = describe_entry(model_path, name, root)
        rows.append(row)
        link_error = row["link_error"]
        full = os.path.join(model_path, name)
        if link_error == "link-outside":
            errors.append(_err(link_error, confine.describe(full, full), full))
        elif link_error:
            kind = "dangling-symlink" if link_error == "dangling" else link_error
            what = "points nowhere" if link_error == "dangling" else "cannot be followed (%s)" % kind
            errors.append(_err(kind, "%s -> %s %s" % (full, row["link"], what), full))
    return rows, errors
