"""What the isolated loads (tokenizer, config class, model code) get to see of a model directory.

Runs on the host inside the isolated task process: standard library only, Python 3.8+.
transformers, tokenizers, tiktoken and sentencepiece open the model's files themselves and
follow symbolic links, so :mod:`..confine` cannot guard them file by file: a model dir with a
link out among the files they may open is not loaded at all (the static readers still give
every fact of the files that stay inside). And they take the path as text: tiktoken hashes
``path.encode()`` (tiktoken/load.py ``read_file_cached``), which fails on a non-UTF-8 byte of
the directory name, so such a dir is loaded through a UTF-8 alias (a link in a private temp dir).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Iterator, Optional

from .. import confine
from ..contract import TokenizerError

SHOWN_LINKS = 3


def refusal(path: str) -> Optional[TokenizerError]:
    """The load's error record when there is no model dir, or when a file it may open links out
    of it, else None.

    Same shape as ``tokenizer_load.classify_error`` (cause ``link-outside``); confines ``path``."""
    confine.confine(path)
    if not os.path.isdir(path):
        # Nothing to load: without this the task would import transformers (seconds of CPU) for
        # from_pretrained to call the path a malformed hub repo id. The files probe names the cause.
        kind = "NotADirectoryError" if os.path.exists(path) else "FileNotFoundError"
        return TokenizerError(type=kind, cause="missing-files", missing_packages=[], traceback=[],
                              message="%s is not a directory; the load was not run" % path)
    try:
        links = confine.links_out(path)
    except (OSError, ValueError):  # an unlistable dir: the load reports it in its own words
        return None
    if not links:
        return None
    shown = ", ".join(links[:SHOWN_LINKS]) + (" and %d more" % (len(links) - SHOWN_LINKS)
                                               if len(links) > SHOWN_LINKS else "")
    what = "a symbolic link that points" if len(links) == 1 else "symbolic links that point"
    return TokenizerError(type="LinkOutside", cause="link-outside", missing_packages=[], traceback=[],
                          message="transformers would follow %s, %s outside the model directory; the load was not run"
                          % (shown, what))


def _utf8(path: str) -> bool:
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:  # a surrogate-escaped byte (PEP 383): not valid UTF-8 on disk
        return False
    return True


def alias_name(path: str) -> str:
    """A UTF-8 name for the alias: the dir's own name with each undecodable byte as ``_``."""
    name = os.path.basename(os.path.normpath(path)) or "model"
    return os.fsencode(name).decode("utf-8", "replace").replace("\ufffd", "_")


@contextlib.contextmanager
def loadable(path: str) -> Iterator[str]:
    """``path`` itself, or (for a path that is not UTF-8) a UTF-8 alias of it for the block's length."""
    if _utf8(path):
        yield path
        return
    view = tempfile.mkdtemp(prefix="introspect-view-")
    alias = os.path.join(view, alias_name(path))
    try:
        os.symlink(os.path.abspath(path), alias)
        confine.confine(alias)
        yield alias
    finally:
        shutil.rmtree(view, ignore_errors=True)  # removes the link, never follows it
