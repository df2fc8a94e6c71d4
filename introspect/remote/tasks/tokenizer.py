"""Remote task "tokenizer": load the model's tokenizer through transformers and report what it says.

Runs on the host in its own interpreter process, with its own timeout, started by the
controller with ``HF_HUB_OFFLINE=1`` and ``HF_HOME`` / ``HF_MODULES_CACHE`` /
``TIKTOKEN_CACHE_DIR`` pointing into a private temp dir. Standard library at import
time (Python 3.8+); transformers is imported inside :func:`run` only, so a venv
without it still yields a classified error. :func:`run` never raises.

Request: ``{"model_path": str, "trust_remote_code": bool, "sample": bool, "json_cap"?: int,
"memory_limit"?: int}`` (``memory_limit``: bytes of address space, read by the supervisor).
A tokenizer file above its cap (facts.tokenizer_size_guard) is not loaded at all.

Result::

    {
      "loaded": bool,
      "class": "TikTokenTokenizer" | null, "module": "transformers_modules...." | null,
      "transformers_version": "5.24.0" | null, "tokenizers_version": str | null,
      "is_fast": bool | null, "vocab_size": int | null, "len": int | null,
      "bos" / "eos" / "pad" / "unk" / "mask": {"token": str, "id": int | null} | null,
      "special_tokens": [{"token", "id"}],          # added tokens with special=True, by id (every one:
      "special_tokens_total": int,                  # no cap on this path), their count, and
      "special_tokens_truncated": false,            # whether the list was cut (the native path cuts)
      "added_tokens": int | null,                   # all added tokens (special or not)
      "added_tokens_check": null | {                # tokenizer_config's added_tokens_decoder
          "checked": int, "mismatches": int,         # against the loaded tokenizer: the first
          "checked_total": int, "checked_truncated": bool,  # MAX_CHECKED_IDS of checked_total ids
          "items": [{"id", "expected", "id_to_token", "token_to_id", "decoded", "ok"}],
          "items_total": int, "items_truncated": bool},
      "chat_template": null | {"text", "sha256", "source", "names"},
      "sample": null | {"text": str | null, "error": null | <error>},
      "import_seconds": float | null, "load_seconds": float | null,
      "error": null | <error>,
      "fact_errors": [{"fact", "type", "message"}],  # a fact that raised after loading
      # Only when transformers failed and the layout's own library loaded it
      # (facts.tokenizer_native_load): "source": "tokenizers" | "mistral_common" | "sentencepiece" |
      # "tiktoken", "transformers_error": <error>, "read": [file names], "partial": [fields it
      # could not know, e.g. "len" where the code's specials could not be read].
    }
    <error> = {"type": exception class, "message": str, "cause": "missing-package" |
               "remote-code-refused" | "missing-files" | "incompatible-code" | "too-large" |
               "memory-limit" | "time-limit" | "link-outside" | "exception",
               "missing_packages": [pip names], "traceback": [last lines]}
"""


from __future__ import annotations

import functools
import time
from typing import Any, Callable, Dict, Optional, Tuple, cast

from ..contract import DEFAULT_JSON_CAP, TokenizerProbe
from ..facts import load_guard
from ..facts.tokenizer import added_tokens
from ..facts.tokenizer.loaded_tokenizer import (
    SPECIAL_ATTRIBUTES,
    chat_template,
    named_token,
    sample,
    with_total,
)
from ..facts.tokenizer.loaded_tokenizer import added_tokens as added_list
from ..facts.tokenizer.tokenizer_load import classify_error, short
from ..facts.tokenizer.tokenizer_native_load import fall_back_to_native
from ..facts.tokenizer.tokenizer_size_guard import too_large_error
from ..readers import json_safe

# Ids of added_tokens_decoder checked both ways and decoded (three calls each, every item shipped):
# real configs name a few hundred; the cut is reported (checked_total, checked_truncated).
MAX_CHECKED_IDS = 5000
# The profile's check reads added_tokens_decoder only, and reports every id it checked.
ADDED_TOKEN_SOURCES = (added_tokens.TOKENIZER_CONFIG,)


def run(request: Dict[str, Any]) -> TokenizerProbe:
    """Load, describe, and (optionally) render a sample; see the module docstring."""
    result = _empty_result()
    try:
        _run(request, result)
    except BaseException as exc:  # noqa: BLE001 - the report must always come back
        if isinstance(exc, KeyboardInterrupt):
            raise
        if result["error"] is None:
            result["error"] = classify_error(exc)
    return cast(TokenizerProbe, json_safe(result))


def _empty_result() -> TokenizerProbe:
    result: TokenizerProbe = {
        "loaded": False, "class": None, "module": None, "transformers_version": None, "tokenizers_version": None,
        "is_fast": None, "vocab_size": None, "len": None, "special_tokens": [], "added_tokens": None,
        "added_tokens_check": None, "chat_template": None, "sample": None, "import_seconds": None,
        "load_seconds": None, "error": None, "fact_errors": [],
    }
    facts = cast(Dict[str, Any], result)
    for name in SPECIAL_ATTRIBUTES:
        facts[name] = None
    return result


def _run(request: Dict[str, Any], result: TokenizerProbe) -> None:
    path = str(request["model_path"])
    refused = load_guard.refusal(path)
    if refused is not None:  # no load, no native fallback: both would follow the link
        result["error"] = refused
        return
    with load_guard.loadable(path) as loadable:
        _load(request, loadable, result)


def _load(request: Dict[str, Any], path: str, result: TokenizerProbe) -> None:
    trust = bool(request.get("trust_remote_code", False))
    cap = int(request.get("json_cap") or DEFAULT_JSON_CAP)

    loaded, imported = _timed_step(result, "import_seconds", path, _import_transformers)
    if not loaded:
        return
    transformers, auto_tokenizer = imported
    result["transformers_version"] = getattr(transformers, "__version__", None)
    result["tokenizers_version"] = _dist_version("tokenizers")
    too_large = too_large_error(path, cap)
    if too_large is not None:  # read whole by the load: skipped, the files probe's facts stand
        result["error"] = too_large
        return

    loaded, tokenizer = _timed_step(result, "load_seconds", path,
                                    lambda: auto_tokenizer.from_pretrained(path, trust_remote_code=trust))
    if not loaded:
        return

    result["loaded"] = True
    _describe(tokenizer, path, cap, result)
    if request.get("sample", True):
        result["sample"] = sample(tokenizer)


def _import_transformers() -> Tuple[Any, Any]:
    import transformers
    from transformers import AutoTokenizer

    return transformers, AutoTokenizer


def _timed_step(result: TokenizerProbe, seconds_key: str, path: str,
                step: Callable[[], Any]) -> Tuple[bool, Any]:
    """(True, value) of one step of the load (the import, then from_pretrained), its time in
    ``result[seconds_key]``. A failure (anything but Ctrl-C) is classified into
    ``result["error"]`` and the layout's own library is tried instead: (False, None)."""
    started = time.monotonic()
    try:
        return True, step()
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, KeyboardInterrupt):
            raise
        result["error"] = classify_error(exc)
        fall_back_to_native(path, result)
        return False, None
    finally:
        cast(Dict[str, Any], result)[seconds_key] = round(time.monotonic() - started, 3)


def _dist_version(name: str) -> Optional[str]:
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:  # noqa: BLE001 - absent or broken metadata: just unknown
        return None


def _describe(tokenizer: Any, path: str, cap: int, result: TokenizerProbe) -> None:
    """Each fact on its own guard: a property that raises costs only itself."""
    facts = cast(Dict[str, Any], result)

    def fact(name: str, get: Callable[[], Any]) -> None:
        try:
            facts[name] = get()
        except Exception as exc:  # noqa: BLE001
            result["fact_errors"].append({"fact": name, "type": type(exc).__name__, "message": short(str(exc))})

    fact("class", lambda: type(tokenizer).__name__)
    fact("module", lambda: type(tokenizer).__module__)
    fact("is_fast", lambda: bool(getattr(tokenizer, "is_fast", False)))
    fact("vocab_size", lambda: int(tokenizer.vocab_size))
    fact("len", lambda: len(tokenizer))
    for name in SPECIAL_ATTRIBUTES:
        fact(name, functools.partial(named_token, tokenizer, name))
    fact("special_tokens", lambda: with_total(facts, "special_tokens", added_list(tokenizer, special_only=True)))
    fact("added_tokens", lambda: len(added_list(tokenizer, special_only=False)))
    fact("added_tokens_check", lambda: _check_added_tokens(tokenizer, path, cap))
    fact("chat_template", lambda: chat_template(tokenizer, path, cap))


def _check_added_tokens(tokenizer: Any, path: str, cap: int) -> Optional[added_tokens.AddedTokensCheck]:
    """Every id added_tokens_decoder names must round-trip (see facts.added_tokens)."""
    expected = added_tokens.expected_tokens(path, ADDED_TOKEN_SOURCES, cap)
    if expected is None:
        return None
    return added_tokens.check_added_tokens(tokenizer, expected, encode=False, max_checked=MAX_CHECKED_IDS)
