"""``introspect probe`` and ``introspect profile``."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from introspect.analysis.profile import build_profile, exit_code
from introspect.cache import ProbeCache, cache_key
from introspect.cli.connect import (
    ConnectionFlags,
    connection_options,
    executor_for,
    known_hosts_for,
    load_inventory_for,
)
from introspect.errors import InputError, IntrospectError, ModelPathError, UsageError
from introspect.fleet import FleetMonitor, run_fleet
from introspect.models import is_repo_id, resolve_model, snapshot_remote_code_finding
from introspect.probe import ProbeOptions, gather, interpreter, target_of
from introspect.transport.base import Executor

if TYPE_CHECKING:
    from introspect.inventory import HostEntry


def write_json(path: str, data: Any) -> None:
    """Write atomically, so a reader never sees half a profile."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, target)


def emit(profile: dict[str, Any], *, as_json: bool, output: str | None) -> None:
    if output:
        write_json(output, profile)
    if as_json:
        click.echo(json.dumps(profile, indent=2))
    else:
        from introspect.cli.render import print_report  # rich only for the human report

        print_report(profile)


DEFAULT_DEADLINE_S = 300.0


@dataclasses.dataclass(frozen=True)
class ProbeSettings:
    """What to probe and how, independent of where (one host, the local machine, a fleet)."""

    model: str
    venv: str | None
    python_exe: str | None
    timeout: float
    files_timeout: float
    no_remote_code: bool
    no_tokenizer: bool
    max_json_bytes: int
    hf_cache: str | None
    refresh: bool
    no_cache: bool
    deadline: float


@dataclasses.dataclass
class ProbeOutcome:
    code: int
    raw: dict[str, Any]
    profile: dict[str, Any]


def probe_target(settings: ProbeSettings, executor: Executor, entry: HostEntry | None) -> ProbeOutcome:
    """Probe one target over one connection and build its profile."""
    venv, python_exe, model = settings.venv, settings.python_exe, settings.model
    if entry is not None and not venv and not python_exe and entry.venvs:
        venv = entry.venvs[0].path  # the entry's first venv is the natural default
    remote_code = not settings.no_remote_code and (entry.remote_code if entry else True)
    if entry is not None and venv:
        remote_code = remote_code and all(v.remote_code for v in entry.venvs if v.path == venv)
    python = interpreter(python_exe, venv)
    with executor:
        resolved = None
        if is_repo_id(model):
            # An id like moonshotai/Kimi-K2.6@rev: find its snapshot in the host's HF cache first.
            model, resolved = resolve_model(executor, python, model, settings.files_timeout,
                                            cache_dir=settings.hf_cache)
        options = ProbeOptions(model_path=model, python=python_exe or "python3", venv=venv,
                               tokenizer_timeout=settings.timeout, files_timeout=settings.files_timeout,
                               remote_code=remote_code, load_tokenizer=not settings.no_tokenizer,
                               json_cap=settings.max_json_bytes)
        target = target_of(executor, python, venv, model)
        cache = None if settings.no_cache else ProbeCache()
        # The whole-run deadline: past it every channel is closed, which makes the remote
        # watchdogs kill their tasks; whatever finished is kept.
        expired = threading.Event()
        timer = threading.Timer(settings.deadline, lambda: (expired.set(), executor.close()))
        timer.daemon = True
        timer.start()
        try:
            raw = gather_cached(executor, options, target, cache, refresh=settings.refresh)
        finally:
            timer.cancel()
        if expired.is_set():
            raw["fatal"] = {"type": "ProbeTimeout", "exit_code": 1, "host": target["host"],
                            "message": f"the run passed its {settings.deadline:g} s deadline; "
                                       "remote probes were stopped",
                            "hint": "raise --deadline (and --timeout for slow tokenizer loads)"}
    if resolved is not None:
        raw["resolved"] = resolved
    profile = build_profile(raw)
    snapshot_finding = snapshot_remote_code_finding(raw)
    if snapshot_finding:
        profile["findings"].append(snapshot_finding)
    return ProbeOutcome(exit_code(profile, raw), raw, profile)


@click.command("probe")
@click.option("--model", "-m", required=True, help="Model directory on the target, or a hub id ORG/NAME[@REV].")
@click.option("--venv", help="Virtualenv on the target whose bin/python runs the probe.")
@click.option("--python", "python_exe", help="Interpreter on the target (default python3).")
@click.option("--json", "as_json", is_flag=True, help="Print the profile as JSON on stdout.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Also write the profile JSON here.")
@click.option("--save-raw", type=click.Path(dir_okay=False),
              help="Write the raw facts here (re-aggregate later with `introspect profile`).")
@click.option("--timeout", type=float, default=120.0, show_default=True,
              help="Seconds for the tokenizer load (killed with its process group after that).")
@click.option("--files-timeout", type=float, default=60.0, show_default=True,
              help="Seconds for the file probes (config, tokenizer files, safetensors headers).")
@click.option("--no-remote-code", is_flag=True, help="Never run the model's own code (trust_remote_code).")
@click.option("--no-tokenizer", is_flag=True, help="Skip loading the tokenizer; facts come from the files.")
@click.option("--max-json-bytes", type=int, default=16 * 1024 * 1024, show_default=True,
              help="Refuse JSON files above this size.")
@click.option("--hf-cache", help="HF hub cache dir on the target for --model ORG/NAME[@REV] "
              "(default: HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub there).")
@click.option("--refresh", is_flag=True, help="Ignore the local result cache and probe afresh.")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the local result cache.")
@click.option("--deadline", type=click.FloatRange(min=1), default=DEFAULT_DEADLINE_S, show_default=True,
              help="Seconds for the whole run on one host; past it remote probes are stopped.")
@click.option("--all-hosts", is_flag=True, help="Fleet mode: probe the model on every inventory host.")
@click.option("--only", multiple=True, help="Fleet mode: these inventory hosts (repeat or comma-separate).")
@click.option("--tags", multiple=True, help="Fleet mode: inventory hosts with one of these tags.")
@click.option("--parallel", type=click.IntRange(1, 1024), default=None,
              help="Fleet mode: hosts probed at once (default: the inventory's, 8).")
@click.option("--emit-drafter-config", "emit_drafter", nargs=2,
              type=(click.Choice(("dflash", "eagle3")), click.Path(dir_okay=False)),
              help="Also write a DFlash or EAGLE-3 drafter config skeleton for this target: KIND FILE.")
@connection_options
def probe(as_json: bool, output: str | None, save_raw: str | None, all_hosts: bool, only: tuple[str, ...],
          tags: tuple[str, ...], parallel: int | None, emit_drafter: tuple[str, str] | None, **kwargs: Any) -> int:
    """Profile a model directory: architecture, experts, tokenizer, chat template, venv, engines, GPUs, plan."""
    flags = ConnectionFlags.from_kwargs(kwargs)
    settings = ProbeSettings(**kwargs)
    if all_hosts or only or tags:
        if emit_drafter:
            raise UsageError("--emit-drafter-config takes one target", hint="probe one host, or drop the flag")
        return probe_fleet(settings, flags, only, tags, parallel, as_json=as_json, output=output)
    inventory = load_inventory_for(flags.hosts_file) if flags.host else None
    executor, entry = executor_for(flags, inventory)
    outcome = probe_target(settings, executor, entry)
    if save_raw:
        write_json(save_raw, outcome.raw)
    if emit_drafter:
        from introspect.cli.cmd_plan import write_drafter_config

        write_drafter_config(outcome.profile, emit_drafter[0], emit_drafter[1])
    emit(outcome.profile, as_json=as_json, output=output)
    _report_fatal(outcome.raw, outcome.profile)
    return outcome.code


def probe_fleet(settings: ProbeSettings, flags: ConnectionFlags, only: tuple[str, ...], tags: tuple[str, ...],
                parallel: int | None, *, as_json: bool, output: str | None) -> int:
    """The same probe on many inventory hosts: one connection each, a bounded staggered pool."""
    from introspect.cli.render import print_report
    from introspect.inventory import InventoryError, select_hosts

    inventory = load_inventory_for(flags.hosts_file, required=True)
    assert inventory is not None
    try:
        hosts = select_hosts(inventory, [n for o in only for n in o.split(",") if n],
                             [t for g in tags for t in g.split(",") if t])
    except InventoryError as exc:
        raise UsageError(str(exc), hint="check --only/--tags against the inventory") from None
    known_hosts = known_hosts_for(flags, inventory)  # parsed once for the whole fleet
    monitor = FleetMonitor()

    def work(entry: HostEntry) -> dict[str, Any]:
        executor, _ = executor_for(dataclasses.replace(flags, host=entry.name), inventory, known_hosts)
        with monitor.connection(entry.name, closer=executor.close):
            outcome = probe_target(settings, executor, entry)
        return {"host": entry.name, "exit_code": outcome.code, "profile": outcome.profile,
                "error": outcome.raw.get("fatal")}

    def failed(entry: HostEntry, exc: BaseException, _seconds: float) -> dict[str, Any]:
        code = exc.exit_code if isinstance(exc, IntrospectError) else 1
        error = exc.as_dict() if isinstance(exc, IntrospectError) else {"type": type(exc).__name__,
                                                                        "message": str(exc), "hint": None}
        return {"host": entry.name, "exit_code": code, "profile": None, "error": error}

    results = run_fleet(hosts, work, parallel=parallel or inventory.defaults.parallel, on_error=failed,
                        monitor=monitor)
    document = {"schema": "introspect.fleet-profiles/v1", "model": settings.model, "hosts": results,
                "fleet": monitor.stats()}
    if output:
        write_json(output, document)
    if as_json:
        click.echo(json.dumps(document, indent=2))
    else:
        for item in results:
            click.echo(f"\n=== {item['host']} (exit {item['exit_code']}) ===")
            if item["profile"] is not None:
                print_report(item["profile"])
    for item in results:
        if item["error"]:
            click.echo(f"error: {item['host']}: {item['error'].get('message')}", err=True)
            if item["error"].get("hint"):
                click.echo(f"fix: {item['error']['hint']}", err=True)
    return max((int(item["exit_code"]) for item in results), default=0)


def gather_cached(executor: Executor, options: ProbeOptions, target: dict[str, Any],
                  cache: ProbeCache | None, *, refresh: bool) -> dict[str, Any]:
    """Raw facts, from the local cache when the remote fingerprint says nothing changed
    (one round trip), else gathered afresh and stored."""
    key = cache_key(target, dataclasses.asdict(options)) if cache is not None else ""
    if cache is not None and not refresh:
        try:
            stamp = executor.run_python(target["python"], "fingerprint", {"model_path": options.model_path},
                                        timeout=options.files_timeout)
            cached = cache.get(key, (stamp.facts or {}).get("digest"))
        except IntrospectError:
            cached = None  # the full probe below reports whatever is wrong
        if cached is not None:
            cached["cache"] = {"hit": True, "digest": cached.get("fingerprint", {}).get("digest")}
            return cached
    raw = gather(executor, options, target)
    if cache is not None:
        cache.put(key, raw)
        raw["cache"] = {"hit": False}
    return raw


def _report_fatal(raw: dict[str, Any], profile: dict[str, Any]) -> None:
    """The one-line error (on stderr) for runs that could not complete."""
    fatal = raw.get("fatal")
    if fatal:
        click.echo(f"error: {fatal.get('host') or ''}{': ' if fatal.get('host') else ''}"
                   f"{fatal.get('message')}", err=True)
        if fatal.get("hint"):
            click.echo(f"fix: {fatal['hint']}", err=True)
        return
    status = (raw.get("files") or {}).get("status")
    if status and status != "ok":
        err = ModelPathError(f"model path {raw['target'].get('model_path')!r}: {status}",
                             hint="pass --model the directory that holds config.json")
        click.echo(f"error: {err.message}", err=True)
        click.echo(f"fix: {err.hint}", err=True)


@click.command("profile")
@click.argument("raw_file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--json", "as_json", is_flag=True, help="Print the profile as JSON on stdout.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Also write the profile JSON here.")
def profile_cmd(raw_file: str, as_json: bool, output: str | None) -> int:
    """Rebuild a profile from saved raw facts (`probe --save-raw`), without any host."""
    try:
        text = sys.stdin.read() if raw_file == "-" else Path(raw_file).read_text(encoding="utf-8")
        raw = json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"cannot read raw facts from {raw_file}: {exc}",
                         hint="pass a file written by `introspect probe --save-raw`") from None
    if not isinstance(raw, dict) or raw.get("schema") != "introspect.raw/v1":
        raise InputError(f"{raw_file} is not an introspect raw-facts file",
                         hint="pass a file written by `introspect probe --save-raw`")
    profile = build_profile(raw)
    emit(profile, as_json=as_json, output=output)
    return exit_code(profile, raw)
