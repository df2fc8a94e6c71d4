"""Preflight, host part: the serving endpoint seen from the host, disk, pipeline packages.

Standard library only, Python 3.8+; no transformers import here.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from introspect.remote import common


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
    target = resolve_path(output_dir) if output_dir else os.path.expanduser("~")
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


def resolve_path(path: str) -> str:
    # Isolated tasks run with a private temp dir as cwd: a relative path means the
    # login directory, as it would in an interactive ssh session.
    path = os.path.expanduser(path)
    if path and not os.path.isabs(path):
        path = os.path.join(os.path.expanduser("~"), path)
    return path
