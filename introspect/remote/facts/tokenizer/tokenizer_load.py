"""A tokenizer load that failed, classified: which package is missing, refused remote code, missing files.

Runs on the host inside an isolated tokenizer process (standard library, Python
3.8+). transformers words its errors in a few known ways (and wraps the import
error of the model's own code); the pip names come from contract's one table, so
every ``fix:`` line names the same distribution.
"""

from __future__ import annotations

import re
import traceback
from typing import List, Optional

from ...contract import MODULE_DISTRIBUTIONS, TokenizerError, distribution_for, module_for
from ...limits import LimitExceeded, memory_message

TRACEBACK_LINES = 8
MAX_MESSAGE = 2000

_REQUIRES_PACKAGES_RE = re.compile(
    r"requires the following packages that were not found in your environment: (.+?)\. Run"
)
_NO_MODULE_RE = re.compile(r"No module named '([\w.]+)'")
_REQUIRES_LIBRARY_RE = re.compile(r"requires the (\w+) library")
_REQUIRES_VERSION_RE = re.compile(r"requires (\w[\w\-]*)(>=[\w.]+) to be installed")
_REQUIRES_JINJA_RE = re.compile(r"requires (jinja2) to be installed")
_PIP_INSTALL_RE = re.compile(r"`pip install ([^`]+)`")
# transformers' words for "no usable tokenizer files here" (not always an OSError).
_NO_FILES_MESSAGES = ("Can't load tokenizer", "Couldn't instantiate the backend tokenizer")


def classify_error(exc: BaseException) -> TokenizerError:
    """Exception -> {type, message, cause, missing_packages, traceback}."""
    if isinstance(exc, (LimitExceeded, MemoryError)):
        # One of the probe's own limits: the message names it; a traceback of the template or
        # loader it stopped says nothing more (and building one may need the memory it lacks).
        limit = (exc.cause, str(exc)) if isinstance(exc, LimitExceeded) else \
            ("memory-limit", memory_message("the tokenizer probe"))
        return {"type": limit[0], "message": limit[1], "cause": limit[0], "missing_packages": [], "traceback": []}
    full = str(exc)
    message = short(full)
    missing = missing_packages(exc)
    return {
        "type": type(exc).__name__,
        "message": message,
        "message_chars": len(full),
        "cause": _cause(exc, message, missing),
        "missing_packages": missing,
        "traceback": _traceback_tail(exc),
    }


def _cause(exc: BaseException, message: str, missing: List[str]) -> str:
    if missing:
        return "missing-package"
    if "trust_remote_code" in message and "custom code" in message:
        return "remote-code-refused"
    if isinstance(exc, ImportError):
        # The package is there but the name is not: code written for another version.
        return "incompatible-code"
    if isinstance(exc, OSError) or any(s in message for s in _NO_FILES_MESSAGES):
        return "missing-files"
    return "exception"


def missing_packages(exc: BaseException) -> List[str]:
    """pip names of the packages an exception (or its causes) says are missing."""
    found: List[str] = []
    for current in _chain(exc):
        for name in _missing_in(current):
            if name not in found:
                found.append(name)
    return found


def _chain(exc: BaseException) -> List[BaseException]:
    out: List[BaseException] = []
    current: Optional[BaseException] = exc
    while current is not None and current not in out and len(out) < 10:
        out.append(current)
        current = current.__cause__ or current.__context__
    return out


def _missing_in(exc: BaseException) -> List[str]:
    message = str(exc)
    listed = _REQUIRES_PACKAGES_RE.search(message)
    if listed:  # transformers' check_imports on remote code: the exact list
        return [dist_name(n.strip()) for n in listed.group(1).split(",") if n.strip()]
    names: List[str] = []
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        names.append(exc.name)
    names.extend(_NO_MODULE_RE.findall(message))
    absent = [dist_name(n) for n in names if not _importable_top(n)]
    absent.extend(_library_mentions(message))
    return absent


def _library_mentions(message: str) -> List[str]:
    """transformers' own wording for optional backends (sentencepiece, protobuf, jinja2)."""
    out: List[str] = []
    version = _REQUIRES_VERSION_RE.search(message)
    if version:  # installed but too old: the pip spec carries the minimum
        return [dist_name(version.group(1)) + version.group(2)]
    for pattern in (_REQUIRES_LIBRARY_RE, _REQUIRES_JINJA_RE):
        for name in pattern.findall(message):
            dist = dist_name(name)
            if not _importable_top(module_for(dist)):
                out.append(dist)
    if not out:
        for spec in _PIP_INSTALL_RE.findall(message):
            out.extend(p for p in spec.split() if not p.startswith("-") and not _importable_top(p))
    return out


def _importable_top(module: str) -> bool:
    """Whether the top-level package exists: if it does, a missing submodule is a version problem.

    A bare directory of that name on sys.path (a cache dir called ``tiktoken`` in the
    working directory, say) imports as a namespace package; that is not the package.
    """
    import importlib.util

    top = module.split(".")[0]
    if top in MODULE_DISTRIBUTIONS and module in MODULE_DISTRIBUTIONS:
        top = module  # google.protobuf: "google" may exist without protobuf
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin not in (None, "namespace")


def dist_name(module: str) -> str:
    """Import name -> the name to give pip (contract's one table)."""
    return distribution_for(module)



def _traceback_tail(exc: BaseException) -> List[str]:
    try:
        lines = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).splitlines()
    except Exception:  # noqa: BLE001
        return []
    # Python 3.11+ underlines with ^^^^ lines: noise in a report, drop them.
    lines = [line for line in lines if line.strip().strip("^~") != ""]
    return [short(line, 300) for line in lines[-TRACEBACK_LINES:]]


def short(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` cut to ``limit`` characters (with an ellipsis)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."

