"""The controller side of ``probe``: one model directory on one target, to raw facts and a profile.

Over one connection: a hub id is resolved to its snapshot first, then the file
probe ("model"), the isolated tokenizer load ("tokenizer") and the isolated meta-device
build of the model's own code ("model_code") run as channels of
:func:`introspect.client.runner.run_channels`. A whole-run deadline closes the
connection when it passes (the remote watchdogs then stop their tasks); whatever
finished is kept. So does a signal (Ctrl-C, SIGTERM, SIGHUP): :class:`ProbeInterrupted` carries
the profile of what finished, which is never cached. Results come from the local cache when the
remote fingerprint says nothing changed.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from introspect.client.cache import ProbeCache, cache_key
from introspect.client.hub import is_repo_id, resolve_model
from introspect.client.preload import preload
from introspect.client.runner import (
    Channel,
    ChannelResult,
    ChannelsInterrupted,
    error_record,
    run_channels,
    target_of,
)
from introspect.errors import ConnectError, IntrospectError, ModelPathError, UsageError
from introspect.interrupts import Terminated, cause, describe
from introspect.remote.contract import (
    DEFAULT_FILES_TIMEOUT,
    DEFAULT_JSON_CAP,
    DEFAULT_MAX_HEADER,
    DEFAULT_MEMORY_LIMIT,
    DEFAULT_MODEL_CODE_TIMEOUT,
    DEFAULT_TOKENIZER_TIMEOUT,
    RAW_SCHEMA,
    ModelReply,
    ModelSections,
    RawFacts,
    TargetBlock,
    interpreter,
)
from introspect.remote.contract import (
    MODEL_SECTIONS as REMOTE_MODEL_SECTIONS,
)
from introspect.transport.base import Executor
from introspect.userconfig import (
    choose_remote_code,
    config_venv,
    inventory_remote_code,
    settings_block,
    target_names,
)

if TYPE_CHECKING:
    from introspect.documents.profile import ProfileDocument
    from introspect.inventory import HostEntry, Inventory

DEFAULT_DEADLINE_S = 300.0
PROFILE_MODULE = "introspect.analysis.profile"  # the aggregator: ~20 ms of imports, needed after the reply
# Sections of the model task's facts copied into the raw facts as they are.
MODEL_SECTIONS = (*REMOTE_MODEL_SECTIONS, "fingerprint")


@dataclasses.dataclass(frozen=True)
class ProbeOptions:
    """What the two remote tasks are asked (part of the cache key)."""

    model_path: str
    python: str = "python3"
    venv: str | None = None
    tokenizer_timeout: float = DEFAULT_TOKENIZER_TIMEOUT
    files_timeout: float = DEFAULT_FILES_TIMEOUT
    remote_code: bool = True
    load_tokenizer: bool = True
    json_cap: int = DEFAULT_JSON_CAP
    load_model_code: bool = True
    model_code_timeout: float = DEFAULT_MODEL_CODE_TIMEOUT
    max_header: int = DEFAULT_MAX_HEADER
    memory_limit: int = DEFAULT_MEMORY_LIMIT  # of each isolated task (address space, resident memory); 0: none


@dataclasses.dataclass(frozen=True)
class ProbeRequest:
    """What to probe and how, independent of where (one host, the local machine, a fleet)."""

    model: str
    venv: str | None = None
    python_exe: str | None = None
    timeout: float = DEFAULT_TOKENIZER_TIMEOUT
    files_timeout: float = DEFAULT_FILES_TIMEOUT
    no_remote_code: bool = False
    no_tokenizer: bool = False
    no_model_code: bool = False
    model_code_timeout: float = DEFAULT_MODEL_CODE_TIMEOUT
    max_json_bytes: int = DEFAULT_JSON_CAP
    hf_cache: str | None = None
    refresh: bool = False
    no_cache: bool = False
    deadline: float = DEFAULT_DEADLINE_S
    memory_limit: int = DEFAULT_MEMORY_LIMIT


@dataclasses.dataclass
class ProbeOutcome:
    code: int
    raw: RawFacts
    profile: dict[str, Any]
    error: IntrospectError | None = None  # why the run is incomplete (the CLI's error/fix lines)

    @property
    def document(self) -> ProfileDocument:
        """The profile, typed: ``introspect.profile/v1`` as its pydantic model (validated here)."""
        from introspect.documents.profile import ProfileDocument

        return ProfileDocument.model_validate(self.profile)

    def to_json(self) -> str:
        """The JSON that ``introspect probe --json`` prints for this profile (without its version stamp)."""
        return self.document.to_json()


class ProbeInterrupted(Terminated):
    """A signal stopped the probe. ``raw``: the facts gathered before it, with a ``fatal`` that
    names the signal; ``outcome``: their profile (set by :func:`probe_model`). Never cached."""

    def __init__(self, signum: int, raw: RawFacts) -> None:
        super().__init__(signum)
        self.raw = raw
        self.outcome: ProbeOutcome | None = None


# --------------------------------------------------------------------------- gather


def gather(executor: Executor, options: ProbeOptions, target: TargetBlock) -> RawFacts:
    """Raw facts (see docs/raw-facts.md). Connection errors before any fact was
    gathered propagate; anything later is recorded in ``raw["errors"]`` and
    ``raw["fatal"]`` so the caller can still report what was found."""
    raw = gather_unless(executor, options, target, None)
    assert raw is not None  # without a digest to match there is no early stop
    return raw


def gather_unless(executor: Executor, options: ProbeOptions, target: TargetBlock,
                  unless_digest: str | None) -> RawFacts | None:
    """:func:`gather`, with the model's fingerprint checked first in the same session when
    ``unless_digest`` (a cached entry's) is given: None when it still matches (nothing else ran)."""
    started = time.monotonic()
    raw: RawFacts = {"schema": RAW_SCHEMA, "target": target, "errors": [], "timings": {},
                           "fatal": None, "tokenizer_probe": None, "model_code_probe": None,
                           "options": {"remote_code": options.remote_code,
                                       "load_tokenizer": options.load_tokenizer,
                                       "load_model_code": options.load_model_code}}
    python = interpreter(options.python, options.venv)
    channels = [Channel("model", python, "model",
                        {"model_path": options.model_path, "json_cap": options.json_cap,
                         "max_header": options.max_header, "deadline": options.files_timeout},
                        options.files_timeout)]
    if options.load_tokenizer:
        channels.append(Channel("tokenizer", python, "tokenizer",
                                {"model_path": options.model_path, "trust_remote_code": options.remote_code,
                                 "sample": True, "json_cap": options.json_cap,
                                 "memory_limit": options.memory_limit}, options.tokenizer_timeout, isolate=True))
    if options.load_model_code:
        channels.append(Channel("model_code", python, "model_code",
                                {"model_path": options.model_path, "trust_remote_code": options.remote_code,
                                 "memory_limit": options.memory_limit},  # its resident-memory bound
                                options.model_code_timeout, isolate=True))
    if unless_digest:
        channels.insert(0, Channel("fingerprint", python, "fingerprint", {"model_path": options.model_path},
                                   options.files_timeout, stop_if_digest=unless_digest))
    try:
        results = run_channels(executor, channels)
    except ChannelsInterrupted as stop:
        raise ProbeInterrupted(stop.signum, _partial(stop, channels, raw, started)) from stop
    check = results.pop("fingerprint", None)
    if check is not None and check.reply is not None and (check.facts or {}).get("digest") == unless_digest:
        return None
    for result in results.values():
        _merge(result, raw)
    raw["timings"]["total"] = round(time.monotonic() - started, 3)
    return raw


def _partial(stop: ChannelsInterrupted, channels: Sequence[Channel], raw: RawFacts,
             started: float) -> RawFacts:
    """The raw facts of the channels that finished before the signal; each other channel is an
    error record saying the signal stopped it, and ``fatal`` names the signal (exit 128 + it)."""
    message, fix, kind = describe(stop.signum)
    host = raw["target"].get("host")
    for channel in channels:
        if channel.key == "fingerprint":
            continue  # the cache check: no fact of the model
        result = stop.results.get(channel.key)
        if result is not None:
            _merge(result, raw)
        else:
            raw["errors"].append({"probe": channel.task, "type": kind, "stage": channel.task, "hint": fix,
                                  "message": f"the {channel.task} probe did not finish: the run was {cause(stop.signum)}"})
    raw["fatal"] = {"type": kind, "exit_code": stop.exit_code, "host": host, "message": message, "hint": fix}
    raw["timings"]["total"] = round(time.monotonic() - started, 3)
    return raw


def _merge(result: ChannelResult, raw: RawFacts) -> None:
    """One channel's reply into ``raw``; a failed channel becomes an error record."""
    task = result.channel.task
    if result.error is not None:
        if not isinstance(result.error, IntrospectError):
            raise result.error  # a bug, not a remote failure: main reports it as one
        exc = result.error
        raw["errors"].append(error_record(task, exc))
        if isinstance(exc, ConnectError) or raw["fatal"] is None and task == "model":
            raw["fatal"] = exc.as_dict() | {"exit_code": exc.exit_code}
        return
    reply = result.reply
    assert reply is not None
    raw["timings"][task] = reply.seconds
    raw["errors"].extend(reply.errors)
    if reply.python:
        raw.setdefault("python", reply.python)
    if task == "model" and isinstance(reply.facts, dict):
        facts = cast(ModelReply, reply.facts)  # the frame's members were type-checked (transport/frames.py)
        raw.update(cast(ModelSections, {key: facts.get(key) for key in MODEL_SECTIONS}))
        raw["timings"].update({f"model.{k}": v for k, v in (facts.get("timings") or {}).items()})
    elif task in ("tokenizer", "model_code"):
        if task == "tokenizer":
            raw["tokenizer_probe"] = reply.facts
        else:
            raw["model_code_probe"] = reply.facts
        if reply.supervisor:
            raw["timings"][f"{task}.supervisor"] = reply.supervisor.get("seconds")
            # What the task was allowed and what it took (the largest resident set of its processes).
            raw.setdefault("resources", {})[task] = {key: reply.supervisor.get(key)
                                                     for key in ("peak_rss", "limits", "memory_limit")}


def gather_cached(executor: Executor, options: ProbeOptions, target: TargetBlock,
                  cache: ProbeCache | None, *, refresh: bool) -> RawFacts:
    """Raw facts, from the local cache when the remote fingerprint says nothing changed.

    One session either way: the fingerprint check goes first in the same batch as the
    probe, which the host runs only when the check fails (no entry: no check at all).
    """
    key = cache_key(target, options) if cache is not None else ""
    stored = cache.entry(key) if cache is not None and not refresh else None
    raw = gather_unless(executor, options, target, stored[0] if stored is not None else None)
    if raw is None:
        assert stored is not None
        cached = stored[1]
        fingerprint = cached.get("fingerprint")
        cached["cache"] = {"hit": True, "digest": fingerprint.get("digest") if fingerprint else None}
        return cached
    if cache is not None:
        cache.put(key, raw)
        raw["cache"] = {"hit": False}
    return raw


# --------------------------------------------------------------------------- one target


# PATH_MAX and NAME_MAX of Linux: a longer --model cannot name a directory on any host.
MAX_MODEL_PATH, MAX_NAME = 4096, 255


def model_argument(model: str, executor: Executor) -> str:
    """``--model`` checked before anything uses it; on the local executor a relative path is
    made absolute against the caller's cwd (the probe runs elsewhere, and transformers would
    read a bare ``tok`` as a hub id)."""
    if len(model) > MAX_MODEL_PATH or any(len(part.encode("utf-8", "replace")) > MAX_NAME
                                          for part in model.split("/")):
        raise UsageError(f"--model is {len(model)} characters long: longer than any path a host can have "
                         f"({MAX_MODEL_PATH}, {MAX_NAME} per component)", hint="pass the model directory's real path")
    if executor.target.scheme == "local" and not is_repo_id(model) and not os.path.isabs(model):
        return os.path.abspath(os.path.expanduser(model))
    return model


def probe_model(request: ProbeRequest, executor: Executor, entry: HostEntry | None = None,
                inventory: Inventory | None = None) -> ProbeOutcome:
    """Probe one target over one connection and build its profile."""
    venv, python_exe = request.venv, request.python_exe
    model = model_argument(request.model, executor)
    if entry is not None and not venv and not python_exe and entry.venvs:
        venv = entry.venvs[0].path  # the entry's first venv is the natural default
    if entry is not None and not venv and not python_exe:
        python_exe = entry.python  # ansible_python_interpreter / hosts.yaml python:
    venv = venv or (None if python_exe else config_venv(executor.target))  # the user config's `venv:`
    python_exe = python_exe or (None if venv else executor.default_python)
    remote_code = choose_remote_code(request.no_remote_code, inventory_remote_code(inventory, entry, venv),
                                     hosts=target_names(executor.target, entry), model=request.model)
    python = interpreter(python_exe, venv)
    with executor:
        resolved = None
        if is_repo_id(model):
            # An id like moonshotai/Kimi-K2.6@rev: find its snapshot in the host's HF cache first.
            model, resolved = resolve_model(executor, python, model, request.files_timeout,
                                            cache_dir=request.hf_cache)
        options = ProbeOptions(model_path=model, python=python_exe or "python3", venv=venv,
                               tokenizer_timeout=request.timeout, files_timeout=request.files_timeout,
                               remote_code=bool(remote_code.value), load_tokenizer=not request.no_tokenizer,
                               json_cap=request.max_json_bytes, load_model_code=not request.no_model_code,
                               model_code_timeout=request.model_code_timeout, memory_limit=request.memory_limit)
        preload(PROFILE_MODULE)  # while the channels run; the profile needs it only after them
        stopped = None
        try:
            raw = _gather_within(executor, options, target_of(executor, python, venv, model), request)
        except ProbeInterrupted as exc:  # what finished is profiled, then the signal goes on
            stopped, raw = exc, exc.raw
    if resolved is not None:
        raw["resolved"] = dict(resolved)
    raw["settings"] = settings_block(inventory, remote_code).to_dict()
    from introspect.analysis.profile import build_profile, exit_code

    profile = build_profile(raw)
    outcome = ProbeOutcome(exit_code(profile, raw), raw, profile, run_error(raw))
    if stopped is not None:
        stopped.outcome = outcome
        raise stopped
    return outcome


def _gather_within(executor: Executor, options: ProbeOptions, target: TargetBlock,
                   request: ProbeRequest) -> RawFacts:
    """gather_cached under the whole-run deadline: past it every channel is closed,
    which makes the remote watchdogs kill their tasks; whatever finished is kept."""
    cache = None if request.no_cache else ProbeCache()
    expired = threading.Event()
    def expire() -> None:
        expired.set()
        executor.close()

    timer = threading.Timer(request.deadline, expire)
    timer.daemon = True
    timer.start()
    try:
        raw = gather_cached(executor, options, target, cache, refresh=request.refresh)
    finally:
        timer.cancel()
    if expired.is_set():
        raw["fatal"] = {"type": "ProbeTimeout", "exit_code": 1, "host": target.get("host"),
                        "message": f"the run passed its {request.deadline:g} s deadline; "
                                   "remote probes were stopped",
                        "hint": "raise --deadline (and --timeout for slow tokenizer loads)"}
    return raw


def run_error(raw: RawFacts) -> IntrospectError | None:
    """Why a run could not complete (a fatal error, or a model path that is no model dir)."""
    fatal = raw.get("fatal")
    if fatal:
        return IntrospectError(str(fatal.get("message")), hint=fatal.get("hint"), host=fatal.get("host") or None)
    files = raw.get("files")
    status = files.get("status") if files else None
    if status == "permission-denied":
        path = str(raw["target"].get("model_path"))
        return ModelPathError(f"model path {path!r}: permission denied: the probe's user cannot list or enter it",
                              hint=f"ls -ld {shlex.quote(path)}  # the probe's user needs read and execute (r-x) "
                                   "on it and on every directory above it")
    if status and status != "ok":
        return ModelPathError(f"model path {raw['target'].get('model_path')!r}: {status}",
                              hint="pass --model the directory that holds config.json")
    return None
