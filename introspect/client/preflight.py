"""The controller side of ``preflight``: is this host ready to generate drafter training data?

Two requests of the remote ``preflight`` task run as two channels of one connection
(:func:`introspect.client.runner.run_channels`): the quick standard-library part
(endpoint, disk, packages) and the isolated tokenizer part (transformers, the model's
own code, a hard deadline). A hung tokenizer load therefore still leaves the
endpoint, disk and package verdicts. The verdicts are :mod:`introspect.checks.preflight`'s.
"""

from __future__ import annotations

import os
import shlex
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, cast

from introspect.checks.preflight import Check, evaluate, ready
from introspect.client.fleet import run_fleet
from introspect.client.runner import Channel, ChannelResult, run_channels, target_of
from introspect.errors import ConnectError, InterpreterError, IntrospectError, ModelPathError, UsageError
from introspect.inventory import venv_pip
from introspect.remote.contract import ErrorRecord, PreflightReply, TargetBlock, interpreter
from introspect.remote.contract import PreflightRequest as RemoteRequest
from introspect.transport.base import Executor
from introspect.userconfig import (
    choose_remote_code,
    config_venv,
    inventory_remote_code,
    settings_block,
    target_names,
)

if TYPE_CHECKING:
    from introspect.documents.preflight import PreflightDocument
    from introspect.inventory import HostEntry, Inventory

SCHEMA: Final = "introspect.preflight/v1"
TASK = "preflight"
DEFAULT_PACKAGES = ("transformers", "jinja2")
DEFAULT_TIMEOUT = 300.0  # the tokenizer part: transformers import, the model's code, the checks
DEFAULT_ENDPOINT_TIMEOUT = 30.0
DEFAULT_MIN_FREE_GB = 50.0
LIGHT_GRACE_S = 30.0  # on top of two endpoint calls: disk and package metadata are quick


@dataclass(frozen=True)
class PreflightRequest:
    model: str
    venv: str | None = None
    python_exe: str | None = None
    endpoint: str | None = None
    api_key_env: str | None = None
    endpoint_timeout: float = DEFAULT_ENDPOINT_TIMEOUT
    output_dir: str | None = None
    min_free_gb: float = DEFAULT_MIN_FREE_GB
    packages: tuple[str, ...] = ()
    timeout: float = DEFAULT_TIMEOUT
    no_remote_code: bool = False


class PreflightTarget(TargetBlock, total=False):
    """The ``target`` block of a preflight report: the probe's, and what the gate checks besides."""

    endpoint: str | None
    output_dir: str | None


@dataclass
class PreflightReport:
    checks: list[Check]
    target: PreflightTarget
    document: PreflightDocument  # the --json document

    @property
    def ready(self) -> bool:
        return ready(self.checks)

    def to_document(self) -> PreflightDocument:
        """``introspect preflight --json``, typed."""
        return self.document

    def to_json(self) -> str:
        return self.document.to_json()


@dataclass
class PreflightHostResult:
    """One host of ``preflight --all-hosts``: its report, or why there is none (``error``)."""

    host: str
    exit_code: int
    ready: bool
    report: PreflightReport | None
    error: dict[str, Any] | None  # IntrospectError.as_dict(): {type, message, hint, ...}


def validate(request: PreflightRequest) -> None:
    """Usage errors, before anything connects."""
    if request.venv and request.python_exe:
        raise UsageError("--venv and --python are exclusive", hint="pass one: --venv DIR or --python EXE")
    if request.endpoint is not None:
        parts = urllib.parse.urlsplit(request.endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"--endpoint {request.endpoint!r} is not an http(s) URL",
                             hint="pass the server's base URL, e.g. --endpoint http://127.0.0.1:30000")
    if request.api_key_env is not None and not request.api_key_env.isidentifier():
        raise UsageError(f"--api-key-env {request.api_key_env!r} is not a variable name",
                         hint="pass the NAME of the variable (e.g. --api-key-env OPENAI_API_KEY), never the key")
    if request.min_free_gb < 0 or request.endpoint_timeout <= 0 or request.timeout <= 0:
        raise UsageError("--min-free-gb must be >= 0 and the timeouts > 0", hint="check the numbers given")
    pipeline_packages(request.packages)


def pipeline_packages(given: tuple[str, ...]) -> list[str]:
    """transformers, jinja2 and the distributions named with --packages (repeatable or comma-separated)."""
    names = list(DEFAULT_PACKAGES)
    for value in given:
        for name in value.split(","):
            name = name.strip()
            if not name:
                continue
            if not all(c.isalnum() or c in "-_." for c in name):
                raise UsageError(f"--packages {name!r} is not a distribution name",
                                 hint="name distributions as pip does (e.g. --packages datasets,pyarrow)")
            if name not in names:
                names.append(name)
    return names


def pip_command(venv: str | None, python_exe: str | None) -> str:
    """The install command the fixes name: the pipeline venv's own pip."""
    if venv:
        return shlex.quote(venv_pip(venv))
    return f"{shlex.quote(python_exe or 'python3')} -m pip"


def run_preflight(request: PreflightRequest, executor: Executor, entry: HostEntry | None,
                  *, local: bool, inventory: Inventory | None = None) -> PreflightReport:
    """Gather both parts' evidence over one connection and judge it."""
    validate(request)
    venv, model, output_dir = request.venv, request.model, request.output_dir
    if entry is not None and not venv and not request.python_exe and entry.venvs:
        venv = entry.venvs[0].path  # as `probe` does: the entry's first venv is the natural default
    if local:
        # Local run: paths are the user's, relative to this shell (remote ones resolve from $HOME).
        model = os.path.abspath(model)
        output_dir = os.path.abspath(output_dir) if output_dir else None
    # As for `probe`: the flag, else the inventory's host or venv entry, else the user config.
    venv = venv or (None if request.python_exe else config_venv(executor.target))  # the user config's `venv:`
    policy = choose_remote_code(request.no_remote_code, inventory_remote_code(inventory, entry, venv),
                                hosts=target_names(executor.target, entry), model=request.model)
    remote_code = bool(policy.value)
    python_exe = request.python_exe or (None if venv else executor.default_python)
    endpoint = request.endpoint.rstrip("/") if request.endpoint else None
    task_request: RemoteRequest = {"model_path": model, "trust_remote_code": remote_code, "endpoint": endpoint,
                    "endpoint_timeout": request.endpoint_timeout, "api_key_env": request.api_key_env,
                    "output_dir": output_dir, "pipeline_packages": pipeline_packages(request.packages)}
    python = interpreter(python_exe, venv)
    with executor:
        evidence = gather(executor, python, task_request, timeout=request.timeout,
                          light_timeout=2 * request.endpoint_timeout + LIGHT_GRACE_S)
    _require_model_dir(evidence, model)
    checks = evaluate(evidence, min_free_gb=request.min_free_gb, pip=pip_command(venv, python_exe),
                      model_path=model)
    target = PreflightTarget(**target_of(executor, python, venv, model), endpoint=endpoint, output_dir=output_dir)
    document = build_report(checks, evidence, target)
    document.settings = settings_block(inventory, policy)
    return PreflightReport(checks, target, document)


def gather(executor: Executor, python: str, request: RemoteRequest, *, timeout: float,
           light_timeout: float) -> PreflightReply:
    """Both parts' evidence merged; a part that failed leaves its error records instead."""
    light: RemoteRequest = {**request, "parts": ["light"]}
    tokenizer: RemoteRequest = {**request, "parts": ["tokenizer"]}
    channels = [Channel("light", python, TASK, light.copy(), light_timeout),
                Channel("tokenizer", python, TASK, tokenizer.copy(), timeout, isolate=True)]
    evidence = PreflightReply(errors=[], timings={})
    results = run_channels(executor, channels)
    for channel in channels:
        _merge(evidence, str(channel.key), results[channel.key])
    return evidence


def _merge(evidence: PreflightReply, part: str, result: ChannelResult) -> None:
    exc = result.error
    if isinstance(exc, (ConnectError, InterpreterError)) or (exc is not None and not isinstance(exc, IntrospectError)):
        raise exc  # unreachable host (3), unusable interpreter (2), or a bug: no verdict is possible
    if isinstance(exc, IntrospectError):  # a timeout or crash of one part costs that part only
        evidence["errors"].append(ErrorRecord(probe=f"{TASK}.{part}", type=type(exc).__name__,
                                              message=exc.message, hint=exc.hint))
        return
    reply = result.reply
    assert reply is not None
    facts = cast(PreflightReply, reply.facts if isinstance(reply.facts, dict) else {})  # checked by transport/frames.py
    evidence.update(cast(PreflightReply, {k: v for k, v in facts.items() if k not in ("errors", "timings")}))
    evidence["errors"].extend(e for e in reply.errors if isinstance(e, dict))
    evidence["timings"].update({f"{part}.{k}": v for k, v in (facts.get("timings") or {}).items()})
    evidence["timings"][part] = reply.seconds


def _require_model_dir(evidence: PreflightReply, model: str) -> None:
    status = evidence.get("model", {}).get("status")
    if status and status != "ok":
        raise ModelPathError(f"model path {model!r}: {status}",
                             hint="pass --model the directory that holds config.json (on the target)",
                             stage="preflight")


def build_report(checks: list[Check], evidence: PreflightReply, target: PreflightTarget) -> PreflightDocument:
    """The --json document: every check with status, evidence and fix."""
    from introspect.documents.preflight import PreflightCheck, PreflightDocument

    return PreflightDocument(
        schema=SCHEMA, ready=ready(checks), target=dict(target),
        checks=[PreflightCheck(name=c.name, status=c.status, evidence=c.evidence, fix=c.fix, message=c.message,
                               title=c.title) for c in checks],
        errors=[dict(e) for e in evidence.get("errors") or []],
        timings={part: seconds for part, seconds in (evidence.get("timings") or {}).items()})


def preflight_hosts(request: PreflightRequest, hosts: Sequence[HostEntry],
                    make_executor: Callable[[HostEntry], Executor], *, parallel: int,
                    inventory: Inventory | None = None) -> list[PreflightHostResult]:
    """The same gate on many inventory hosts (one connection each, a bounded staggered pool):
    one item per host, in ``hosts`` order: ``host``, ``exit_code``, ``ready``, ``report``, ``error``."""
    def work(entry: HostEntry) -> PreflightHostResult:
        report = run_preflight(request, make_executor(entry), entry, local=False, inventory=inventory)
        return PreflightHostResult(entry.name, 0 if report.ready else 1, report.ready, report, None)

    def failed(entry: HostEntry, exc: BaseException, _seconds: float) -> PreflightHostResult:
        if not isinstance(exc, IntrospectError):
            exc = IntrospectError(f"internal error: {type(exc).__name__}: {exc}",
                                  hint="rerun with --debug and report the traceback", host=entry.name)
        return PreflightHostResult(entry.name, exc.exit_code, False, None, exc.as_dict())

    results = run_fleet(hosts, work, parallel=parallel, on_error=failed)
    return [r if isinstance(r, PreflightHostResult) else failed(r.item, r.error, r.seconds) for r in results]
