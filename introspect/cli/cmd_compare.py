"""``introspect compare``: which of my hosts differ? One row per host or saved profile, one
column per fact, the odd values marked.

The rows come from saved documents (:mod:`introspect.client.compare`) and/or live hosts
probed like ``probe --all-hosts``; the matrix and its judging are
:mod:`introspect.analysis.diff.compare`'s (pure); this module renders it as text, JSON or CSV.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from introspect.analysis.diff.compare import (
    COMPARE_SCHEMA,
    FACT_KEYS,
    FACTS,
    CellJSON,
    RowInput,
    compare_document,
)
from introspect.cli.connect import (
    ConnectionFlags,
    connection_options,
    executor_for,
    fleet_known_hosts,
    known_hosts_for,
    load_inventory_for,
    select_fleet,
)
from introspect.cli.jsonout import echo_json, with_error
from introspect.cli.options import HostSelection, fleet_options
from introspect.cli.outcome import Finished, Notice, combined
from introspect.cli.progress import host_rows
from introspect.cli.render_term import (
    Col,
    escape,
    human_bytes,
    human_count,
    make_console,
    print_folded,
    print_rows,
)
from introspect.cli.safe_text import one_line
from introspect.cli.session import session
from introspect.client.model import DEFAULT_DEADLINE_S, ProbeRequest
from introspect.errors import EXIT_FINDINGS, UsageError
from introspect.interrupts import describe
from introspect.remote.contract import DEFAULT_FILES_TIMEOUT, DEFAULT_TOKENIZER_TIMEOUT

if TYPE_CHECKING:
    from introspect.client.compare import CompareInterrupted
    from introspect.client.fleet_items import FleetItem
    from introspect.documents.compare import Column, CompareDocument, Row
    from introspect.inventory import HostEntry, Inventory
    from introspect.transport.base import Executor

GIB = 2**30
SHA_SHOWN = 12  # hex digits of a chat template's sha256 in the table (all of them in JSON and CSV)


# --------------------------------------------------------------------------- values as text


def shown(kind: str, value: Any) -> str:
    """A known value as the table shows it (None: the fact's "absent": not installed, no template)."""
    if value is None:
        return "none"
    if kind == "count":
        return human_count(value)
    if kind == "bytes":
        return human_bytes(value)
    if kind == "sha":
        return str(value)[:SHA_SHOWN]
    if kind == "bool":
        return "ok" if value else "failed"
    return str(value)


def _cell(kind: str, fact: CellJSON, odd: bool) -> str:
    if not fact["known"]:
        return "[dim]?[/]"
    text = escape(shown(kind, fact["value"]))
    return f"[bold red]*{text}[/]" if odd else text


def _shown_columns(document: CompareDocument, all_columns: bool) -> list[Column]:
    """Every column with --all-columns; else the differing ones, and free disk when measured
    (it is never the same twice, so it is never in the "same on every row" list)."""
    if all_columns:
        return list(document.columns)
    return [c for c in document.columns if c.differs or (not c.judged and c.distinct > 1)]


def _label_title(rows: list[Row]) -> str:
    sources = {row.source for row in rows}
    return "host" if sources == {"live"} else "profile" if sources == {"file"} else "host or profile"


def print_text(document: CompareDocument, *, all_columns: bool) -> None:
    console = make_console()
    rows, columns = document.rows, _shown_columns(document, all_columns)
    counts = document.counts
    differing = len(document.differing)
    noun = _label_title(rows)
    plural = "hosts or profiles" if noun == "host or profile" else noun + "s"
    compared = (f"{counts.compared} {plural} compared" if not counts.errors
                else f"{counts.compared} of {counts.rows} {plural} compared ({counts.errors} failed)")
    print_folded(console, f"[bold]{compared}[/]: " + (f"{differing} of {len(FACTS)} facts differ" if differing
                                                     else f"all {len(FACTS)} facts agree"))
    errors = any(row.error for row in rows)
    if columns or errors:
        cols = [Col(noun), *(Col(c.title, "num") for c in columns), *([Col("error", "text")] if errors else [])]
        table = [[escape(row.label),
                  *(_cell(c.kind, row.facts[c.key], c.key in row.odd) if not row.error else "" for c in columns),
                  *([escape(_error_message(row))] if errors else [])] for row in rows]
        print_rows(console, cols, table)
    if document.differing:
        tie = any(c.differs and c.judged and c.majority is None for c in document.columns)
        print_folded(console, "[dim]* differs from most rows" + (" (no majority: every value marked)" if tie else "")
                     + "; ? unknown[/]", hang=2)
    if not all_columns:
        _print_same(console, document, {c.key for c in columns})


def _error_message(row: Row) -> str:
    """Why a row has no profile (its error record's message), or ""."""
    return str((row.error or {}).get("message") or "")


def _print_same(console: Any, document: CompareDocument, in_table: set[str]) -> None:
    """The facts every compared row agrees on (or every row that knows it), each with its one value;
    then those no row knows."""
    same = [c for c in document.columns if c.key not in in_table and c.distinct == 1]
    if same:
        console.print("Same on every row:")
        width = max(len(c.title) for c in same)
        compared = document.counts.compared
        for c in same:
            partial = f"  [dim](known for {c.known_rows} of {compared})[/]" if c.known_rows < compared else ""
            print_folded(console, f"  {c.title:<{width}}  {escape(shown(c.kind, _one_value(document, c)))}"
                         f"{partial}", hang=width + 4)
    unknown = [c for c in document.columns if c.key not in in_table and c.distinct == 0]
    if unknown and document.counts.compared:
        console.print("[dim]Unknown on every row:[/]")
        first = next(row for row in document.rows if not row.error)
        for c in unknown:
            reason = first.facts[c.key]["reason"]
            print_folded(console, f"[dim]  {c.title}: {escape(str(reason))}[/]", hang=4)


def _one_value(document: CompareDocument, column: Column) -> Any:
    if column.judged:
        return column.majority
    return next(row.facts[column.key]["value"] for row in document.rows
                if not row.error and row.facts[column.key]["known"])


# --------------------------------------------------------------------------- CSV


def _csv_value(fact: CellJSON) -> str | int:
    if not fact["known"]:
        return ""
    value = fact["value"]
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, int) else one_line(str(value))


def print_csv(document: CompareDocument) -> None:
    """One line per row: plain values (bytes and counts as numbers), the odd facts in ``odd_columns``."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["label", "source", "file", "host", "model_path", *FACT_KEYS, "odd_columns", "error"])
    for row in document.rows:
        writer.writerow([one_line(str(value or "")) for value in (row.label, row.source, row.file, row.host,
                                                                  row.model_path)]
                        + [_csv_value(row.facts[key]) for key in FACT_KEYS]
                        + [";".join(row.odd), one_line(_error_message(row))])
    click.echo(out.getvalue(), nl=False)


# --------------------------------------------------------------------------- command


EXAMPLES = """\b
Examples:
  introspect probe -H gpu1 -m /root/models/Kimi-K2.6 --json -o gpu1.json   # save a profile
  introspect compare gpu1.json gpu2.json gpu3.json            # saved profiles
  introspect compare --all-hosts -m /root/models/Kimi-K2.6    # every inventory host, live
  introspect compare --tags serving -m /root/models/Kimi-K2.6 --check || echo "hosts differ"
  introspect compare --all-hosts -m /root/models/Kimi-K2.6 --format csv > fleet.csv
  introspect compare -H gpu1 -m /root/models/Kimi-K2.6 gpu2.json   # a live host and a saved one"""


@click.command("compare", epilog=EXAMPLES)
@click.argument("files", nargs=-1, type=click.Path(allow_dash=True))
@click.option("--model", "-m", help="Model directory (or hub id ORG/NAME[@REV]) to probe on the live hosts.")
@click.option("--format", "output_format", type=click.Choice(("text", "json", "csv")), default="text",
              show_default=True, help="text: a table, odd values marked with *; json: introspect.compare/v1; "
              "csv: one line per row.")
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option("--check", is_flag=True, help="Exit 1 when any fact differs between the rows (0 when none does).")
@click.option("--all-columns", is_flag=True, help="Show every fact in the table; by default only the differing "
              "ones (and free disk), the others listed once with their common value.")
@click.option("--min-free-gb", type=click.FloatRange(min=0), default=None,
              help="Mark a host odd when the model dir's file system has less free space (GiB). Without it free "
                   "disk is shown, never judged: it differs between any two hosts.")
@click.option("--venv", help="Virtualenv on the hosts whose bin/python probes (default: the entry's first venv).")
@click.option("--python", "python_exe", help="Interpreter on the hosts (default python3).")
@click.option("--hf-cache", help="HF hub cache dir on the hosts, for --model ORG/NAME[@REV].")
@click.option("--timeout", type=float, default=DEFAULT_TOKENIZER_TIMEOUT, show_default=True,
              help="Seconds for each tokenizer load.")
@click.option("--files-timeout", type=float, default=DEFAULT_FILES_TIMEOUT, show_default=True,
              help="Seconds for the file probes.")
@click.option("--no-remote-code", is_flag=True, help="Never run the model's own code (trust_remote_code).")
@click.option("--no-tokenizer", is_flag=True, help="Skip loading the tokenizer (AutoTokenizer is then unknown).")
@click.option("--model-code", is_flag=True, help="Also build the model from its code on the meta device (off "
              "by default: slow, and the parameter count would then depend on which hosts have torch).")
@click.option("--refresh", is_flag=True, help="Ignore the local result cache and probe afresh.")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the local result cache.")
@click.option("--deadline", type=click.FloatRange(min=1), default=DEFAULT_DEADLINE_S, show_default=True,
              help="Seconds for the whole run on one host.")
@click.option("--parallel", type=click.IntRange(1, 1024), default=None,
              help="Hosts probed at once (default: the inventory's, 8).")
@fleet_options
@connection_options
def compare(files: tuple[str, ...], output_format: str, as_json: bool, check: bool, all_columns: bool,
            min_free_gb: float | None, parallel: int | None, model_code: bool, **kwargs: Any) -> Finished:
    """Which hosts differ: a hosts x facts matrix of saved profiles and live hosts, odd values marked.

    Rows: FILES (`probe --json`/`--output` profiles, `--save-raw` raw facts, `probe --all-hosts
    --json` fleet documents) and, with --model, live hosts: --host H, --only/--tags/--all-hosts
    from the inventory, or this machine when neither is given. Columns: model type, parameters,
    quantization, transformers / tiktoken / torch / sglang / vllm versions, chat template sha256,
    tokenizer class, AutoTokenizer, free disk, GPUs. Per fact the value most rows hold is normal,
    the others are odd (* in the table, `odd` lists in JSON, `odd_columns` in CSV). Exit: 0 (1
    with --check when a fact differs); an unreachable host is a row with its error and exit 3.
    """
    output_format = "json" if as_json else output_format
    session().json = session().json or output_format == "json"  # a failure is then an error document
    min_free = int(min_free_gb * GIB) if min_free_gb is not None else None
    selection = HostSelection.from_kwargs(kwargs)
    flags = ConnectionFlags.from_kwargs(kwargs)
    request = ProbeRequest(no_model_code=not model_code, **kwargs) if kwargs.get("model") else None
    _check_inputs(files, request, flags, selection)
    from introspect.client.compare import CompareInterrupted, row_of, rows_from_files, unique_labels

    rows = rows_from_files(files)  # every file is read before any host is contacted
    stopped: tuple[Notice, ...] = ()
    stop_code = 0
    if request is not None:
        try:
            items = _probe_live(request, flags, selection, parallel)
        except CompareInterrupted as stop:
            items, stopped, stop_code = stop.items, _stop_notice(stop), stop.exit_code
        rows += [row_of(item, source="live") for item in items]
    document = _document(unique_labels(rows), request, min_free, stopped)
    return _finish(document, rows, output_format, check, all_columns, stopped, stop_code)


def _check_inputs(files: tuple[str, ...], request: ProbeRequest | None, flags: ConnectionFlags,
                  selection: HostSelection) -> None:
    if request is None and (flags.host or selection.fleet):
        raise UsageError("live hosts need --model: the model dir to probe on them",
                         hint="introspect compare --all-hosts --model /models/NAME")
    if not selection.fleet and len(files) + (request is not None) < 2:
        raise UsageError("compare needs at least two rows: saved profiles, or --model with live hosts",
                         hint="introspect compare a.json b.json   # or: introspect compare --all-hosts --model PATH")


def _stop_notice(stop: CompareInterrupted) -> tuple[Notice, ...]:
    text, fix, kind = describe(stop.signum)
    return (Notice(text, fix, kind=kind),)


Targets = tuple["Inventory | None", list["HostEntry"], Callable[["HostEntry"], "Executor"], bool, int]


def _probe_live(request: ProbeRequest, flags: ConnectionFlags, selection: HostSelection,
                parallel: int | None) -> list[FleetItem]:
    """The live items: the selected inventory hosts, or the one --host (this machine without it)."""
    from introspect.cli.render_fleet import progress_row
    from introspect.client.compare import probe_for_compare

    inventory, hosts, make_executor, ad_hoc, pool = (_fleet(flags, selection, parallel) if selection.fleet
                                                     else _one_host(flags))
    with host_rows(len(hosts), f"probing {request.model}", progress_row) as on_done:
        return probe_for_compare(request, hosts, make_executor, parallel=pool, inventory=inventory,
                                 ad_hoc=ad_hoc, on_done=on_done)


def _fleet(flags: ConnectionFlags, selection: HostSelection, parallel: int | None) -> Targets:
    """--only/--tags/--all-hosts: the inventory's hosts, known_hosts parsed once for all of them."""
    inventory, hosts = select_fleet(flags.hosts_file, selection)
    known_hosts = fleet_known_hosts(flags, inventory, hosts)

    def make_executor(entry: HostEntry) -> Executor:
        return executor_for(dataclasses.replace(flags, host=entry.name), inventory, known_hosts)[0]

    return inventory, hosts, make_executor, False, parallel or inventory.defaults.parallel


def _one_host(flags: ConnectionFlags) -> Targets:
    """--host H (an inventory entry keeps its venv and settings), or this machine without it."""
    from introspect.inventory import HostEntry

    inventory = load_inventory_for(flags.hosts_file) if flags.host else None
    name = flags.host or "local"
    entry = next((h for h in inventory.hosts if h.name == name), None) if inventory else None
    known_hosts = known_hosts_for(flags, inventory, flags.host)

    def make_executor(_entry: HostEntry) -> Executor:
        return executor_for(flags, inventory, known_hosts)[0]

    return inventory, [entry or HostEntry(name=name, address=flags.host or "")], make_executor, entry is None, 1


def _document(rows: list[RowInput], request: ProbeRequest | None, min_free: int | None,
              stopped: tuple[Notice, ...]) -> CompareDocument:
    if len(rows) < 2 and not stopped:
        raise UsageError(f"compare needs at least two rows, got {len(rows)}",
                         hint="introspect compare a.json b.json   # add saved profiles, or select more hosts")
    document = compare_document(rows, min_free=min_free)
    document.model = request.model if request else None
    return document


def _finish(document: CompareDocument, rows: list[RowInput], output_format: str, check: bool,
            all_columns: bool, stopped: tuple[Notice, ...], stop_code: int) -> Finished:
    """Print ``document``; the exit code: the worst failed row's (3: unreachable), at least 1 when
    --check found a difference, 128 + the signal when one stopped the probes."""
    failed = [row for row in rows if row.error]
    code = max(combined(row.exit_code for row in failed), stop_code)
    if check and document.differs:
        code = max(code, EXIT_FINDINGS)
    if output_format == "json":
        echo_json(with_error(document.to_dict(), stopped, code), COMPARE_SCHEMA)
    elif output_format == "csv":
        print_csv(document)
    elif not session().quiet:
        print_text(document, all_columns=all_columns)
    notices = tuple(Notice(f"{row.label}: {(row.error or {}).get('message')}", (row.error or {}).get("hint"),
                           kind=(row.error or {}).get("type"), host=row.label)
                    for row in failed if row.exit_code < 128)
    return Finished(code, notices + stopped)
