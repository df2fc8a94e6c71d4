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

import json
import os
import re
import socket
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from introspect.remote import common

PROBE = "preflight"
PARTS = ("light", "tokenizer")
DEFAULT_PACKAGES = ("transformers", "jinja2")
MAX_ITEMS = 50  # mismatches / failures kept as evidence; the counts are always exact
SNIPPET = 60  # characters either side of a difference shown as evidence
RESERVED_SCAN = 4096  # ids at the top of the vocabulary searched for placeholders
TOKENIZER_JSON_CAP = 64 * 1024 * 1024  # big vocabularies (Gemma) exceed the 16 MiB JSON cap

# The conversation the issue names: system, user, assistant, user. Non-ASCII on
# purpose: a byte-level tokenizer that cannot round-trip UTF-8 must show it here.
CONVERSATION = [
    {"role": "system", "content": "You are a careful assistant."},
    {"role": "user", "content": "What is 2 + 2? Answer briefly (café, 中文)."},
    {"role": "assistant", "content": "2 + 2 = 4."},
    {"role": "user", "content": "And 3 + 3?"},
]
# Two assistant turns, ending on one: what an assistant-only loss mask must locate.
MASK_CONVERSATION = CONVERSATION + [{"role": "assistant", "content": "3 + 3 = 6."}]
REASONING = ["Two plus two.", "Three plus three."]
TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}]
THINKING_SWITCHES = ("enable_thinking", "thinking")

_GENERATION_TAG = re.compile(r"\{%-?\s*generation\s*-?%\}")
_GENERATION_TAGS = re.compile(r"\{%-?\s*(?:end)?generation\s*-?%\}")
_RESERVED = re.compile(r"reserved|unused", re.IGNORECASE)
# Marker-looking strings a template may emit as plain text (so a tokenizer that lacks
# them as added tokens splits them into pieces): <|x|>, <｜x｜>, [INST], <s>, <start_of_turn>.
_MARKER_LIKE = (
    r"<\|[^|<>\s]{1,48}\|>",
    "<\uff5c[^\uff5c<>]{1,48}\uff5c>",
    r"\[/?(?:INST|SYS|SYSTEM_PROMPT|AVAILABLE_TOOLS|TOOL_CALLS|TOOL_RESULTS)\]",
    r"</?s>",
    r"<(?:start|end)_of_turn>",
)


def run(request: Dict[str, Any]) -> Dict[str, Any]:
    """Evidence for the parts requested; never raises (see the module docstring)."""
    result = {"errors": [], "timings": {}}  # type: Dict[str, Any]
    parts = request.get("parts") or list(PARTS)
    model_path = _resolve(str(request.get("model_path") or ""))
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


def _exc(exc: BaseException) -> Dict[str, Any]:
    message = str(exc)
    return {"type": type(exc).__name__, "message": message if len(message) <= 500 else message[:497] + "..."}


def _resolve(path: str) -> str:
    # Isolated tasks run with a private temp dir as cwd: a relative path means the
    # login directory, as it would in an interactive ssh session.
    path = os.path.expanduser(path)
    if path and not os.path.isabs(path):
        path = os.path.join(os.path.expanduser("~"), path)
    return path


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


def check_endpoint(endpoint: Optional[str], model_path: str, timeout: float,
                   api_key_env: Optional[str]) -> Dict[str, Any]:
    """GET /v1/models, then a one-token chat completion, from this host.

    ``{"url", "skipped", "api_key_env", "api_key_present",
       "models": {"ok", "status", "seconds", "ids": [...], "roots": [...], "error"},
       "matched": null | {"id", "root", "by"},
       "completion": null | {"ok", "status", "seconds", "model", "finish_reason", "completion_tokens", "error"}}``
    """
    out = {"url": endpoint, "skipped": not endpoint, "api_key_env": api_key_env or None,
           "api_key_present": None, "models": None, "matched": None, "completion": None}  # type: Dict[str, Any]
    if not endpoint:
        return out
    base = _api_base(endpoint)
    headers = {"Accept": "application/json", "User-Agent": "introspect-preflight"}
    if api_key_env:
        key = os.environ.get(api_key_env)
        out["api_key_present"] = bool(key)
        if key:
            headers["Authorization"] = "Bearer " + key  # sent, never reported
    status, body, seconds, error = _http(base + "/v1/models", None, headers, timeout)
    models = _models_listing(body) if error is None else []
    out["models"] = {"ok": error is None, "status": status, "seconds": seconds, "error": error,
                     "ids": [m["id"] for m in models], "roots": [m["root"] for m in models]}
    out["matched"] = match_model(models, model_path)
    if error is not None:
        return out
    model = (out["matched"] or {}).get("id") or (models[0]["id"] if models else None)
    out["completion"] = _one_token(base, model, headers, timeout)
    return out


def _api_base(endpoint: str) -> str:
    base = endpoint.strip().rstrip("/")
    if base.endswith("/v1"):
        base = base[:-3]
    return base


def _opener(url: str) -> Any:
    import urllib.parse
    import urllib.request

    host = (urllib.parse.urlsplit(url).hostname or "").lower()
    if host in ("localhost", "::1") or host.startswith("127."):
        # The server is usually bound to the host's loopback: an http_proxy set for
        # the outside world must not swallow the request.
        return urllib.request.build_opener(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener()


def _http(url: str, payload: Optional[Dict[str, Any]], headers: Dict[str, str],
          timeout: float) -> Tuple[Optional[int], Any, float, Optional[Dict[str, Any]]]:
    """(status, parsed JSON body or None, seconds, error or None). Never raises."""
    import urllib.error
    import urllib.request

    data = None
    hdrs = dict(headers)
    if payload is not None:
        data = json.dumps(payload).encode("utf-8")
        hdrs["Content-Type"] = "application/json"
    started = time.monotonic()
    req = urllib.request.Request(url, data=data, headers=hdrs, method="POST" if data is not None else "GET")
    try:
        with _opener(url).open(req, timeout=timeout) as resp:
            raw = resp.read(4 * 1024 * 1024)
            status = resp.status
    except urllib.error.HTTPError as exc:
        seconds = round(time.monotonic() - started, 3)
        detail = _read_error_body(exc)
        return exc.code, None, seconds, {"type": "http-error", "message": "HTTP %d %s%s" % (
            exc.code, exc.reason, (": " + detail) if detail else "")}
    except (urllib.error.URLError, socket.timeout, OSError, ValueError) as exc:
        seconds = round(time.monotonic() - started, 3)
        reason = getattr(exc, "reason", exc)
        kind = "timeout" if isinstance(reason, socket.timeout) or "timed out" in str(reason) else "unreachable"
        return None, None, seconds, {"type": kind, "message": "%s: %s" % (type(reason).__name__, reason)}
    seconds = round(time.monotonic() - started, 3)
    try:
        return status, json.loads(raw.decode("utf-8")), seconds, None
    except ValueError as exc:
        return status, None, seconds, {"type": "bad-json", "message": "response is not JSON: %s" % exc}


def _read_error_body(exc: Any) -> str:
    try:
        text = exc.read(600).decode("utf-8", "replace").strip()
    except Exception:  # noqa: BLE001 - the status line already says enough
        return ""
    return text[:300]


def _models_listing(body: Any) -> List[Dict[str, Any]]:
    data = body.get("data") if isinstance(body, dict) else None
    out = []
    for item in data if isinstance(data, list) else []:
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            root = item.get("root")
            out.append({"id": item["id"], "root": root if isinstance(root, str) else None})
    return out


def match_model(models: List[Dict[str, Any]], model_path: str) -> Optional[Dict[str, Any]]:
    """The served model whose id or root is the model dir (path, real path or dir name)."""
    wanted_paths = set(p.rstrip("/") for p in (model_path, os.path.realpath(model_path)) if p)
    wanted_name = os.path.basename(model_path.rstrip("/"))
    for by in ("path", "name"):
        for model in models:
            for field in ("id", "root"):
                value = (model.get(field) or "").rstrip("/")
                if not value:
                    continue
                # The server may have been started on a symlink of the same directory.
                real = os.path.realpath(value) if value.startswith("/") else value
                if by == "path" and (value in wanted_paths or real in wanted_paths):
                    return {"id": model["id"], "root": model.get("root"), "by": field + "-path"}
                if by == "name" and wanted_name and os.path.basename(value) == wanted_name:
                    return {"id": model["id"], "root": model.get("root"), "by": field + "-name"}
    return None


def _one_token(base: str, model: Optional[str], headers: Dict[str, str], timeout: float) -> Dict[str, Any]:
    payload = {"messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1, "temperature": 0,
               "stream": False}  # type: Dict[str, Any]
    if model:
        payload["model"] = model
    status, body, seconds, error = _http(base + "/v1/chat/completions", payload, headers, timeout)
    out = {"ok": False, "status": status, "seconds": seconds, "model": model, "finish_reason": None,
           "completion_tokens": None, "error": error}  # type: Dict[str, Any]
    if error is not None:
        return out
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        out["error"] = {"type": "bad-response", "message": "no choices in the completion response"}
        return out
    out["finish_reason"] = choices[0].get("finish_reason")
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    out["completion_tokens"] = usage.get("completion_tokens")
    out["ok"] = True
    return out


def check_disk(output_dir: Optional[str]) -> Dict[str, Any]:
    """Free space where the data will be written: the nearest existing parent of output_dir.

    ``{"output_dir", "defaulted", "checked_path", "exists", "writable", "free_bytes", "total_bytes"}``
    """
    defaulted = not output_dir
    target = _resolve(output_dir) if output_dir else os.path.expanduser("~")
    checked = target
    # The output dir usually does not exist yet; its filesystem is its nearest parent's.
    while not os.path.exists(checked):
        parent = os.path.dirname(checked)
        if parent == checked:
            break
        checked = parent
    stat = os.statvfs(checked)
    return {"output_dir": target, "defaulted": defaulted, "checked_path": checked,
            "exists": os.path.isdir(target), "writable": os.access(checked, os.W_OK | os.X_OK),
            "free_bytes": stat.f_bavail * stat.f_frsize, "total_bytes": stat.f_blocks * stat.f_frsize}


def check_packages(model_path: str, packages: List[str]) -> Dict[str, Any]:
    """The pipeline's distributions, and the modules the tokenizer's own code imports.

    ``{"python", "prefix", "in_venv", "tokenizer_code": [files],
       "items": [{"name", "kind": "distribution" | "module", "required_by", "version",
                  "available", "install"}], "missing": [pip names]}``
    """
    from introspect.remote import env_probe

    items = []  # type: List[Dict[str, Any]]
    for name in packages:
        version = env_probe.package_version(name)
        items.append({"name": name, "kind": "distribution", "required_by": "pipeline", "version": version,
                      "available": version is not None, "install": name})
    code_files, modules = _tokenizer_code_imports(model_path)
    described, _missing, _errs = env_probe.describe_modules(modules)
    listed = set(_normalise(i["name"]) for i in items)
    for module in modules:
        info = described.get(module) or {}
        install = info.get("distribution") or module
        if _normalise(module) in listed or _normalise(install) in listed:
            continue  # already checked as a pipeline distribution
        version = env_probe.package_version(install) if info.get("available") else None
        items.append({"name": module, "kind": "module", "required_by": "tokenizer code", "version": version,
                      "available": bool(info.get("available")), "install": install})
    missing = [i["install"] for i in items if not i["available"]]
    return {"python": sys.executable, "prefix": sys.prefix,
            "in_venv": sys.prefix != getattr(sys, "base_prefix", sys.prefix), "tokenizer_code": code_files,
            "items": items, "missing": sorted(set(missing), key=missing.index)}


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _tokenizer_code_imports(model_path: str) -> Tuple[List[str], List[str]]:
    """(code files, third-party modules) of the tokenizer's auto_map code, followed transitively."""
    from introspect.remote import files_probe

    if not os.path.isdir(model_path):
        return [], []
    refs = []  # type: List[Tuple[str, str]]
    for name in ("tokenizer_config.json", "config.json"):
        value, _err = common.read_json_capped(os.path.join(model_path, name))
        amap = value.get("auto_map") if isinstance(value, dict) else None
        tok_ref = amap.get("AutoTokenizer") if isinstance(amap, dict) else None
        if tok_ref:
            refs.extend(files_probe.auto_map_references({"auto_map": {"AutoTokenizer": tok_ref}}, name + ":"))
    if not refs:
        return [], []
    local = set(n[:-3] for n in os.listdir(model_path) if n.endswith(".py") and n[:-3].isidentifier())
    entries, _truncated, _errors = files_probe.collect_custom_code(model_path, refs, local, common.DEFAULT_JSON_CAP)
    modules = []  # type: List[str]
    for entry in entries:
        for module in entry.get("imports") or []:
            if module not in modules:
                modules.append(module)
    return [e["file"] for e in entries], modules


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
        return dict(_exc(exc), cause="exception", missing_packages=[])


def _tokenizer_facts(tok: Any, model_path: str, budget: float, section: Dict[str, Any]) -> None:
    """Class, sizes, named specials, and the two agreement checks (files <-> loaded tokenizer).

    The tokenizer section: ``{"loaded", "trust_remote_code", "error", "transformers_version",
    "load_seconds", "class", "is_fast", "len", "vocab_size", "bos" / "eos" / "pad" / "unk" / "mask":
    {"token", "id"} | null, "declared_classes", "added_tokens_check", "decode_sweep"}``.
    """
    section["class"] = type(tok).__name__
    section["is_fast"] = bool(getattr(tok, "is_fast", False))
    section["len"] = _safe(lambda: len(tok))
    section["vocab_size"] = _safe(lambda: int(tok.vocab_size))
    for name in ("bos", "eos", "pad", "unk", "mask"):
        section[name] = _safe(lambda name=name: _named(tok, name))
    section["declared_classes"] = _safe(lambda: declared_classes(model_path))
    section["added_tokens_check"] = _safe(lambda: check_added_tokens(tok, model_path))
    section["decode_sweep"] = _safe(lambda: decode_sweep(tok, budget))


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


def _safe(get: Callable[[], Any]) -> Any:
    try:
        return get()
    except Exception as exc:  # noqa: BLE001 - one fact lost, the others stand
        return {"error": _exc(exc)}


def _named(tok: Any, name: str) -> Optional[Dict[str, Any]]:
    token = getattr(tok, name + "_token", None)
    if token is None:
        return None
    token_id = getattr(tok, name + "_token_id", None)
    return {"token": str(token), "id": token_id if isinstance(token_id, int) else None}


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
        "id_to_token": _value(lambda: tok.convert_ids_to_tokens(token_id)),
        "token_to_id": _value(lambda: tok.convert_tokens_to_ids(expected)),
        "decoded": _value(lambda: tok.decode([token_id])),
        "encoded": _value(lambda: list(tok.encode(expected, add_special_tokens=False))),
    }
    item["ok"] = (item["id_to_token"] == expected and item["token_to_id"] == token_id
                  and item["decoded"] == expected and item["encoded"] == [token_id])
    return item


def _value(get: Callable[[], Any]) -> Any:
    try:
        value = get()
    except Exception as exc:  # noqa: BLE001
        return {"error": "%s: %s" % (type(exc).__name__, str(exc)[:200])}
    if isinstance(value, (str, int, list)) or value is None:
        return value
    return str(value)


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


# ---------------------------------------------------------------- chat template


def describe_template(tok: Any) -> Dict[str, Any]:
    """What the template is and which switches it takes.

    ``{"present", "sha256", "variables": [...], "uses_tools", "thinking_switch": name | null,
       "generation_markers", "mentions_reasoning", "renders": {...}}`` (renders filled by render_all)
    """
    text = getattr(tok, "chat_template", None)
    if isinstance(text, dict):  # named templates: "default" is what a plain call renders
        text = text.get("default") or next(iter(text.values()), None)
    if not isinstance(text, str) or not text:
        return {"present": False}
    variables = template_variables(text)
    switch = next((name for name in THINKING_SWITCHES if name in variables), None)
    return {"present": True, "sha256": common.sha256_text(text), "chars": len(text), "variables": variables,
            "uses_tools": "tools" in variables, "thinking_switch": switch,
            "generation_markers": bool(_GENERATION_TAG.search(text)),
            "mentions_reasoning": "reasoning_content" in text, "text": text, "renders": {}}


def template_variables(text: str) -> List[str]:
    """The template's free variables (jinja2's AST), e.g. messages, tools, thinking."""
    try:
        import jinja2
        from jinja2 import meta
    except ImportError:  # no jinja2: transformers cannot render either; words are a fair guess
        return sorted(set(re.findall(r"\b(tools|thinking|enable_thinking|add_generation_prompt)\b", text)))
    # {% generation %} is transformers' own tag; plain jinja2 does not know it.
    source = _GENERATION_TAGS.sub("", text)
    env = jinja2.Environment(extensions=["jinja2.ext.loopcontrols", "jinja2.ext.do"])
    return sorted(meta.find_undeclared_variables(env.parse(source)))


def render(tok: Any, messages: List[Dict[str, Any]], **kwargs: Any) -> str:
    out = tok.apply_chat_template(messages, tokenize=False, **kwargs)
    if isinstance(out, list) and len(out) == 1:
        out = out[0]
    if not isinstance(out, str):
        raise TypeError("apply_chat_template(tokenize=False) returned %s, not text" % type(out).__name__)
    return out


def template_ids(tok: Any, messages: List[Dict[str, Any]], **kwargs: Any) -> List[int]:
    """apply_chat_template(tokenize=True) as ids: transformers 5 returns a BatchEncoding."""
    out = tok.apply_chat_template(messages, tokenize=True, **kwargs)
    if hasattr(out, "keys") and "input_ids" in out:
        out = out["input_ids"]
    if isinstance(out, list) and out and isinstance(out[0], list):
        out = out[0]
    return [int(i) for i in out]


def _variants(template: Dict[str, Any]) -> List[Tuple[str, Dict[str, Any]]]:
    variants = [("conversation", {"add_generation_prompt": False}),
                ("generation_prompt", {"add_generation_prompt": True})]
    if template.get("uses_tools"):
        variants.append(("tools", {"add_generation_prompt": True, "tools": TOOLS}))
    switch = template.get("thinking_switch")
    if switch:
        variants.append(("thinking_on", {"add_generation_prompt": True, switch: True}))
        variants.append(("thinking_off", {"add_generation_prompt": True, switch: False}))
    return variants


def render_all(tok: Any, template: Dict[str, Any]) -> None:
    """Render every variant; each also round-trips and is compared with tokenize=True.

    renders[name] = {"ok", "chars", "tail", "error", "roundtrip": {...}, "template_ids_match",
                     "ids": [...]}; plus "generation_prompt_text" and "switch_changes_render".
    """
    renders = template["renders"]
    for name, kwargs in _variants(template):
        renders[name] = _render_one(tok, kwargs)
    conv, gen = renders.get("conversation") or {}, renders.get("generation_prompt") or {}
    if conv.get("ok") and gen.get("ok") and gen["text"].startswith(conv["text"]):
        template["generation_prompt_text"] = gen["text"][len(conv["text"]):]
    if "tools" in renders and renders["tools"].get("ok"):
        renders["tools"]["tool_rendered"] = "get_weather" in renders["tools"]["text"]
    on, off = renders.get("thinking_on"), renders.get("thinking_off")
    if on and off and on.get("ok") and off.get("ok"):
        template["switch_changes_render"] = on["text"] != off["text"]


def _render_one(tok: Any, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    entry = {"ok": False, "error": None}  # type: Dict[str, Any]
    try:
        text = render(tok, CONVERSATION, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - a template may raise anything
        if isinstance(exc, KeyboardInterrupt):
            raise
        entry["error"] = _exc(exc)
        return entry
    entry.update({"ok": True, "text": text, "chars": len(text), "tail": text[-200:]})
    entry["roundtrip"] = _safe(lambda: roundtrip(tok, text))
    ids = (entry["roundtrip"] or {}).get("ids") or []
    try:
        direct = template_ids(tok, CONVERSATION, **kwargs)
        entry["template_ids_match"] = direct == ids
        if direct != ids:
            entry["template_ids_diff"] = _first_diff_ids(direct, ids)
    except Exception as exc:  # noqa: BLE001
        entry["template_ids_match"] = None
        entry["template_ids_error"] = _exc(exc)
    return entry


def roundtrip(tok: Any, text: str) -> Dict[str, Any]:
    """encode(text) then decode: plain calls first, then without clean-up, to name the fix."""
    ids = [int(i) for i in tok.encode(text, add_special_tokens=False)]
    plain = tok.decode(ids)
    out = {"ok": plain == text, "tokens": len(ids), "ids": ids}  # type: Dict[str, Any]
    if plain != text:
        out["diff"] = _first_diff(text, plain)
        out["ok_without_cleanup"] = False
        # Only a difference in spaces (" ." -> ".") can be decode's clean-up; anything else
        # is a real mismatch, whatever another decode path (keyword arguments) returns.
        if "".join(plain.split()) == "".join(text.split()):
            out["ok_without_cleanup"] = tok.decode(ids, clean_up_tokenization_spaces=False) == text
    return out


def _first_diff(expected: str, got: str) -> Dict[str, Any]:
    index = next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b),  # noqa: B905 - 3.8
                 min(len(expected), len(got)))
    lo = max(0, index - SNIPPET)
    return {"offset": index, "expected": expected[lo:index + SNIPPET], "got": got[lo:index + SNIPPET]}


def _first_diff_ids(a: List[int], b: List[int]) -> Dict[str, Any]:
    index = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))  # noqa: B905
    return {"offset": index, "template": a[max(0, index - 4):index + 4], "encode": b[max(0, index - 4):index + 4],
            "template_len": len(a), "encode_len": len(b)}


# ---------------------------------------------------------------- turn markers


def find_markers(tok: Any, template: Dict[str, Any]) -> Dict[str, Any]:
    """The marker strings the template emits around the message contents, and their ids.

    ``{"items": [{"text", "ids", "single", "special", "added"}], "end_of_turn": null | {"text", "id"},
       "source_render"}``. The end of turn is the first marker after the assistant's content.
    """
    renders = template.get("renders") or {}
    name = next((n for n in ("conversation", "generation_prompt") if (renders.get(n) or {}).get("ok")), None)
    if name is None:
        return {"items": [], "end_of_turn": None, "source_render": None}
    segments, after_assistant = _envelope(renders[name]["text"])
    pattern = _marker_pattern(tok)
    added = _added_vocab(tok)
    special_ids = _safe(lambda: list(tok.all_special_ids))
    specials = set(special_ids) if isinstance(special_ids, list) else set()
    seen = {}  # type: Dict[str, Dict[str, Any]]
    for segment in segments:
        for match in pattern.finditer(segment):
            text = match.group(0)
            if text not in seen:
                seen[text] = _marker(tok, text, added, specials)
    end = None
    if after_assistant is not None:
        first = pattern.search(after_assistant)
        if first:
            marker = seen.get(first.group(0)) or _marker(tok, first.group(0), added, specials)
            end = {"text": marker["text"], "id": marker["ids"][0] if marker["single"] else None,
                   "single": marker["single"]}
    return {"items": list(seen.values()), "end_of_turn": end, "source_render": name}


def _envelope(text: str) -> Tuple[List[str], Optional[str]]:
    """The render cut at the message contents: the template's own text, and what follows the assistant."""
    segments, rest, after_assistant = [], text, None
    for message in CONVERSATION:
        content = message["content"]
        index = rest.find(content)
        if index < 0:
            continue  # the template transformed the content; its envelope stays in the next cut
        segments.append(rest[:index])
        rest = rest[index + len(content):]
        if message["role"] == "assistant":
            after_assistant = rest
    segments.append(rest)
    return segments, after_assistant


def _added_vocab(tok: Any) -> Dict[str, int]:
    try:
        vocab = tok.get_added_vocab()
    except Exception:  # noqa: BLE001
        return {}
    return dict(vocab) if isinstance(vocab, dict) else {}


def _marker_pattern(tok: Any) -> Any:
    # Longest first, so <|im_end|> is never read as a shorter added token inside it.
    added = sorted((t for t in _added_vocab(tok) if t.strip()), key=len, reverse=True)
    alternatives = [re.escape(t) for t in added] + list(_MARKER_LIKE)
    return re.compile("|".join(alternatives))


def _marker(tok: Any, text: str, added: Dict[str, int], specials: set) -> Dict[str, Any]:
    ids = _value(lambda: [int(i) for i in tok.encode(text, add_special_tokens=False)])
    ids = ids if isinstance(ids, list) else []
    single = len(ids) == 1
    special = single and (ids[0] in specials or _added_special(tok, ids[0]))
    return {"text": text, "ids": ids, "single": single, "special": bool(special), "added": text in added}


def _added_special(tok: Any, token_id: int) -> bool:
    decoder = getattr(tok, "added_tokens_decoder", None) or {}
    entry = decoder.get(token_id)
    return bool(getattr(entry, "special", False))


# ---------------------------------------------------------------- assistant masks


def check_masks(tok: Any, template: Dict[str, Any]) -> Dict[str, Any]:
    """Which way assistant-only loss masks can be built.

    ``{"generation_markers", "assistant_tokens_mask": {"tried", "ok", "masked_tokens", "covers_turns",
       "error"}, "prefix": {conversation name: {"ok", "turns": [{"index", "prompt_prefix",
       "turn_prefix", "prompt_token_prefix", "turn_token_prefix", "ok", "diff"?}]}}}``
    """
    out = {"generation_markers": bool(template.get("generation_markers"))}  # type: Dict[str, Any]
    out["assistant_tokens_mask"] = _assistant_mask(tok) if out["generation_markers"] else {"tried": False}
    conversations = {"plain": MASK_CONVERSATION}
    if template.get("mentions_reasoning"):
        # Thinking models' data carries reasoning; templates that drop older turns'
        # reasoning (Kimi, Qwen3) are not prefix-stable on exactly that data.
        conversations["reasoning"] = _with_reasoning(MASK_CONVERSATION)
    out["prefix"] = {}
    for name, messages in conversations.items():
        out["prefix"][name] = _safe(lambda messages=messages: prefix_property(tok, messages))
    return out


def _assistant_mask(tok: Any) -> Dict[str, Any]:
    entry = {"tried": True, "ok": False, "masked_tokens": 0, "covers_turns": False, "error": None}  # type: Dict[str, Any]
    try:
        out = tok.apply_chat_template(MASK_CONVERSATION, tokenize=True, return_dict=True,
                                      return_assistant_tokens_mask=True, add_generation_prompt=False)
        ids, mask = list(out["input_ids"]), list(out["assistant_masks"])
        if ids and isinstance(ids[0], list):
            ids, mask = ids[0], mask[0]
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, KeyboardInterrupt):
            raise
        entry["error"] = _exc(exc)
        return entry
    masked = [i for i, m in zip(ids, mask) if m]  # noqa: B905 - zip(strict=) is 3.10+
    decoded = tok.decode(masked) if masked else ""
    contents = [m["content"] for m in MASK_CONVERSATION if m["role"] == "assistant"]
    entry.update({"masked_tokens": len(masked), "tokens": len(ids), "masked_text": decoded[:300],
                  "covers_turns": all(c in decoded for c in contents)})
    entry["ok"] = bool(masked) and entry["covers_turns"]
    return entry


def _with_reasoning(messages: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    out, turn = [], 0
    for message in messages:
        message = dict(message)
        if message["role"] == "assistant":
            message["reasoning_content"] = REASONING[turn % len(REASONING)]
            turn += 1
        out.append(message)
    return out


def prefix_property(tok: Any, messages: List[Dict[str, Any]]) -> Dict[str, Any]:
    """For each assistant turn k: prompt(:k)+gen ⊑ render(:k+1) ⊑ render(all), as text and as ids.

    When it holds, one render of the whole conversation locates every assistant turn
    (the span between the two prefixes), so one sample carries all turns' losses.
    """
    full = render(tok, messages, add_generation_prompt=False)
    full_ids = tok.encode(full, add_special_tokens=False)
    turns = []
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        prompt = render(tok, messages[:index], add_generation_prompt=True)
        upto = render(tok, messages[:index + 1], add_generation_prompt=False)
        prompt_ids = tok.encode(prompt, add_special_tokens=False)
        upto_ids = tok.encode(upto, add_special_tokens=False)
        turn = {"index": index, "prompt_prefix": upto.startswith(prompt), "turn_prefix": full.startswith(upto),
                "prompt_token_prefix": list(upto_ids[:len(prompt_ids)]) == list(prompt_ids),
                "turn_token_prefix": list(full_ids[:len(upto_ids)]) == list(upto_ids)}
        turn["ok"] = all(turn[k] for k in ("prompt_prefix", "turn_prefix", "prompt_token_prefix",
                                           "turn_token_prefix"))
        if not turn["prompt_prefix"]:
            turn["diff"] = dict(_first_diff(prompt, upto), what="generation prompt vs rendered turn")
        elif not turn["turn_prefix"]:
            turn["diff"] = dict(_first_diff(upto, full), what="conversation cut after this turn vs full render")
        turns.append(turn)
    return {"ok": bool(turns) and all(t["ok"] for t in turns), "turns": turns}


# ---------------------------------------------------------------- mask token


def mask_token(tok: Any, template: Dict[str, Any], config: Dict[str, Any]) -> Dict[str, Any]:
    """The tokenizer's mask token, else unused candidates inside the embedding.

    ``{"present": null | {"token", "id"}, "vocab_size", "used_ids": int,
       "candidates": [{"token", "id", "kind": "unk" | "reserved" | "unassigned-row", "used_by_template"}]}``
    Candidates are listed in order of preference: [UNK] first (what the published Kimi
    K2.5 DFlash drafter uses), then reserved placeholders, then embedding rows no token has.
    """
    used = _used_ids(template)
    text = template.get("text") or ""
    vocab_size = config.get("vocab_size")
    present = _named(tok, "mask")
    if present is not None and isinstance(present["id"], int):
        present = _candidate(present["token"], present["id"], "mask_token", used, text)
    out = {"present": present, "vocab_size": vocab_size, "used_ids": len(used),
           "candidates": _candidates(tok, used, text, vocab_size)}  # type: Dict[str, Any]
    return out


def _used_ids(template: Dict[str, Any]) -> set:
    used = set()  # type: set
    for entry in (template.get("renders") or {}).values():
        used.update(((entry or {}).get("roundtrip") or {}).get("ids") or [])
    return used


def _candidates(tok: Any, used: set, text: str, vocab_size: Optional[int]) -> List[Dict[str, Any]]:
    out = []  # type: List[Dict[str, Any]]
    taken = set(i for i in (getattr(tok, "pad_token_id", None), getattr(tok, "eos_token_id", None),
                            getattr(tok, "bos_token_id", None)) if isinstance(i, int))
    unk = _named(tok, "unk")
    if unk and isinstance(unk["id"], int) and unk["id"] not in taken:
        out.append(_candidate(unk["token"], unk["id"], "unk", used, text))
    out.extend(_reserved(tok, used, text, taken))
    size = _safe(lambda: len(tok))
    if isinstance(size, int) and isinstance(vocab_size, int) and vocab_size > size:
        out.append({"token": None, "id": size, "kind": "unassigned-row", "used_by_template": False})
    return out


def _candidate(token: str, token_id: int, kind: str, used: set, text: str) -> Dict[str, Any]:
    return {"token": token, "id": token_id, "kind": kind,
            "used_by_template": token_id in used or (bool(token) and token in text)}


def _reserved(tok: Any, used: set, text: str, taken: set) -> List[Dict[str, Any]]:
    """Placeholder tokens (<|reserved_token_N|>, [unused0]...) among added tokens and the top ids."""
    found = {}  # type: Dict[int, str]
    for token, token_id in _added_vocab(tok).items():
        if _RESERVED.search(token):
            found[int(token_id)] = token
    size = _safe(lambda: len(tok))
    if isinstance(size, int):
        ids = list(range(max(0, size - RESERVED_SCAN), size))
        tokens = _safe(lambda: tok.convert_ids_to_tokens(ids))
        if isinstance(tokens, list):
            for token_id, token in zip(ids, tokens):  # noqa: B905
                if isinstance(token, str) and _RESERVED.search(token):
                    found.setdefault(token_id, token)
    out = []
    for token_id in sorted(found):
        if token_id in taken:
            continue
        item = _candidate(found[token_id], token_id, "reserved", used, text)
        if not item["used_by_template"]:
            out.append(item)
        if len(out) >= 3:
            break
    return out
