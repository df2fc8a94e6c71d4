"""Preflight probe: raw evidence that a data-generation job fits the target model (issue 5).

Runs on the host under the pipeline venv's interpreter. Standard library at import
time, Python 3.8+; transformers is imported inside the tokenizer part only, so a
venv without it still answers every other part. Nothing here judges: the verdicts
are ``introspect/checks/preflight.py``'s, made locally from this evidence.

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

import os
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from introspect.remote import common
from introspect.remote.preflight_host import check_disk, check_endpoint, check_packages, resolve_path
from introspect.remote.preflight_template import (
    check_masks,
    describe_template,
    exception_record,
    find_markers,
    mask_token,
    named_token,
    render_all,
    safe_get,
    value_or_error,
)

PROBE = "preflight"
PARTS = ("light", "tokenizer")
DEFAULT_PACKAGES = ("transformers", "jinja2")
MAX_ITEMS = 50  # mismatches / failures kept as evidence; the counts are always exact
TOKENIZER_JSON_CAP = 64 * 1024 * 1024  # big vocabularies (Gemma) exceed the 16 MiB JSON cap


def run(request: Dict[str, Any]) -> Dict[str, Any]:
    """Evidence for the parts requested; never raises (see the module docstring)."""
    result = {"errors": [], "timings": {}}  # type: Dict[str, Any]
    parts = request.get("parts") or list(PARTS)
    model_path = resolve_path(str(request.get("model_path") or ""))
    result["model"] = _model_dir(model_path)
    if "light" in parts:
        _light(request, model_path, result)
    if "tokenizer" in parts:
        _guard(result, "tokenizer-part", lambda: _tokenizer_part(request, model_path, result))
    return common.json_safe(result)


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


def _error_record(name: str, exc: BaseException) -> Dict[str, Any]:
    message = str(exc)
    return {"probe": "%s.%s" % (PROBE, name), "type": type(exc).__name__,
            "message": message if len(message) <= 2000 else message[:1997] + "..."}


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
    timeout = float(request.get("endpoint_timeout") or 30.0)
    _guard(result, "endpoint", lambda: check_endpoint(endpoint, model_path, timeout, request.get("api_key_env")),
           "endpoint")
    _guard(result, "disk", lambda: check_disk(request.get("output_dir")), "disk")
    packages = request.get("pipeline_packages")
    if packages is None:
        packages = list(DEFAULT_PACKAGES)
    _guard(result, "packages", lambda: check_packages(model_path, list(packages)), "packages")


# ---------------------------------------------------------------- tokenizer part


def _tokenizer_part(request: Dict[str, Any], model_path: str, result: Dict[str, Any]) -> None:
    _drop_cwd_from_path()
    _guard(result, "config", lambda: read_config(model_path), "config")
    tok = _guard(result, "load", lambda: _load(model_path, bool(request.get("trust_remote_code")), result))
    if tok is None:
        return
    budget = float(request.get("decode_budget_s") or 20.0)
    _guard(result, "tokenizer-facts", lambda: _tokenizer_facts(tok, model_path, budget, result["tokenizer"]))
    template = _guard(result, "template", lambda: describe_template(tok), "template")
    if not template or not template.get("present"):
        return
    _guard(result, "renders", lambda: render_all(tok, template))
    _guard(result, "markers", lambda: find_markers(tok, template), "markers")
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


def read_config(model_path: str) -> Dict[str, Any]:
    """vocab_size (nested text configs too) and EOS ids of config.json and generation_config.json.

    ``{"vocab_size", "vocab_size_source", "config_eos": [ids] | null, "generation_eos": [ids] | null,
       "generation_config_present", "errors": [...]}``
    """
    out = {"vocab_size": None, "vocab_size_source": None, "config_eos": None, "config_eos_source": None,
           "generation_eos": None, "generation_config_present": False, "errors": []}  # type: Dict[str, Any]
    config, err = common.read_json_capped(os.path.join(model_path, "config.json"))
    if err is not None:
        out["errors"].append(err)
    for label, section in _config_sections(config):
        if out["vocab_size"] is None and isinstance(section.get("vocab_size"), int):
            out["vocab_size"], out["vocab_size_source"] = section["vocab_size"], label
        if out["config_eos"] is None and section.get("eos_token_id") is not None:
            out["config_eos"], out["config_eos_source"] = _id_list(section["eos_token_id"]), label
    gen_path = os.path.join(model_path, "generation_config.json")
    out["generation_config_present"] = os.path.exists(gen_path)
    if out["generation_config_present"]:
        gen, err = common.read_json_capped(gen_path)
        if err is not None:
            out["errors"].append(err)
        elif gen.get("eos_token_id") is not None:
            out["generation_eos"] = _id_list(gen["eos_token_id"])
    return out


def _config_sections(config: Any) -> List[Tuple[str, Dict[str, Any]]]:
    # The language model's embedding is what ids index: a multimodal wrapper (kimi_k25,
    # llava, qwen-vl) keeps it in a nested text config, which wins over the top level.
    if not isinstance(config, dict):
        return []
    out = []
    for key in ("text_config", "language_config", "llm_config"):
        if isinstance(config.get(key), dict):
            out.append(("config.json:" + key, config[key]))
    out.append(("config.json", config))
    return out


def _id_list(value: Any) -> Optional[List[int]]:
    values = value if isinstance(value, list) else [value]
    ids = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    return ids or None


def _load(model_path: str, trust: bool, result: Dict[str, Any]) -> Any:
    """Load through transformers; on failure the classified error, as the probe command gives it."""
    section = {"loaded": False, "trust_remote_code": trust, "error": None}  # type: Dict[str, Any]
    result["tokenizer"] = section
    started = time.monotonic()
    try:
        import transformers
        from transformers import AutoTokenizer

        section["transformers_version"] = getattr(transformers, "__version__", None)
        tok = AutoTokenizer.from_pretrained(model_path, trust_remote_code=trust)
    except BaseException as exc:  # noqa: BLE001 - remote code may raise anything, even SystemExit
        if isinstance(exc, KeyboardInterrupt):
            raise
        section["error"] = _classify(exc)
        return None
    finally:
        section["load_seconds"] = round(time.monotonic() - started, 3)
    section["loaded"] = True
    return tok


def _classify(exc: BaseException) -> Dict[str, Any]:
    try:
        from introspect.remote.tokenizer_probe import classify_error

        return classify_error(exc)
    except ImportError:  # the shared classifier is not there: a plain record still helps
        return dict(exception_record(exc), cause="exception", missing_packages=[])


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
    for name in ("bos", "eos", "pad", "unk", "mask"):
        section[name] = safe_get(lambda name=name: named_token(tok, name))
    section["declared_classes"] = safe_get(lambda: declared_classes(model_path))
    section["added_tokens_check"] = safe_get(lambda: check_added_tokens(tok, model_path))
    section["decode_sweep"] = safe_get(lambda: decode_sweep(tok, budget))


def declared_classes(model_path: str) -> List[str]:
    """The tokenizer classes the model's own code provides (tokenizer_config.json auto_map).

    When the loaded class is none of them, transformers built something else (e.g. an
    automatic fast conversion with --no-remote-code) that a server running the model's
    code may not match.
    """
    config, err = common.read_json_capped(os.path.join(model_path, "tokenizer_config.json"))
    amap = config.get("auto_map") if err is None else None
    refs = amap.get("AutoTokenizer") if isinstance(amap, dict) else None
    refs = refs if isinstance(refs, list) else [refs]
    return [ref.rsplit(".", 1)[-1] for ref in refs if isinstance(ref, str) and ref]


def check_added_tokens(tok: Any, model_path: str) -> Optional[Dict[str, Any]]:
    """Every added token the files name, both ways and decoded, in the loaded tokenizer.

    The files are the ground truth: an automatic fast conversion that shifts special
    ids (Kimi's ``</think>`` decoding to the wrong token) shows up here. Plain
    ``decode([id])`` and ``encode(token)`` are checked because they are what a data
    pipeline calls. Sources: tokenizer_config.json's ``added_tokens_decoder`` and
    tokenizer.json's ``added_tokens``, whichever exist.

    ``{"sources": [...], "checked", "mismatches", "items": [first mismatches: {"id", "expected",
       "source", "id_to_token", "token_to_id", "decoded", "encoded"}]}``, or null with no source.
    """
    expected = _file_added_tokens(model_path)
    if not expected:
        return None
    bad = []  # type: List[Dict[str, Any]]
    for token_id in sorted(expected):
        content, source = expected[token_id]
        item = _check_one(tok, token_id, content)
        if not item["ok"]:
            item["source"] = source
            bad.append(item)
    sources = sorted(set(source for _content, source in expected.values()))
    return {"sources": sources, "checked": len(expected), "mismatches": len(bad), "items": bad[:MAX_ITEMS]}


def _file_added_tokens(model_path: str) -> Dict[int, Tuple[str, str]]:
    """id -> (content, file) from the raw files; tokenizer_config.json wins over tokenizer.json."""
    found = {}  # type: Dict[int, Tuple[str, str]]
    doc, err = common.read_json_capped(os.path.join(model_path, "tokenizer.json"), TOKENIZER_JSON_CAP)
    entries = doc.get("added_tokens") if err is None else None
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("id"), int) and isinstance(entry.get("content"), str):
            found[entry["id"]] = (entry["content"], "tokenizer.json")
    config, err = common.read_json_capped(os.path.join(model_path, "tokenizer_config.json"))
    decoder = config.get("added_tokens_decoder") if err is None else None
    for key, entry in (decoder.items() if isinstance(decoder, dict) else []):
        content = entry.get("content") if isinstance(entry, dict) else entry
        token_id = _int_key(key)
        if token_id >= 0 and isinstance(content, str):
            found[token_id] = (content, "tokenizer_config.json")
    return found


def _check_one(tok: Any, token_id: int, expected: str) -> Dict[str, Any]:
    item = {
        "id": token_id,
        "expected": expected,
        "id_to_token": value_or_error(lambda: tok.convert_ids_to_tokens(token_id)),
        "token_to_id": value_or_error(lambda: tok.convert_tokens_to_ids(expected)),
        "decoded": value_or_error(lambda: tok.decode([token_id])),
        "encoded": value_or_error(lambda: list(tok.encode(expected, add_special_tokens=False))),
    }
    item["ok"] = (item["id_to_token"] == expected and item["token_to_id"] == token_id
                  and item["decoded"] == expected and item["encoded"] == [token_id])
    return item


def _int_key(key: Any) -> int:
    try:
        return int(key)
    except (TypeError, ValueError):
        return -1


def decode_sweep(tok: Any, budget: float) -> Dict[str, Any]:
    """``decode([id])`` for every id below len(tokenizer), within a time budget.

    A completion may contain any id; one that makes decode raise breaks the job late.
    ``{"total", "checked", "complete", "failures", "items": [{"id", "error"}], "seconds"}``
    """
    total = len(tok)
    started = time.monotonic()
    failures = []  # type: List[Dict[str, Any]]
    checked = 0
    for token_id in range(total):
        if checked % 1024 == 0 and time.monotonic() - started > budget:
            break
        try:
            tok.decode([token_id])
        except Exception as exc:  # noqa: BLE001
            failures.append({"id": token_id, "error": "%s: %s" % (type(exc).__name__, str(exc)[:200])})
        checked += 1
    return {"total": total, "checked": checked, "complete": checked == total, "failures": len(failures),
            "items": failures[:MAX_ITEMS], "seconds": round(time.monotonic() - started, 3)}
