"""Gather raw facts about one model directory through one executor.

Two remote tasks run at the same time over the same connection, each on its
own channel: the stdlib file probe ("model") in one interpreter, and the
tokenizer load ("tokenizer") in another, isolated with its own timeout. The
file facts never wait for the slow tokenizer, and a crash or hang in the
tokenizer costs nothing else.
"""

from __future__ import annotations

import concurrent.futures
import posixpath
import time
from dataclasses import dataclass
from typing import Any

from introspect.errors import ConnectError, IntrospectError
from introspect.transport.base import Executor, ProbeReply

RAW_SCHEMA = "introspect.raw/v1"


@dataclass(frozen=True)
class ProbeOptions:
    model_path: str
    python: str = "python3"
    venv: str | None = None
    tokenizer_timeout: float = 120.0
    files_timeout: float = 60.0
    remote_code: bool = True
    load_tokenizer: bool = True
    json_cap: int = 16 * 1024 * 1024
    max_header: int = 100 * 1024 * 1024


def interpreter(python: str | None, venv: str | None) -> str:
    """The interpreter to run: ``<venv>/bin/python`` wins over ``--python``; default python3."""
    if venv:
        return posixpath.join(venv.rstrip("/") or "/", "bin", "python")
    return python or "python3"


def target_of(executor: Executor, python: str, venv: str | None, model_path: str) -> dict[str, Any]:
    """The ``target`` block of a profile or report: where, under which interpreter, what."""
    ssh = getattr(executor, "target", None)  # SSHTarget for SSH, absent for the local executor
    return {"host": getattr(ssh, "host", None), "port": getattr(ssh, "port", None),
            "user": getattr(ssh, "user", None), "python": python, "venv": venv, "model_path": model_path}


def _error_record(task: str, exc: IntrospectError) -> dict[str, Any]:
    record = {"probe": task, "type": type(exc).__name__, "message": exc.message, "hint": exc.hint,
              "stage": exc.stage}
    return record


def _run(executor: Executor, python: str, task: str, request: dict[str, Any], timeout: float,
         isolate: bool) -> ProbeReply:
    return executor.run_python(python, task, request, timeout=timeout, isolate=isolate)


def gather(executor: Executor, options: ProbeOptions, target: dict[str, Any]) -> dict[str, Any]:
    """Raw facts (see docs/raw-facts.md). Connection errors before any fact was
    gathered propagate; anything later is recorded in ``raw["errors"]`` and
    ``raw["fatal"]`` so the caller can still report what was found."""
    executor.connect()  # fail fast, before starting threads, on host/auth/host-key errors
    started = time.monotonic()
    raw: dict[str, Any] = {"schema": RAW_SCHEMA, "target": target, "errors": [], "timings": {},
                           "fatal": None, "tokenizer_probe": None,
                           "options": {"remote_code": options.remote_code,
                                       "load_tokenizer": options.load_tokenizer}}
    model_request = {"model_path": options.model_path, "json_cap": options.json_cap,
                     "max_header": options.max_header, "deadline": options.files_timeout}
    jobs: dict[str, tuple[dict[str, Any], float, bool]] = {
        "model": (model_request, options.files_timeout, False)}
    if options.load_tokenizer:
        tok_request = {"model_path": options.model_path, "trust_remote_code": options.remote_code,
                       "sample": True}
        jobs["tokenizer"] = (tok_request, options.tokenizer_timeout, True)

    python = interpreter(options.python, options.venv)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=len(jobs))
    try:
        futures = {task: pool.submit(_run, executor, python, task, req, timeout, isolate)
                   for task, (req, timeout, isolate) in jobs.items()}
        _collect(futures, raw)
    except BaseException:
        # Ctrl-C (or any crash) while probes run: close the channels first, so the remote
        # watchdogs kill their task groups and the worker threads return at once.
        executor.close()
        raise
    finally:
        pool.shutdown(wait=True)
    raw["timings"]["total"] = round(time.monotonic() - started, 3)
    return raw


def _collect(futures: dict[str, concurrent.futures.Future[ProbeReply]], raw: dict[str, Any]) -> None:
    """Merge each task's reply into ``raw``; a failed task becomes an error record."""
    for task, future in futures.items():
        try:
            reply = future.result()
        except IntrospectError as exc:
            raw["errors"].append(_error_record(task, exc))
            if isinstance(exc, ConnectError) or raw["fatal"] is None and task == "model":
                raw["fatal"] = exc.as_dict() | {"exit_code": exc.exit_code}
            continue
        raw["timings"][task] = reply.seconds
        raw["errors"].extend(reply.errors)
        if reply.python:
            raw.setdefault("python", reply.python)
        if task == "model" and isinstance(reply.facts, dict):
            for key in ("files", "tokenizer_files", "safetensors", "drafters", "environment", "hashes",
                        "fingerprint", "engines", "gpus"):
                raw[key] = reply.facts.get(key)
            raw["timings"].update({f"model.{k}": v for k, v in (reply.facts.get("timings") or {}).items()})
        elif task == "tokenizer":
            raw["tokenizer_probe"] = reply.facts
            if reply.supervisor:
                raw["timings"]["tokenizer.supervisor"] = reply.supervisor.get("seconds")
