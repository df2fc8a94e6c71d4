"""Remote task "preflight": raw evidence that a data-generation job fits the target model.

Runs on the host under the pipeline venv's interpreter. Standard library at import
time, Python 3.8+; transformers is imported inside the tokenizer part only, so a
venv without it still answers every other part. Nothing here judges: the verdicts
are ``introspect.checks.preflight``'s, made locally from this evidence.

The controller runs two requests of this task at the same time on one connection:
the ``light`` parts (endpoint, disk, packages; standard library only, quick) and the
``tokenizer`` part (isolated: own process group, private caches, killed at its
deadline). A tokenizer load that hangs therefore never costs the endpoint, disk or
package evidence. Each part, and each piece inside a part, is wrapped so that one
failure is recorded and the rest still comes back.

Request::

    {"model_path": str, "trust_remote_code": bool, "parts": ["light", "tokenizer"],
     "endpoint": "http://127.0.0.1:30000" | null, "endpoint_timeout": 30.0,
     "api_key_env": "NAME" | null,        # the key's *name*; its value is never reported
     "output_dir": str | null, "pipeline_packages": ["transformers", "jinja2"],
     "decode_budget_s": 20.0}

Reply (sections present only for the parts requested)::

    {"model": {"path", "status", "home"},
     "endpoint": {...}, "disk": {...}, "packages": {...},       # "light"
     "config": {...}, "tokenizer": {...}, "template": {...},    # "tokenizer"
     "markers": {...}, "masks": {...}, "mask_token": {...},
     "errors": [{"probe", "type", "message"}], "timings": {part: seconds}}

Each section is documented at the function that builds it.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from typing import Any, Callable, Dict, Optional

from .. import confine
from ..contract import (
    DEFAULT_DECODE_BUDGET,
    DEFAULT_ENDPOINT_TIMEOUT,
    DEFAULT_JSON_CAP,
    DEFAULT_PIPELINE_PACKAGES,
    AddedTokensCheck,
    ErrorRecord,
    PreflightReply,
    error_record,
)
from ..facts import load_guard
from ..facts.guards import safe_get
from ..facts.host.disk_space import check_disk
from ..facts.host.endpoint import check_endpoint
from ..facts.host.packages import check_packages
from ..facts.model.configs import vocab_and_eos
from ..facts.paths import resolve_path
from ..facts.tokenizer import added_tokens
from ..facts.tokenizer.chat_template import describe_template, render_all
from ..facts.tokenizer.decode_sweep import decode_sweep
from ..facts.tokenizer.loaded_tokenizer import SPECIAL_ATTRIBUTES, named_token
from ..facts.tokenizer.loss_masks import check_masks
from ..facts.tokenizer.mask_token import mask_token
from ..facts.tokenizer.tokenizer_code import declared_classes
from ..facts.tokenizer.tokenizer_load import classify_error
from ..facts.tokenizer.turn_markers import find_markers
from ..readers import json_safe

PROBE = "preflight"
PARTS = ("light", "tokenizer")
MAX_ITEMS = 50  # mismatches / failures kept as evidence; the counts are always exact
# Preflight checks every token either file names, encode included, and keeps the mismatches.
ADDED_TOKEN_SOURCES = (added_tokens.TOKENIZER_JSON, added_tokens.TOKENIZER_CONFIG)


def run(request: Dict[str, Any]) -> PreflightReply:
    """Evidence for the parts requested; never raises (see the module docstring)."""
    result: Dict[str, Any] = {"errors": [], "timings": {}}
    parts = request.get("parts") or list(PARTS)
    model_path = resolve_path(str(request.get("model_path") or ""))
    result["model"] = _model_dir(model_path)
    if model_path:
        confine.confine(model_path)  # before any read: no file is read through a link out of the model dir
    if "light" in parts:
        _light(request, model_path, result)
    if "tokenizer" in parts:
        _guard(result, "tokenizer-part", lambda: _tokenizer_part(request, model_path, result))
    reply: PreflightReply = json_safe(result)
    return reply


# ---------------------------------------------------------------- plumbing


def _guard(result: Dict[str, Any], name: str, body: Callable[[], Any], section: Optional[str] = None) -> Any:
    """Run one piece; an exception becomes an error record (and the section's "error")."""
    started = time.monotonic()
    try:
        value = body()
    except BaseException as exc:  # noqa: BLE001 - a template or remote code may raise anything
        if isinstance(exc, KeyboardInterrupt):
            raise
        record = _error_record(name, exc)
        result["errors"].append(record)
        if section is not None:
            result[section] = {"error": record}
        return None
    finally:
        result["timings"][name] = round(time.monotonic() - started, 3)
    if section is not None:
        result[section] = value
    return value


def _error_record(name: str, exc: BaseException) -> ErrorRecord:
    message = str(exc)
    return error_record(type(exc).__name__, message if len(message) <= 2000 else message[:1997] + "...",
                        probe="%s.%s" % (PROBE, name))


def _model_dir(path: str) -> Dict[str, Any]:
    status = "ok"
    if not path or not os.path.exists(path):
        status = "not-found"
    elif not os.path.isdir(path):
        status = "not-a-directory"
    elif not os.access(path, os.R_OK | os.X_OK):
        status = "permission-denied"
    return {"path": path, "status": status, "home": os.path.expanduser("~")}


# ---------------------------------------------------------------- light parts


def _light(request: Dict[str, Any], model_path: str, result: Dict[str, Any]) -> None:
    endpoint = request.get("endpoint")
    timeout = float(request.get("endpoint_timeout") or DEFAULT_ENDPOINT_TIMEOUT)
    _guard(result, "endpoint", lambda: check_endpoint(endpoint, model_path, timeout, request.get("api_key_env")),
           "endpoint")
    _guard(result, "disk", lambda: check_disk(request.get("output_dir")), "disk")
    packages = request.get("pipeline_packages")
    if packages is None:
        packages = list(DEFAULT_PIPELINE_PACKAGES)
    _guard(result, "packages", lambda: check_packages(model_path, list(packages)), "packages")


# ---------------------------------------------------------------- tokenizer part


def _tokenizer_part(request: Dict[str, Any], model_path: str, result: Dict[str, Any]) -> None:
    _drop_cwd_from_path()
    _guard(result, "config", lambda: vocab_and_eos(model_path), "config")
    trust = bool(request.get("trust_remote_code"))
    # A non-UTF-8 model path is loaded through a UTF-8 alias (load_guard.loadable), kept while the
    # tokenizer is in use: a slow tokenizer or the model's code may open its files later.
    with load_guard.loadable(model_path) as loadable:
        tok = _guard(result, "load", lambda: _load(model_path, loadable, trust, result))
        if tok is not None:
            _checks(request, tok, model_path, result)


def _checks(request: Dict[str, Any], tok: Any, model_path: str, result: Dict[str, Any]) -> None:
    budget = float(request.get("decode_budget_s") or DEFAULT_DECODE_BUDGET)
    _guard(result, "tokenizer-facts", lambda: _tokenizer_facts(tok, model_path, budget, result["tokenizer"]))
    template = _guard(result, "template", lambda: describe_template(tok), "template")
    if not template or not template.get("present"):
        return
    _guard(result, "renders", lambda: render_all(tok, template))
    _guard(result, "markers", lambda: find_markers(tok, template), "markers")
    if not template.get("runaway"):  # the masks render it again: each render would meet the same limit
        _guard(result, "masks", lambda: check_masks(tok, template), "masks")
    _guard(result, "mask-token", lambda: mask_token(tok, template, result.get("config") or {}), "mask_token")


def _drop_cwd_from_path() -> None:
    """Never import from the working directory.

    ``python -c`` puts the cwd first on sys.path, and an isolated task's cwd is its
    private temp dir, which holds cache dirs named like packages (``tiktoken/`` for
    TIKTOKEN_CACHE_DIR): in a venv without tiktoken that empty dir imports as a
    namespace package, and the load fails with "No module named 'tiktoken.load'"
    instead of naming the missing package.
    """
    cwd = os.getcwd()
    sys.path[:] = [p for p in sys.path if p not in ("", ".", cwd)]


def _load(model_path: str, loadable: str, trust: bool, result: Dict[str, Any]) -> Any:
    """Load through transformers (from ``loadable``, ``model_path`` or its UTF-8 alias); on failure
    the classified error, as the probe command gives it."""
    section: Dict[str, Any] = {"loaded": False, "trust_remote_code": trust, "error": None}
    result["tokenizer"] = section
    started = time.monotonic()
    refused = load_guard.refusal(model_path)  # transformers would follow a link out of the model dir
    if refused is not None:
        section["error"] = refused
        return None
    try:
        import transformers
        from transformers import AutoTokenizer

        section["transformers_version"] = getattr(transformers, "__version__", None)
        tok = AutoTokenizer.from_pretrained(loadable, trust_remote_code=trust)
    except BaseException as exc:  # noqa: BLE001 - remote code may raise anything, even SystemExit
        if isinstance(exc, KeyboardInterrupt):
            raise
        section["error"] = classify_error(exc)
        return None
    finally:
        section["load_seconds"] = round(time.monotonic() - started, 3)
    section["loaded"] = True
    return tok


def _tokenizer_facts(tok: Any, model_path: str, budget: float, section: Dict[str, Any]) -> None:
    """Class, sizes, named specials, and the two agreement checks (files <-> loaded tokenizer).

    The tokenizer section: ``{"loaded", "trust_remote_code", "error", "transformers_version",
    "load_seconds", "class", "is_fast", "len", "vocab_size", "bos" / "eos" / "pad" / "unk" / "mask":
    {"token", "id"} | null, "declared_classes", "added_tokens_check", "decode_sweep"}``.
    """
    section["class"] = type(tok).__name__
    section["is_fast"] = bool(getattr(tok, "is_fast", False))
    section["len"] = safe_get(lambda: len(tok))
    section["vocab_size"] = safe_get(lambda: int(tok.vocab_size))
    for name in SPECIAL_ATTRIBUTES:
        section[name] = safe_get(functools.partial(named_token, tok, name))
    section["declared_classes"] = safe_get(lambda: declared_classes(model_path))
    section["added_tokens_check"] = safe_get(lambda: check_added_tokens(tok, model_path))
    section["decode_sweep"] = safe_get(lambda: decode_sweep(tok, budget, MAX_ITEMS))


def check_added_tokens(tok: Any, model_path: str) -> Optional[AddedTokensCheck]:
    """Every added token the files name, both ways, decoded and encoded, in the loaded tokenizer.

    Plain ``decode([id])`` and ``encode(token)`` are checked because they are what a data
    pipeline calls. Sources: tokenizer_config.json's ``added_tokens_decoder`` (which wins)
    and tokenizer.json's ``added_tokens``, whichever exist.

    ``{"sources": [...], "checked", "mismatches", "items": [first mismatches: {"id", "expected",
       "source", "id_to_token", "token_to_id", "decoded", "encoded"}]}``, or null with no source.
    """
    expected = added_tokens.expected_tokens(model_path, ADDED_TOKEN_SOURCES, DEFAULT_JSON_CAP)
    if not expected:
        return None
    return added_tokens.check_added_tokens(tok, expected, encode=True, mismatches_only=True, max_items=MAX_ITEMS)
