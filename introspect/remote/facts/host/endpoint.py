"""Preflight: the serving endpoint as the host sees it (/v1/models, then a one-token completion).

Runs on the host: standard library only (urllib), Python 3.8+. The API key is read
from the environment variable the request names; it is sent, never reported.
"""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Any, Dict, List, Optional, Tuple


def check_endpoint(endpoint: Optional[str], model_path: str, timeout: float,
                   api_key_env: Optional[str]) -> Dict[str, Any]:
    """GET /v1/models, then a one-token chat completion, from this host.

    ``{"url", "skipped", "api_key_env", "api_key_present",
       "models": {"ok", "status", "seconds", "ids": [...], "roots": [...], "error"},
       "matched": null | {"id", "root", "by"},
       "completion": null | {"ok", "status", "seconds", "model", "finish_reason", "completion_tokens", "error"}}``
    """
    out: Dict[str, Any] = {"url": endpoint, "skipped": not endpoint, "api_key_env": api_key_env or None,
           "api_key_present": None, "models": None, "matched": None, "completion": None}
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
    payload: Dict[str, Any] = {"messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1, "temperature": 0,
               "stream": False}
    if model:
        payload["model"] = model
    status, body, seconds, error = _http(base + "/v1/chat/completions", payload, headers, timeout)
    out: Dict[str, Any] = {"ok": False, "status": status, "seconds": seconds, "model": model, "finish_reason": None,
           "completion_tokens": None, "error": error}
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

