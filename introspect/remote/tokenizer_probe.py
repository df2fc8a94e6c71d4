"""Load the model's tokenizer through transformers and report what it says.

Runs on the host in its own interpreter process, with its own timeout, started by the
controller with ``HF_HUB_OFFLINE=1`` and ``HF_HOME`` / ``HF_MODULES_CACHE`` /
``TIKTOKEN_CACHE_DIR`` pointing into a private temp dir. Standard library at import
time (Python 3.8+); transformers is imported inside :func:`run` only, so a venv
without it still yields a classified error. :func:`run` never raises.

Request: ``{"model_path": str, "trust_remote_code": bool, "sample": bool, "json_cap"?: int}``.

Result::

    {
      "loaded": bool,
      "class": "TikTokenTokenizer" | null, "module": "transformers_modules...." | null,
      "transformers_version": "5.24.0" | null, "tokenizers_version": str | null,
      "is_fast": bool | null, "vocab_size": int | null, "len": int | null,
      "bos" / "eos" / "pad" / "unk" / "mask": {"token": str, "id": int | null} | null,
      "special_tokens": [{"token", "id"}],          # added tokens with special=True, by id
      "added_tokens": int | null,                   # all added tokens (special or not)
      "added_tokens_check": null | {                # tokenizer_config's added_tokens_decoder
          "checked": int, "mismatches": int,         # against the loaded tokenizer
          "items": [{"id", "expected", "id_to_token", "token_to_id", "decoded", "ok"}]},
      "chat_template": null | {"text", "sha256", "source", "names"},
      "sample": null | {"text": str | null, "error": null | <error>},
      "import_seconds": float | null, "load_seconds": float | null,
      "error": null | <error>,
      # Only when transformers failed and the layout's own library loaded it
      # (tokenizer_native_load): "source": "mistral_common" | "sentencepiece" | "tiktoken",
      # "transformers_error": <error>.
      "fact_errors": [{"fact", "type", "message"}],  # a fact that raised after loading
    }
    <error> = {"type": exception class, "message": str, "cause": "missing-package" |
               "remote-code-refused" | "missing-files" | "incompatible-code" | "exception",
               "missing_packages": [pip names], "traceback": [last lines]}
"""

from __future__ import annotations

import os
import re
import sys
import time
import traceback
from typing import Any, Callable, Dict, List, Optional

from . import tokenizer_native_load
from .common import DEFAULT_JSON_CAP, json_safe, read_json_capped, read_text_capped, sha256_text

SPECIAL_ATTRIBUTES = ("bos", "eos", "pad", "unk", "mask")
TRACEBACK_LINES = 8
MAX_MESSAGE = 2000
MAX_CHECKED_IDS = 5000

# The sample conversation of the profile: system, user, assistant, user, then a prompt.
SAMPLE_MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is 2 + 2?"},
    {"role": "assistant", "content": "2 + 2 = 4."},
    {"role": "user", "content": "And 3 + 3?"},
]

# Import name -> pip distribution, where they differ or are ambiguous.
DIST_FOR_MODULE = {
    "google.protobuf": "protobuf",
    "google": "protobuf",
    "yaml": "pyyaml",
    "PIL": "pillow",
    "cv2": "opencv-python",
    "sklearn": "scikit-learn",
    "bs4": "beautifulsoup4",
    "attr": "attrs",
    "dateutil": "python-dateutil",
    "Crypto": "pycryptodome",
    "jinja": "jinja2",
    "SentencePiece": "sentencepiece",
    "Jinja2": "jinja2",
}
# ... and back, to test whether a library transformers names is importable.
MODULE_FOR_DIST = {"protobuf": "google.protobuf", "pyyaml": "yaml", "pillow": "PIL"}

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


def run(request: Dict[str, Any]) -> Dict[str, Any]:
    """Load, describe, and (optionally) render a sample; see the module docstring."""
    result = _empty_result()
    try:
        _run(request, result)
    except BaseException as exc:  # noqa: BLE001 - the report must always come back
        if isinstance(exc, KeyboardInterrupt):
            raise
        if result["error"] is None:
            result["error"] = classify_error(exc)
    return json_safe(result)


def _empty_result() -> Dict[str, Any]:
    result = {
        "loaded": False,
        "class": None,
        "module": None,
        "transformers_version": None,
        "tokenizers_version": None,
        "is_fast": None,
        "vocab_size": None,
        "len": None,
        "special_tokens": [],
        "added_tokens": None,
        "added_tokens_check": None,
        "chat_template": None,
        "sample": None,
        "import_seconds": None,
        "load_seconds": None,
        "error": None,
        "fact_errors": [],
    }  # type: Dict[str, Any]
    for name in SPECIAL_ATTRIBUTES:
        result[name] = None
    return result


def _run(request: Dict[str, Any], result: Dict[str, Any]) -> None:
    path = str(request["model_path"])
    trust = bool(request.get("trust_remote_code", False))
    cap = int(request.get("json_cap") or DEFAULT_JSON_CAP)

    started = time.monotonic()
    try:
        import transformers
        from transformers import AutoTokenizer
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, KeyboardInterrupt):
            raise
        result["error"] = classify_error(exc)
        tokenizer_native_load.fall_back_to_native(path, result)  # HOOK(tokenizers)
        return
    finally:
        result["import_seconds"] = round(time.monotonic() - started, 3)
    result["transformers_version"] = getattr(transformers, "__version__", None)
    result["tokenizers_version"] = _dist_version("tokenizers")

    started = time.monotonic()
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust)
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, KeyboardInterrupt):
            raise
        result["error"] = classify_error(exc)
        tokenizer_native_load.fall_back_to_native(path, result)  # HOOK(tokenizers)
        return
    finally:
        result["load_seconds"] = round(time.monotonic() - started, 3)

    result["loaded"] = True
    _describe(tokenizer, path, cap, result)
    if request.get("sample", True):
        result["sample"] = _sample(tokenizer)


def _dist_version(name: str) -> Optional[str]:
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:  # noqa: BLE001 - absent or broken metadata: just unknown
        return None


# ---------------------------------------------------------------- facts of a loaded tokenizer


def _describe(tokenizer: Any, path: str, cap: int, result: Dict[str, Any]) -> None:
    """Each fact on its own guard: a property that raises costs only itself."""

    def fact(name: str, get: Callable[[], Any]) -> None:
        try:
            result[name] = get()
        except Exception as exc:  # noqa: BLE001
            result["fact_errors"].append({"fact": name, "type": type(exc).__name__, "message": _short(str(exc))})

    fact("class", lambda: type(tokenizer).__name__)
    fact("module", lambda: type(tokenizer).__module__)
    fact("is_fast", lambda: bool(getattr(tokenizer, "is_fast", False)))
    fact("vocab_size", lambda: int(tokenizer.vocab_size))
    fact("len", lambda: len(tokenizer))
    for name in SPECIAL_ATTRIBUTES:
        fact(name, lambda name=name: _named_special(tokenizer, name))
    fact("special_tokens", lambda: _added(tokenizer, special_only=True))
    fact("added_tokens", lambda: len(_added(tokenizer, special_only=False)))
    fact("added_tokens_check", lambda: _check_added_tokens(tokenizer, path, cap))
    fact("chat_template", lambda: _chat_template(tokenizer, path, cap))


def _named_special(tokenizer: Any, name: str) -> Optional[Dict[str, Any]]:
    token = getattr(tokenizer, name + "_token", None)
    if token is None:
        return None
    token_id = getattr(tokenizer, name + "_token_id", None)
    return {"token": str(token), "id": token_id if isinstance(token_id, int) else None}


def _added(tokenizer: Any, special_only: bool) -> List[Dict[str, Any]]:
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    out = []
    for token_id, token in decoder.items():
        if special_only and not getattr(token, "special", False):
            continue
        out.append({"token": str(getattr(token, "content", token)), "id": int(token_id)})
    return sorted(out, key=lambda t: t["id"])


def _check_added_tokens(tokenizer: Any, path: str, cap: int) -> Optional[Dict[str, Any]]:
    """Every id the files name must round-trip through the loaded tokenizer.

    Catches the fast-conversion failure where special ids shift by a few (Kimi's
    ``</think>`` decoding to the wrong token): the files are the ground truth.
    """
    config, err = read_json_capped(os.path.join(path, "tokenizer_config.json"), cap)
    decoder = (config or {}).get("added_tokens_decoder") if err is None else None
    if not isinstance(decoder, dict):
        return None
    items = []
    for key, entry in sorted(decoder.items(), key=lambda kv: _int_or_max(kv[0]))[:MAX_CHECKED_IDS]:
        expected = entry.get("content") if isinstance(entry, dict) else entry
        token_id = _int_or_max(key)
        if token_id == sys.maxsize or not isinstance(expected, str):
            continue
        items.append(_check_one(tokenizer, token_id, expected))
    return {"checked": len(items), "mismatches": sum(1 for i in items if not i["ok"]), "items": items}


def _check_one(tokenizer: Any, token_id: int, expected: str) -> Dict[str, Any]:
    id_to_token = _try(lambda: tokenizer.convert_ids_to_tokens(token_id))
    token_to_id = _try(lambda: tokenizer.convert_tokens_to_ids(expected))
    decoded = _try(lambda: tokenizer.decode([token_id]))
    return {
        "id": token_id,
        "expected": expected,
        "id_to_token": id_to_token,
        "token_to_id": token_to_id,
        "decoded": decoded,
        "ok": id_to_token == expected and token_to_id == token_id and decoded == expected,
    }


def _try(get: Callable[[], Any]) -> Any:
    try:
        value = get()
    except Exception as exc:  # noqa: BLE001
        return {"error": type(exc).__name__ + ": " + _short(str(exc), 200)}
    return value if isinstance(value, (str, int)) or value is None else str(value)


def _int_or_max(key: Any) -> int:
    try:
        return int(key)
    except (TypeError, ValueError):
        return sys.maxsize


def _chat_template(tokenizer: Any, path: str, cap: int) -> Optional[Dict[str, Any]]:
    template = getattr(tokenizer, "chat_template", None)
    names = None  # type: Optional[List[str]]
    if isinstance(template, dict):  # named templates: "default" is what a plain call renders
        names = sorted(str(k) for k in template)
        template = template.get("default") or next(iter(template.values()), None)
    if not isinstance(template, str):
        return None
    return {"text": template, "sha256": sha256_text(template), "source": _template_source(template, path, cap), "names": names}


def _template_source(text: str, path: str, cap: int) -> str:
    """Which file the loaded template came from, by content; else the attribute itself."""
    jinja = os.path.join(path, "chat_template.jinja")
    if os.path.isfile(jinja) and read_text_capped(jinja, cap)[0] == text:
        return "chat_template.jinja"
    extra = os.path.join(path, "additional_chat_templates")
    if os.path.isdir(extra):
        for name in sorted(os.listdir(extra)):
            if read_text_capped(os.path.join(extra, name), cap)[0] == text:
                return "additional_chat_templates/" + name
    for file in ("tokenizer_config.json", "chat_template.json"):
        value, _ = read_json_capped(os.path.join(path, file), cap)
        if _template_in(value, text):
            return file
    return "tokenizer.chat_template"


def _template_in(config: Any, text: str) -> bool:
    value = config.get("chat_template") if isinstance(config, dict) else None
    if isinstance(value, list):
        return any(isinstance(v, dict) and v.get("template") == text for v in value)
    return value == text


def _sample(tokenizer: Any) -> Dict[str, Any]:
    if getattr(tokenizer, "chat_template", None) is None:
        return {"text": None, "error": None, "skipped": "no chat template"}
    try:
        rendered = tokenizer.apply_chat_template(SAMPLE_MESSAGES, tokenize=False, add_generation_prompt=True)
    except BaseException as exc:  # noqa: BLE001 - a template may raise anything, even SystemExit
        if isinstance(exc, KeyboardInterrupt):
            raise
        return {"text": None, "error": classify_error(exc)}
    if isinstance(rendered, list) and len(rendered) == 1:
        rendered = rendered[0]
    return {"text": rendered if isinstance(rendered, str) else str(rendered), "error": None}


# ---------------------------------------------------------------- error classification


def classify_error(exc: BaseException) -> Dict[str, Any]:
    """Exception -> {type, message, cause, missing_packages, traceback}."""
    message = _short(str(exc))
    missing = missing_packages(exc)
    return {
        "type": type(exc).__name__,
        "message": message,
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
    found = []  # type: List[str]
    for current in _chain(exc):
        for name in _missing_in(current):
            if name not in found:
                found.append(name)
    return found


def _chain(exc: BaseException) -> List[BaseException]:
    out = []  # type: List[BaseException]
    current = exc  # type: Optional[BaseException]
    while current is not None and current not in out and len(out) < 10:
        out.append(current)
        current = current.__cause__ or current.__context__
    return out


def _missing_in(exc: BaseException) -> List[str]:
    message = str(exc)
    listed = _REQUIRES_PACKAGES_RE.search(message)
    if listed:  # transformers' check_imports on remote code: the exact list
        return [dist_name(n.strip()) for n in listed.group(1).split(",") if n.strip()]
    names = []  # type: List[str]
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        names.append(exc.name)
    names.extend(_NO_MODULE_RE.findall(message))
    absent = [dist_name(n) for n in names if not _importable_top(n)]
    absent.extend(_library_mentions(message))
    return absent


def _library_mentions(message: str) -> List[str]:
    """transformers' own wording for optional backends (sentencepiece, protobuf, jinja2)."""
    out = []  # type: List[str]
    version = _REQUIRES_VERSION_RE.search(message)
    if version:  # installed but too old: the pip spec carries the minimum
        return [dist_name(version.group(1)) + version.group(2)]
    for pattern in (_REQUIRES_LIBRARY_RE, _REQUIRES_JINJA_RE):
        for name in pattern.findall(message):
            dist = dist_name(name)
            if not _importable_top(MODULE_FOR_DIST.get(dist, dist)):
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
    if top in DIST_FOR_MODULE and module in DIST_FOR_MODULE:
        top = module  # google.protobuf: "google" may exist without protobuf
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin not in (None, "namespace")


def dist_name(module: str) -> str:
    """Import name -> the name to give pip."""
    if module in DIST_FOR_MODULE:
        return DIST_FOR_MODULE[module]
    top = module.split(".")[0]
    return DIST_FOR_MODULE.get(top, top)


def _traceback_tail(exc: BaseException) -> List[str]:
    try:
        lines = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).splitlines()
    except Exception:  # noqa: BLE001
        return []
    # Python 3.11+ underlines with ^^^^ lines: noise in a report, drop them.
    lines = [line for line in lines if line.strip().strip("^~") != ""]
    return [_short(line, 300) for line in lines[-TRACEBACK_LINES:]]


def _short(text: str, limit: int = MAX_MESSAGE) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
