"""The controller side of ``models``: model directories discovered on hosts, summarised.

One connection per host, one remote process per host (the shipped "discover" task),
every host on the bounded fleet runner (logins paced per sshd). A host that cannot be reached is
its own result; the other hosts' listings are unaffected. :func:`summarize_model`
is pure, so listings are testable without a host.
"""

from __future__ import annotations

import contextlib
import datetime
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict, cast

from introspect.client.fleet import FleetMonitor, ItemFailure, run_fleet
from introspect.client.fleet_pacing import job_endpoint
from introspect.client.hub import first_message
from introspect.client.preload import preload
from introspect.errors import IntrospectError, RemoteError
from introspect.remote.contract import (
    DEFAULT_FILES_TIMEOUT,
    DiscoverReply,
    DiscoverRequest,
    ErrorRecord,
    JSONObject,
    as_dict,
    interpreter,
)
from introspect.transport.base import Executor

if TYPE_CHECKING:
    from introspect.documents.profile_architecture import Architecture, Quantization
    from introspect.inventory import HostEntry, Inventory


# The aggregator's modules that a listing row needs, once a host has answered.
SUMMARY_MODULES = ("introspect.analysis.architecture.section", "introspect.analysis.architecture.speculative")
DEFAULT_ROOTS = ("/root/models", "/data", "~/models")
DEFAULT_MAX_DEPTH = 4
DEFAULT_SHIP_CAP = 256 * 1024  # a raw config.json above this stays on the host (the digest still comes)
DEFAULT_TIMEOUT = 90.0


# --------------------------------------------------------------------------- discover


def discover_request(roots: list[str] | tuple[str, ...], *, optional_roots: tuple[str, ...] = (),
                     max_depth: int = DEFAULT_MAX_DEPTH, use_hf_scanner: bool = True,
                     hf_cache: str | None = None, json_cap: int = DEFAULT_SHIP_CAP,
                     deadline: float = DEFAULT_FILES_TIMEOUT) -> DiscoverRequest:
    return {"roots": list(roots), "optional_roots": list(optional_roots), "max_depth": max_depth,
            "use_hf_scanner": use_hf_scanner, "hf_cache": hf_cache, "json_cap": json_cap,
            "deadline": deadline}


def discover_facts(executor: Executor, python: str, roots: list[str] | tuple[str, ...], *,
                   timeout: float = 90.0, **options: Any) -> DiscoverReply:
    """The whole "discover" reply: models, roots, hf_cache, errors (one remote process)."""
    # The remote walk stops a little before our deadline so that it answers with what it found.
    request = discover_request(roots, deadline=max(1.0, timeout * 0.8), **options)
    for module in SUMMARY_MODULES:
        preload(module)  # while the host walks its roots; summarize_model needs them after the reply
    reply = executor.run_python(python, "discover", request.copy(), timeout=timeout)
    if not isinstance(reply.facts, dict):
        raise RemoteError(f"model discovery failed: {first_message(reply.errors)}",
                          hint="run with --debug to see the remote stderr", host=executor.label,
                          stage="discover")
    facts = cast(DiscoverReply, dict(reply.facts))  # the frame's members were type-checked (transport/frames.py)
    facts["errors"] = list(reply.errors)
    return facts


def discover(executor: Executor, python: str, roots: list[str] | tuple[str, ...],
             **options: Any) -> list[DiscoveredModel]:
    """Model entries under ``roots`` and in the host's HF cache (see remote/tasks/discover.py)."""
    return models_of(discover_facts(executor, python, roots, **options))


def models_of(facts: DiscoverReply) -> list[DiscoveredModel]:
    """The reply's model entries, read as :class:`DiscoveredModel` (the keys the controller uses)."""
    return cast("list[DiscoveredModel]", list(facts.get("models") or []))


# --------------------------------------------------------------------------- summary


# What a model directory's tokenizer and weights files are (remote/facts/model/model_summary.py).
TokenizerLayout = TypedDict("TokenizerLayout", {"layout": str, "formats": list[str], "remote_code": bool,
                                                "class": "str | None"}, total=False)


class WeightsLayout(TypedDict):
    format: str | None
    files: int
    index: str | None


class RemoteDrafter(TypedDict, total=False):
    """A drafter's signals in its config.json, as the remote side named them."""

    signals: list[str]
    target: str | None
    target_key: str | None


class DiscoveredModel(TypedDict, total=False):
    """One model directory as the remote "discover" task reports it (model_summary.describe_model, and
    the hub fields of remote/facts/model/discovery.py); the keys the controller reads."""

    path: str
    real_path: str | None
    source: str
    root: str | None
    repo_id: str | None
    commit: str | None
    refs: list[str]
    revision: str | None
    aliases: list[str]
    size: int | None
    file_count: int
    size_truncated: bool
    config: JSONObject | None  # config.json as read: JSON from outside, shipped when small enough
    config_size: int | None
    config_error: object
    digest: JSONObject  # a few of config.json's values (model_type, num_layers...), copied as found
    tokenizer: TokenizerLayout
    weights: WeightsLayout
    drafter: RemoteDrafter | None
    modified: float | None
    accessed: float | None


class DrafterRow(TypedDict):
    """A listing row's drafter: its kind and the target model it names."""

    kind: str
    target: str | None
    target_key: str | None
    signals: list[str]


class ModelRow(TypedDict):
    """One row of ``introspect models``: a discovered directory, summarised (:func:`summarize_model`)."""

    name: str
    path: str | None
    source: str | None
    repo_id: str | None
    revision: str | None
    commit: str | None
    model_type: str | None
    text_model_type: str | None
    family: str | None
    architectures: list[str]
    layers: int | None
    params_total: int | None
    params_active: int | None
    quantization: str | None
    size: int | None
    tokenizer: str | None
    tokenizer_class: str | None
    drafter: DrafterRow | None
    mtp_layers: int
    aliases: list[str]
    config_error: object
    modified: str | None  # ISO-8601 UTC
    accessed: str | None


def quantization_label(quant: Quantization | None) -> str | None:
    """``compressed-tensors 4-bit pack-quantized g32`` from architecture.quantization."""
    if quant is None:
        return None
    parts = [quant.method or "unknown"]
    if quant.bits:
        parts.append(f"{quant.bits}-bit")
    if quant.format:
        parts.append(quant.format)
    if quant.group_size:
        parts.append(f"g{quant.group_size}")
    return " ".join(parts)


def model_name(entry: DiscoveredModel) -> str:
    """``org/name@main (0123abcd)`` for cache entries, the path otherwise."""
    if entry.get("repo_id"):
        commit = str(entry.get("commit") or "")
        rev = entry.get("revision") or commit[:12]
        suffix = f" ({commit[:8]})" if commit and not commit.startswith(str(rev)) else ""
        return f"{entry['repo_id']}@{rev}{suffix}"
    return str(entry.get("path"))


def _drafter(entry: DiscoveredModel, config: object) -> DrafterRow | None:
    remote = entry.get("drafter")
    if not isinstance(remote, dict):
        return None
    from introspect.analysis.architecture.speculative import describe_drafter

    described = describe_drafter({"path": entry.get("path"), "config": config}) if isinstance(config, dict) else None
    kind = described.kind if described is not None else None
    if not kind or kind == "unknown":
        signals = " ".join(map(str, remote.get("signals") or [])).lower()
        kind = next((k for k in ("dflash", "eagle3", "eagle", "mtp", "medusa") if k in signals), "drafter")
        if kind == "eagle" and "draft_vocab_size" in signals:
            kind = "eagle3"
    return {"kind": kind, "target": remote.get("target"), "target_key": remote.get("target_key"),
            "signals": remote.get("signals") or []}


def summarize_model(entry: DiscoveredModel) -> ModelRow:
    """One listing row: family and type, layers, params (config estimate), quantization, size,
    tokenizer layout, drafter and target. Pure; never raises on a malformed entry."""
    entry = cast(DiscoveredModel, as_dict(entry))  # a malformed entry reads as an empty one
    digest = as_dict(entry.get("digest"))
    config = entry.get("config")
    arch: Architecture | None = None
    if isinstance(config, dict):
        from introspect.analysis.architecture.section import architecture_section

        path = entry.get("path")
        arch = architecture_section(config, config_path=f"{path}/config.json" if path else None)[0]
    estimate = arch.params.config_estimate if arch else None
    model_type = (arch.model_type if arch else None) or digest.get("model_type")
    text_type = (arch.text_model_type if arch else None) or digest.get("text_model_type")
    tokenizer = as_dict(entry.get("tokenizer"))
    return {
        "name": model_name(entry),
        "path": entry.get("path"),
        "source": entry.get("source"),
        "repo_id": entry.get("repo_id"),
        "revision": entry.get("revision"),
        "commit": entry.get("commit"),
        "model_type": model_type,
        "text_model_type": text_type,
        "family": text_type if text_type and text_type != model_type else model_type,
        "architectures": (arch.architectures if arch else None) or digest.get("architectures") or [],
        "layers": (arch.num_layers if arch else None) or digest.get("num_layers"),
        "params_total": estimate.total if estimate else None,
        "params_active": estimate.active if estimate else None,
        "quantization": quantization_label(arch.quantization if arch else None) or digest.get("quant_method"),
        "size": entry.get("size"),
        "tokenizer": tokenizer.get("layout"),
        "tokenizer_class": tokenizer.get("class"),
        "drafter": _drafter(entry, config),
        "mtp_layers": (arch.speculative.mtp_layers if arch else None) or digest.get("mtp_layers") or 0,
        "aliases": list(entry.get("aliases") or []),
        "config_error": entry.get("config_error"),
        "modified": iso_time(entry.get("modified")),
        "accessed": iso_time(entry.get("accessed")),
    }


def iso_time(epoch: Any) -> str | None:
    """Epoch seconds from the host as ``2026-01-31T12:00:00Z`` (UTC), None when there are none."""
    if not isinstance(epoch, (int, float)) or isinstance(epoch, bool):
        return None
    try:
        return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):  # a host clock or a file time out of range
        return None



# --------------------------------------------------------------------------- hosts


@dataclass
class HostJob:
    name: str  # the --host value or inventory entry name ("local" for this machine)
    host: str | None  # what to connect to (None: this machine)
    entry: HostEntry | None
    python: str
    roots: tuple[str, ...]
    optional_roots: tuple[str, ...]


@dataclass
class HostResult:
    job: HostJob
    models: list[ModelRow] = field(default_factory=list)
    warnings: list[ErrorRecord] = field(default_factory=list)
    facts: DiscoverReply = field(default_factory=lambda: DiscoverReply())
    error: IntrospectError | None = None


@dataclass(frozen=True)
class DiscoverOptions:
    max_depth: int = DEFAULT_MAX_DEPTH
    use_hf_scanner: bool = True
    hf_cache: str | None = None
    json_cap: int = DEFAULT_SHIP_CAP
    timeout: float = DEFAULT_TIMEOUT


def _python_for(entry: HostEntry | None, venv: str | None, python_exe: str | None) -> str:
    # A venv of the host entry likely has huggingface_hub (transformers brings it): its scanner is used.
    if venv or python_exe:
        return interpreter(python_exe, venv)
    if entry is not None and entry.venvs:
        return entry.venvs[0].python
    return (entry.python if entry is not None else None) or "python3"


def local_python() -> str:
    """This machine's default: the interpreter introspect runs in (its huggingface_hub, if any)."""
    return sys.executable or "python3"


def _roots_for(entry: HostEntry | None, roots: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(roots reported when missing, roots skipped quietly when missing)."""
    if roots:
        return roots, ()
    if entry is not None and entry.roots:
        return entry.roots, ()
    return (), DEFAULT_ROOTS


def plan_jobs(host: str | None, inventory: Inventory | None, roots: tuple[str, ...],
              venv: str | None, python_exe: str | None) -> list[HostJob]:
    """One job per host: ``host`` alone, every inventory host (an inventory without ``host``),
    or this machine."""
    if host or inventory is None:
        entry = next((h for h in inventory.hosts if h.name == host), None) if inventory and host else None
        required, optional = _roots_for(entry, roots)
        python = _python_for(entry, venv, python_exe) if host or venv or python_exe else local_python()
        return [HostJob(host or "local", host, entry, python, required, optional)]
    jobs = []
    for entry in inventory.hosts:
        required, optional = _roots_for(entry, roots)
        jobs.append(HostJob(entry.name, entry.name, entry, _python_for(entry, venv, python_exe), required,
                            optional))
    return jobs


def run_job(job: HostJob, make_executor: Callable[[HostJob], Executor], options: DiscoverOptions,
            monitor: FleetMonitor) -> HostResult:
    """Discover one host over one connection. Its IntrospectError is kept in the result, never
    raised: one host's failure must not touch the others."""
    result = HostResult(job)
    try:
        executor = make_executor(job)
        with monitor.connection(job.name, closer=executor.close), contextlib.closing(executor):
            monitor.login(job_endpoint(job.entry, job.host), executor.connect)  # paced per sshd
            facts = discover_facts(executor, job.python, job.roots, optional_roots=job.optional_roots,
                                   timeout=options.timeout, max_depth=options.max_depth,
                                   use_hf_scanner=options.use_hf_scanner, hf_cache=options.hf_cache,
                                   json_cap=options.json_cap)
    except IntrospectError as exc:
        result.error = exc
        return result
    result.facts = facts
    result.models = [summarize_model(entry) for entry in models_of(facts)]
    result.warnings = [e for e in facts.get("errors") or [] if isinstance(e, dict)]
    return result


def _unexpected(job: HostJob, exc: BaseException, _seconds: float) -> HostResult:
    # A bug in one host's work is that host's error line, not a lost run.
    return HostResult(job, error=IntrospectError(f"internal error: {type(exc).__name__}: {exc}",
                                                 hint="rerun with --debug and report the traceback",
                                                 host=job.name, stage="discover"))


def discover_hosts(jobs: list[HostJob], make_executor: Callable[[HostJob], Executor], options: DiscoverOptions,
                   *, parallel: int, on_done: Callable[[HostResult], None] | None = None) -> list[HostResult]:
    """Every job at once on the shared fleet runner (bounded, logins paced per sshd), results in job order.
    ``on_done(result)`` runs in the calling thread as each host finishes (a progress display)."""
    monitor = FleetMonitor(0.0)  # no global start rate: each login is paced on its sshd (fleet_pacing.py)

    def done(_index: int, job: HostJob, result: HostResult | ItemFailure[HostJob]) -> None:
        if on_done is not None:
            on_done(result if isinstance(result, HostResult) else _unexpected(job, result.error, result.seconds))

    results = run_fleet(jobs, lambda job: run_job(job, make_executor, options, monitor),
                        parallel=parallel, on_error=_unexpected, monitor=monitor, on_done=done)
    return [r if isinstance(r, HostResult) else _unexpected(r.item, r.error, r.seconds) for r in results]
