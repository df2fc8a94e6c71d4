"""The controller side of ``models``: model directories discovered on hosts, summarised.

One connection per host, one remote process per host (the shipped "discover" task),
every host on the bounded, staggered fleet runner. A host that cannot be reached is
its own result; the other hosts' listings are unaffected. :func:`summarize_model`
is pure, so listings are testable without a host.
"""

from __future__ import annotations

import datetime
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from introspect.client.fleet import DEFAULT_STAGGER_S, FleetMonitor, ItemFailure, run_fleet
from introspect.client.hub import first_message
from introspect.client.preload import preload
from introspect.errors import IntrospectError, RemoteError
from introspect.remote.contract import DEFAULT_FILES_TIMEOUT, as_dict, interpreter
from introspect.transport.base import Executor

if TYPE_CHECKING:
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
                     deadline: float = DEFAULT_FILES_TIMEOUT) -> dict[str, Any]:
    return {"roots": list(roots), "optional_roots": list(optional_roots), "max_depth": max_depth,
            "use_hf_scanner": use_hf_scanner, "hf_cache": hf_cache, "json_cap": json_cap,
            "deadline": deadline}


def discover_facts(executor: Executor, python: str, roots: list[str] | tuple[str, ...], *,
                   timeout: float = 90.0, **options: Any) -> dict[str, Any]:
    """The whole "discover" reply: models, roots, hf_cache, errors (one remote process)."""
    # The remote walk stops a little before our deadline so that it answers with what it found.
    request = discover_request(roots, deadline=max(1.0, timeout * 0.8), **options)
    for module in SUMMARY_MODULES:
        preload(module)  # while the host walks its roots; summarize_model needs them after the reply
    reply = executor.run_python(python, "discover", request, timeout=timeout)
    if not isinstance(reply.facts, dict):
        raise RemoteError(f"model discovery failed: {first_message(reply.errors)}",
                          hint="run with --debug to see the remote stderr", host=executor.label,
                          stage="discover")
    facts = dict(reply.facts)
    facts["errors"] = list(reply.errors)
    return facts


def discover(executor: Executor, python: str, roots: list[str] | tuple[str, ...], **options: Any) -> list[dict[str, Any]]:
    """Model entries under ``roots`` and in the host's HF cache (see remote/tasks/discover.py)."""
    return list(discover_facts(executor, python, roots, **options).get("models") or [])


# --------------------------------------------------------------------------- summary


def quantization_label(quant: Any) -> str | None:
    """``compressed-tensors 4-bit pack-quantized g32`` from architecture.quantization."""
    q = as_dict(quant)
    if not q:
        return None
    parts = [str(q.get("method") or "unknown")]
    if q.get("bits"):
        parts.append(f"{q['bits']}-bit")
    if q.get("format"):
        parts.append(str(q["format"]))
    if q.get("group_size"):
        parts.append(f"g{q['group_size']}")
    return " ".join(parts)


def model_name(entry: dict[str, Any]) -> str:
    """``org/name@main (0123abcd)`` for cache entries, the path otherwise."""
    if entry.get("repo_id"):
        commit = str(entry.get("commit") or "")
        rev = entry.get("revision") or commit[:12]
        suffix = f" ({commit[:8]})" if commit and not commit.startswith(str(rev)) else ""
        return f"{entry['repo_id']}@{rev}{suffix}"
    return str(entry.get("path"))


def _drafter(entry: dict[str, Any], config: Any) -> dict[str, Any] | None:
    remote = entry.get("drafter")
    if not isinstance(remote, dict):
        return None
    from introspect.analysis.architecture.speculative import describe_drafter

    described = describe_drafter({"path": entry.get("path"), "config": config}) if isinstance(config, dict) else None
    kind = (described or {}).get("kind")
    if not kind or kind == "unknown":
        signals = " ".join(map(str, remote.get("signals") or [])).lower()
        kind = next((k for k in ("dflash", "eagle3", "eagle", "mtp", "medusa") if k in signals), "drafter")
        if kind == "eagle" and "draft_vocab_size" in signals:
            kind = "eagle3"
    return {"kind": kind, "target": remote.get("target"), "target_key": remote.get("target_key"),
            "signals": remote.get("signals") or []}


def summarize_model(entry: dict[str, Any]) -> dict[str, Any]:
    """One listing row: family and type, layers, params (config estimate), quantization, size,
    tokenizer layout, drafter and target. Pure; never raises on a malformed entry."""
    entry = as_dict(entry)
    digest = as_dict(entry.get("digest"))
    config = entry.get("config")
    arch: dict[str, Any] = {}
    if isinstance(config, dict):
        from introspect.analysis.architecture.section import analyze_architecture

        path = entry.get("path")
        arch, _findings = analyze_architecture(config, config_path=f"{path}/config.json" if path else None)
    estimate = as_dict(as_dict(arch.get("params")).get("config_estimate"))
    model_type = arch.get("model_type") or digest.get("model_type")
    text_type = arch.get("text_model_type") or digest.get("text_model_type")
    tokenizer = as_dict(entry.get("tokenizer"))
    spec = as_dict(arch.get("speculative"))
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
        "architectures": arch.get("architectures") or digest.get("architectures") or [],
        "layers": arch.get("num_layers") or digest.get("num_layers"),
        "params_total": estimate.get("total"),
        "params_active": estimate.get("active"),
        "quantization": quantization_label(arch.get("quantization")) or digest.get("quant_method"),
        "size": entry.get("size"),
        "tokenizer": tokenizer.get("layout"),
        "tokenizer_class": tokenizer.get("class"),
        "drafter": _drafter(entry, config),
        "mtp_layers": spec.get("mtp_layers") or digest.get("mtp_layers") or 0,
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
    models: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
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
        with monitor.connection(job.name, closer=executor.close), executor:
            facts = discover_facts(executor, job.python, job.roots, optional_roots=job.optional_roots,
                                   timeout=options.timeout, max_depth=options.max_depth,
                                   use_hf_scanner=options.use_hf_scanner, hf_cache=options.hf_cache,
                                   json_cap=options.json_cap)
    except IntrospectError as exc:
        result.error = exc
        return result
    result.facts = facts
    result.models = [summarize_model(entry) for entry in facts.get("models") or []]
    result.warnings = [e for e in facts.get("errors") or [] if isinstance(e, dict)]
    return result


def _unexpected(job: HostJob, exc: BaseException, _seconds: float) -> HostResult:
    # A bug in one host's work is that host's error line, not a lost run.
    return HostResult(job, error=IntrospectError(f"internal error: {type(exc).__name__}: {exc}",
                                                 hint="rerun with --debug and report the traceback",
                                                 host=job.name, stage="discover"))


def discover_hosts(jobs: list[HostJob], make_executor: Callable[[HostJob], Executor], options: DiscoverOptions,
                   *, parallel: int, on_done: Callable[[HostResult], None] | None = None) -> list[HostResult]:
    """Every job at once on the shared fleet runner (bounded, staggered), results in job order.
    ``on_done(result)`` runs in the calling thread as each host finishes (a progress display)."""
    monitor = FleetMonitor(DEFAULT_STAGGER_S)

    def done(_index: int, job: HostJob, result: HostResult | ItemFailure[HostJob]) -> None:
        if on_done is not None:
            on_done(result if isinstance(result, HostResult) else _unexpected(job, result.error, result.seconds))

    results = run_fleet(jobs, lambda job: run_job(job, make_executor, options, monitor),
                        parallel=parallel, on_error=_unexpected, monitor=monitor, on_done=done)
    return [r if isinstance(r, HostResult) else _unexpected(r.item, r.error, r.seconds) for r in results]
