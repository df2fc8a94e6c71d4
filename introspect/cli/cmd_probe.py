"""``introspect probe`` and ``introspect profile``."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from introspect.analysis.profile import build_profile, exit_code
from introspect.cli.connect import (
    ConnectionFlags,
    connection_options,
    executor_for,
    known_hosts_for,
    load_inventory_for,
)
from introspect.cli.outcome import Finished, Notice, notice
from introspect.client.documents import dumps, read_document
from introspect.client.model import DEFAULT_DEADLINE_S, ProbeRequest, probe_hosts, probe_model
from introspect.errors import UsageError
from introspect.remote.contract import (
    DEFAULT_FILES_TIMEOUT,
    DEFAULT_JSON_CAP,
    DEFAULT_TOKENIZER_TIMEOUT,
    RAW_SCHEMA,
)
from introspect.transport.base import Executor

if TYPE_CHECKING:
    from introspect.inventory import HostEntry


def write_json(path: str, data: Any) -> None:
    """Write atomically, so a reader never sees half a profile."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    tmp.write_text(dumps(data) + "\n", encoding="utf-8")
    os.replace(tmp, target)


def emit(profile: dict[str, Any], *, as_json: bool, output: str | None) -> None:
    if output:
        write_json(output, profile)
    if as_json:
        click.echo(dumps(profile))
    else:
        from introspect.cli.render import print_report  # rich only for the human report

        print_report(profile)


@click.command("probe")
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
@click.option("--max-json-bytes", type=int, default=DEFAULT_JSON_CAP, show_default=True,
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
          tags: tuple[str, ...], parallel: int | None, emit_drafter: tuple[str, str] | None,
          **kwargs: Any) -> Finished:
    """Profile a model directory: architecture, experts, tokenizer, chat template, venv, engines, GPUs, plan."""
    flags = ConnectionFlags.from_kwargs(kwargs)
    request = ProbeRequest(**kwargs)
    if all_hosts or only or tags:
        if emit_drafter:
            raise UsageError("--emit-drafter-config takes one target", hint="probe one host, or drop the flag")
        return probe_fleet(request, flags, only, tags, parallel, as_json=as_json, output=output)
    inventory = load_inventory_for(flags.hosts_file) if flags.host else None
    executor, entry = executor_for(flags, inventory)
    outcome = probe_model(request, executor, entry)
    if save_raw:
        write_json(save_raw, outcome.raw)
    if emit_drafter:
        from introspect.cli.cmd_plan import write_drafter_config

        write_drafter_config(outcome.profile, emit_drafter[0], emit_drafter[1])
    emit(outcome.profile, as_json=as_json, output=output)
    return Finished(outcome.code, (notice(outcome.error),) if outcome.error else ())


def probe_fleet(request: ProbeRequest, flags: ConnectionFlags, only: tuple[str, ...], tags: tuple[str, ...],
                parallel: int | None, *, as_json: bool, output: str | None) -> Finished:
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

    def make_executor(entry: HostEntry) -> Executor:
        return executor_for(dataclasses.replace(flags, host=entry.name), inventory, known_hosts)[0]

    results, stats = probe_hosts(request, hosts, make_executor, parallel=parallel or inventory.defaults.parallel)
    document = {"schema": "introspect.fleet-profiles/v1", "model": request.model, "hosts": results,
                "fleet": stats}
    if output:
        write_json(output, document)
    if as_json:
        click.echo(json.dumps(document, indent=2))
    else:
        for item in results:
            click.echo(f"\n=== {item['host']} (exit {item['exit_code']}) ===")
            if item["profile"] is not None:
                print_report(item["profile"])
    notices = tuple(Notice(f"{item['host']}: {item['error'].get('message')}", item["error"].get("hint"))
                    for item in results if item["error"])
    return Finished(max((int(item["exit_code"]) for item in results), default=0), notices)


@click.command("profile")
@click.argument("raw_file", type=click.Path(allow_dash=True))  # a directory: read_document's error line
@click.option("--json", "as_json", is_flag=True, help="Print the profile as JSON on stdout.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Also write the profile JSON here.")
def profile_cmd(raw_file: str, as_json: bool, output: str | None) -> int:
    """Rebuild a profile from saved raw facts (`probe --save-raw`), without any host."""
    raw = read_document(raw_file, RAW_SCHEMA, what="introspect raw facts",
                        hint="pass a file written by `introspect probe --save-raw`")
    profile = build_profile(raw)
    emit(profile, as_json=as_json, output=output)
    return exit_code(profile, raw)
