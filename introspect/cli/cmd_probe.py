"""``introspect probe`` and ``introspect profile``."""

from __future__ import annotations

import contextlib
import errno
import os
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from introspect.api import fatal_input
from introspect.cli import help_examples
from introspect.cli.connect import (
    ConnectionFlags,
    check_output_path,
    connection_options,
    entry_executors,
    executor_for,
    fleet_known_hosts,
    load_inventory_for,
    select_fleet,
)
from introspect.cli.json_stream import chunks
from introspect.cli.jsonout import echo_json, error_of, stamped, with_error
from introspect.cli.options import BYTE_SIZE, HostSelection, fleet_options
from introspect.cli.outcome import Finished, Notice, combined, notice
from introspect.cli.progress import Phases, host_rows
from introspect.cli.safe_text import one_line
from introspect.cli.session import session
from introspect.client.documents import dumps, read_document
from introspect.client.model import DEFAULT_DEADLINE_S, ProbeInterrupted, ProbeRequest, probe_model
from introspect.client.probe_fleet import FleetProbeInterrupted, probe_hosts
from introspect.errors import EXIT_FINDINGS, IntrospectError, UsageError
from introspect.interrupts import describe
from introspect.redact import scrub_document
from introspect.remote.contract import (
    DEFAULT_FILES_TIMEOUT,
    DEFAULT_JSON_CAP,
    DEFAULT_MEMORY_LIMIT,
    DEFAULT_MODEL_CODE_TIMEOUT,
    DEFAULT_TOKENIZER_TIMEOUT,
    RAW_SCHEMA,
    JSONObject,
)

if TYPE_CHECKING:
    from introspect.documents.profile import ProfileDocument


def write_json(path: str, data: Any, hosts: Sequence[Any] | None = None) -> None:
    """Write atomically, so a reader never sees half a profile (and a failed write leaves nothing).
    ``hosts``: the document's ``hosts``, written one at a time (cli/json_stream.py)."""
    target = Path(path).expanduser()
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        with tmp.open("w", encoding="utf-8") as out:
            out.writelines(chunks(data, "hosts", hosts) if hosts is not None else (dumps(data),))
            out.write("\n")
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}", hint=_write_hint(target, exc)) from None


def _write_hint(target: Path, exc: OSError) -> str:
    where = shlex.quote(str(target.parent))
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"df -h {where}  # no space left there: free some, or write the file elsewhere"
    return f"ls -ld {where}  # the directory must exist and be writable; or write the file elsewhere"


def saved(path: str, data: Any, option: str, hosts: Sequence[Any] | None = None) -> Notice | None:
    """Write ``path``; a failure is an error notice (exit 1), never a lost result: the caller
    still prints the profile it computed."""
    try:
        write_json(path, data, hosts)
    except IntrospectError as exc:
        return Notice(f"{option}: {exc.message}; the result was printed but not saved", exc.hint,
                      kind="OutputNotWritten")
    return None


def emit(profile: JSONObject, *, as_json: bool, output: str | None, code: int = 0,
         failed: tuple[Notice, ...] = ()) -> tuple[Notice, ...]:
    """Write ``--output``, then print the profile (the JSON written and printed: as ``build_profile``
    made it, or a cache entry or RAW.json of an older run) whatever became of the files (``failed``: the
    writes that already failed). A failed write is an ``error`` member of the printed document
    (unless it has one; ``code``: the run's exit code before it) and one of the notices returned."""
    profile = scrub_document(profile)  # the report too (a cache entry or RAW.json written before masking)
    document = stamped(profile)
    notices = (*failed, *filter(None, [saved(output, document, "--output") if output else None]))
    if as_json:
        echo_json(with_error(document, notices, max(code, EXIT_FINDINGS)))
    elif not session().quiet:
        from introspect.cli.render import print_report  # rich only for the human report

        print_report(profile)
    return notices


@click.command("probe", epilog=help_examples.PROBE)
@click.option("--model", "-m", required=True, help="Model directory on the target, or a hub id ORG/NAME[@REV].")
@click.option("--venv", help="Virtualenv on the target whose bin/python runs the probe.")
@click.option("--python", "python_exe", help="Interpreter on the target (default python3).")
@click.option("--json", "as_json", is_flag=True, help="Print the profile as JSON on stdout.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Also write the profile JSON here.")
@click.option("--save-raw", type=click.Path(dir_okay=False),
              help="Write the raw facts here (re-aggregate later with `introspect profile`).")
@click.option("--timeout", type=float, default=DEFAULT_TOKENIZER_TIMEOUT, show_default=True,
              help="Seconds for the tokenizer load (killed with its process group after that).")
@click.option("--files-timeout", type=float, default=DEFAULT_FILES_TIMEOUT, show_default=True,
              help="Seconds for the file probes (config, tokenizer files, safetensors headers).")
@click.option("--no-remote-code", is_flag=True, help="Never run the model's own code (trust_remote_code).")
@click.option("--no-tokenizer", is_flag=True, help="Skip loading the tokenizer; facts come from the files.")
@click.option("--no-model-code", is_flag=True,
              help="Skip building the model from its code on the meta device (the code witness).")
@click.option("--model-code-timeout", type=float, default=DEFAULT_MODEL_CODE_TIMEOUT, show_default=True,
              help="Seconds for the model-code build (killed with its process group after that).")
@click.option("--max-json-bytes", type=BYTE_SIZE, default=DEFAULT_JSON_CAP, show_default=True,
              help="Refuse JSON files above this size (64MB, 1GiB or bytes); the weights' index "
                   "has its own, larger cap.")
@click.option("--memory-limit", type=BYTE_SIZE, default=DEFAULT_MEMORY_LIMIT, show_default=True,
              help="Memory of the tokenizer load (address space) and of the model-code build (resident "
                   "memory) on the target (16GiB, 0 for none); past it the task stops with a finding that "
                   "names the limit.")
@click.option("--hf-cache", help="HF hub cache dir on the target for --model ORG/NAME[@REV] "
              "(default: HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub there).")
@click.option("--refresh", is_flag=True, help="Ignore the local result cache and probe afresh.")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the local result cache.")
@click.option("--deadline", type=click.FloatRange(min=1), default=DEFAULT_DEADLINE_S, show_default=True,
              help="Seconds for the whole run on one host; past it remote probes are stopped.")
@click.option("--parallel", type=click.IntRange(1, 1024), default=None,
              help="Fleet mode: hosts probed at once (default: the inventory's, 8).")
@click.option("--full", is_flag=True, help="Fleet mode: every host's full report after the one-row-per-host summary.")
@click.option("--emit-drafter-config", "emit_drafter", nargs=2,
              type=(click.Choice(("dflash", "eagle3")), click.Path(dir_okay=False)),
              help="Also write a DFlash or EAGLE-3 drafter config.json for this target: KIND FILE.")
@click.option("--engine", "drafter_engine", type=click.Choice(("sglang", "vllm")),
              help="With --emit-drafter-config: the engine whose layer-id conventions the config follows "
              "(default: the one found on the host; SGLang's otherwise).")
@fleet_options
@connection_options
def probe(as_json: bool, output: str | None, save_raw: str | None, parallel: int | None, full: bool,
          emit_drafter: tuple[str, str] | None, drafter_engine: str | None, **kwargs: Any) -> Finished:
    """Profile a model directory: architecture, experts, tokenizer, chat template, venv, engines, GPUs, plan."""
    selection = HostSelection.from_kwargs(kwargs)
    flags = ConnectionFlags.from_kwargs(kwargs)
    request = ProbeRequest(**kwargs)
    check_output_path(output, "--output")
    check_output_path(save_raw, "--save-raw")
    check_output_path(emit_drafter[1] if emit_drafter else None, "--emit-drafter-config")
    if selection.fleet:
        if emit_drafter:
            raise UsageError("--emit-drafter-config takes one target", hint="probe one host, or drop the flag")
        return probe_fleet(request, flags, selection, parallel, as_json=as_json, output=output, full=full)
    inventory = load_inventory_for(flags.hosts_file) if flags.host else None
    executor, entry = executor_for(flags, inventory)
    where = flags.host or "this machine"
    stop = None
    with Phases(f"connecting to {where}") as phases:
        executor.connect()  # kept open: probe_model's `with executor` reuses this connection
        phases.phase(f"probing {request.model} on {where}: files, headers, tokenizer")
        try:
            outcome = probe_model(request, executor, entry, inventory)
        except ProbeInterrupted as exc:  # printed once the spinner is gone
            stop = exc
    if stop is not None:
        return _stopped(stop, as_json=as_json, output=output, save_raw=save_raw)
    fatal = fatal_input(outcome)
    if fatal is not None and not as_json:
        raise fatal  # nothing was read: one error and fix, no report of unknowns
    failed = tuple(filter(None, [saved(save_raw, outcome.raw, "--save-raw") if save_raw else None,
                                 _drafter(outcome.document, emit_drafter, drafter_engine) if emit_drafter else None]))
    error = fatal or outcome.error
    document = outcome.profile if error is None else {**outcome.profile, "error": error_of(error, outcome.code)}
    unsaved = emit(document, as_json=as_json, output=output, code=outcome.code, failed=failed)
    return Finished(max(outcome.code, EXIT_FINDINGS) if unsaved else outcome.code,
                    ((notice(error),) if error else ()) + unsaved)


def _stopped(stop: ProbeInterrupted, *, as_json: bool, output: str | None, save_raw: str | None) -> Finished:
    """A probe stopped by a signal: the profile of what finished (an ``interrupted`` finding and,
    under --json, an ``error`` member naming the signal), written and printed like any other,
    then the signal's one error line and exit 128 + it. No drafter config from half the facts."""
    outcome = stop.outcome
    if outcome is None:  # stopped before its profile was built: main prints the signal's line alone
        raise stop
    text, fix, kind = describe(stop.signum)
    stopped = Notice(text, fix, kind=kind)
    failed = tuple(filter(None, [saved(save_raw, outcome.raw, "--save-raw") if save_raw else None]))
    unsaved = emit(with_error(outcome.profile, (stopped,), stop.exit_code), as_json=as_json, output=output,
                   code=stop.exit_code, failed=failed)
    return Finished(stop.exit_code, (stopped, *unsaved))


def _drafter(profile: ProfileDocument, emit_drafter: tuple[str, str], engine: str | None) -> Notice | None:
    from introspect.cli.cmd_plan import DraftShape, write_drafter_config

    try:
        write_drafter_config(profile, emit_drafter[0], emit_drafter[1], DraftShape(engine))
    except IntrospectError as exc:
        return Notice(f"--emit-drafter-config: {exc.message}; the profile was printed", exc.hint,
                      kind=type(exc).__name__)
    return None


def probe_fleet(request: ProbeRequest, flags: ConnectionFlags, selection: HostSelection,
                parallel: int | None, *, as_json: bool, output: str | None, full: bool) -> Finished:
    """The same probe on many inventory hosts: one connection each, a bounded staggered pool. A
    signal prints the hosts that finished (the others 'not probed'), then exits 128 + it."""

    inventory, hosts = select_fleet(flags.hosts_file, selection)
    known_hosts = fleet_known_hosts(flags, inventory, hosts)  # parsed once for the whole fleet
    make_executor = entry_executors(flags, inventory, known_hosts)

    from introspect.cli.render_fleet import progress_row

    stopped: tuple[Notice, ...] = ()
    try:
        with host_rows(len(hosts), f"probing {request.model}", progress_row,
                       ok=lambda item: item["exit_code"] == 0) as on_done:
            results, stats = probe_hosts(request, hosts, make_executor,
                                         parallel=parallel or inventory.defaults.parallel,
                                         inventory=inventory, on_done=on_done)
        code = combined(int(item["exit_code"]) for item in results)
    except FleetProbeInterrupted as stop:
        results, stats, code = stop.items, stop.stats, stop.exit_code
        text, fix, kind = describe(stop.signum)
        stopped = (Notice(text, fix, kind=kind),)
    # The hosts are spooled (client/fleet_spool.py) and written one at a time, never held whole.
    document = {"schema": "introspect.fleet-profiles/v1", "model": request.model, "hosts": [], "fleet": stats}
    unsaved = tuple(filter(None, [saved(output, stamped(document), "--output", results) if output else None]))
    final = code if stopped or not unsaved else max(code, EXIT_FINDINGS)
    if as_json:
        for piece in chunks(stamped(with_error(document, stopped + unsaved, final)), "hosts", results):
            click.echo(piece, nl=False)
        click.echo("")
        session().json_printed = True
    elif not session().quiet:
        from introspect.cli.render_fleet import print_fleet

        print_fleet(results, full=full)
    notices = tuple(Notice(f"{item['host']}: {item['error'].get('message')}", item["error"].get("hint"),
                           kind=item["error"].get("type"))
                    for item in results if item["error"] and item["exit_code"] < 128)
    return Finished(final, notices + unsaved + stopped)


@click.command("profile", epilog=help_examples.PROFILE)
@click.argument("raw_file", type=click.Path(allow_dash=True), required=False)  # a directory: read_document's error
@click.option("--json", "as_json", is_flag=True, help="Print the profile as JSON on stdout.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Also write the profile JSON here.")
@click.option("--ansible-tree", type=click.Path(file_okay=False),
              help="Instead of RAW_FILE: the --tree DIR of an `introspect.models.model_facts` Ansible run; "
                   "one profile per host, as `probe --all-hosts` makes them.")
def profile_cmd(raw_file: str | None, as_json: bool, output: str | None, ansible_tree: str | None) -> int | Finished:
    """Rebuild a profile from saved raw facts (`probe --save-raw`) or Ansible's results, without any host."""
    check_output_path(output, "--output")
    if ansible_tree:
        if raw_file:
            raise UsageError("give RAW_FILE or --ansible-tree, not both", hint="drop one of them")
        return _profiles_from_tree(ansible_tree, as_json=as_json, output=output)
    if not raw_file:
        raise UsageError("no raw facts given", hint="pass a file written by `introspect probe --save-raw`, "
                         "or --ansible-tree DIR")
    raw = read_document(raw_file, RAW_SCHEMA, what="introspect raw facts",
                        hint="pass a file written by `introspect probe --save-raw`")
    from introspect.analysis.profile import build_profile, exit_code  # only once there is something to build

    profile = build_profile(raw)
    code = exit_code(profile, raw)
    unsaved = emit(profile, as_json=as_json, output=output, code=code)
    return Finished(max(code, EXIT_FINDINGS) if unsaved else code, unsaved)


def _profiles_from_tree(directory: str, *, as_json: bool, output: str | None) -> Finished:
    from introspect.cli.render import print_report
    from introspect.client.ansible_runs import profiles_from_tree

    document = profiles_from_tree(directory)
    results = document["hosts"]
    unsaved = tuple(filter(None, [saved(output, document, "--output") if output else None]))
    code = max((int(item["exit_code"]) for item in results), default=0)
    if as_json:
        echo_json(with_error({**document}, unsaved, max(code, EXIT_FINDINGS)))
    elif not session().quiet:
        for item in results:
            click.echo(f"\n=== {one_line(str(item['host']))} (exit {item['exit_code']}) ===")
            if item["profile"] is not None:  # build_profile made one for every host of the tree
                print_report(item["profile"])
    notices = tuple(Notice(f"{item['host']}: {item['error'].get('message')}", item["error"].get("hint"))
                    for item in results if item["error"])
    return Finished(max(code, EXIT_FINDINGS) if unsaved else code, notices + unsaved)
