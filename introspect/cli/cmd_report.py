"""``introspect report``: one self-contained HTML page (or Markdown) of what introspect knows.

INPUTs are saved documents (profiles, raw facts, plans, compares, fleets, health runs), history
databases and live ``HOST:PATH`` targets (probed as ``diff`` probes them, with the same
connection options); :mod:`introspect.report` turns them into pages. Nothing on the page is
fetched: no script, font or image, so the file reads the same on an air-gapped laptop.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from introspect.cli import help_examples
from introspect.cli.connect import ConnectionFlags, check_output_path, connection_options
from introspect.cli.outcome import Finished
from introspect.cli.session import session
from introspect.errors import UsageError
from introspect.remote.contract import DEFAULT_FILES_TIMEOUT, DEFAULT_TOKENIZER_TIMEOUT

if TYPE_CHECKING:
    from introspect.client.diff import LiveOptions, Side
    from introspect.remote.contract import JSONObject
    from introspect.report.build import Report
    from introspect.report.inputs import Loaded

EXAMPLE_HINT = "introspect report kimi.json -o report.html"


@click.command("report", epilog=help_examples.REPORT)
@click.argument("inputs", nargs=-1, type=click.Path(allow_dash=True))  # HOST:PATH is no local path: read below
@click.option("--output", "-o", type=click.Path(dir_okay=False),
              help="Write the report here (Markdown: its pictures go to a NAME_files folder beside it). "
                   "Default: stdout, when it is not a terminal.")
@click.option("--md", "markdown", is_flag=True, help="Markdown (tables, and the pictures as SVG files) instead "
              "of HTML.")
@click.option("--db", type=click.Path(dir_okay=False),
              help="A history database of `introspect health`: each host's health over time on the fleet page.")
@click.option("--venv", help="Virtualenv on the hosts whose bin/python probes HOST:PATH inputs.")
@click.option("--python", "python_exe", help="Interpreter on the hosts (default python3).")
@click.option("--hf-cache", help="HF hub cache dir on the hosts, for HOST:org/name inputs.")
@click.option("--timeout", type=float, default=DEFAULT_TOKENIZER_TIMEOUT, show_default=True,
              help="Seconds for each tokenizer load of a live input.")
@click.option("--files-timeout", type=float, default=DEFAULT_FILES_TIMEOUT, show_default=True,
              help="Seconds for the file probes of a live input.")
@click.option("--no-remote-code", is_flag=True, help="Never run the models' own code (trust_remote_code).")
@click.option("--no-tokenizer", is_flag=True, help="Skip loading tokenizers of live inputs.")
@connection_options
def report(inputs: tuple[str, ...], output: str | None, markdown: bool, db: str | None, venv: str | None,
           python_exe: str | None, hf_cache: str | None, timeout: float, files_timeout: float, no_remote_code: bool,
           no_tokenizer: bool, **kwargs: Any) -> Finished:
    """Draw profiles, plans, fleets and health history as one self-contained HTML page (or Markdown).

    INPUT: a profile (`probe --json`/`--output`), raw facts (`probe --save-raw`, profiled as `introspect
    profile` does), a plan (`plan --json`), a compare (`compare --json`), a fleet (`probe --all-hosts --json`),
    a health run (`health --json`), a history database, or HOST:PATH / HOST:org/name probed live. Pages: per
    model the five answers, the layer map with the drafter taps, parameters, tokenizer and findings; per plan
    what one GPU holds in each layout; per fleet the hosts x facts matrix and the health over time. The page
    fetches nothing (no script, font or image) and prints; it follows the system's dark mode.
    """
    if not inputs and not db:
        raise UsageError("nothing to report: give an INPUT or --db", hint=EXAMPLE_HINT)
    check_output_path(output, "--output")
    if output is None and sys.stdout.isatty() and not session().quiet:
        raise UsageError("the report is a file, not terminal text: name one with --output",
                         hint=f"introspect report {' '.join(map(shlex.quote, inputs)) or '--db FILE'} -o report."
                              + ("md --md" if markdown else "html"))
    from introspect.client.diff import LiveOptions
    from introspect.remote.contract import DEFAULT_JSON_CAP

    opts = LiveOptions(venv=venv, python=python_exe, timeout=timeout, files_timeout=files_timeout,
                       remote_code=not no_remote_code, load_tokenizer=not no_tokenizer, hf_cache=hf_cache,
                       json_cap=DEFAULT_JSON_CAP)
    loaded = _load(inputs, ConnectionFlags.from_kwargs(kwargs), opts)
    if db:
        from introspect.report.inputs import Loaded, label_of

        loaded.append(Loaded("history", label_of(db), None, db))
    from introspect.report.build import build_report

    built = build_report(loaded)
    _write(built, output, markdown)
    return Finished(0)


def _load(inputs: tuple[str, ...], flags: ConnectionFlags, opts: LiveOptions) -> list[Loaded]:
    """Every INPUT in order: the saved ones read first (a bad file fails before any host is contacted)."""
    from introspect.client.diff import parse_side
    from introspect.report.inputs import Loaded, live, load

    slots: list[Loaded | Side] = [load(text) if text == "-" or Path(text).is_file() else parse_side(text)
                                  for text in inputs]
    sides = [slot for slot in slots if not isinstance(slot, Loaded)]
    if flags.host:
        raise UsageError("report takes its hosts from the inputs (HOST:PATH), not from --host",
                         hint="introspect report gpu1:/root/models/Kimi-K2.6 -o report.html")
    if not sides:
        return [slot for slot in slots if isinstance(slot, Loaded)]
    profiles = iter(_probe(sides, flags, opts))
    return [slot if isinstance(slot, Loaded) else live(slot.text, next(profiles)) for slot in slots]


def _probe(sides: list[Side], flags: ConnectionFlags, opts: LiveOptions) -> list[JSONObject]:
    """The live targets' profiles (as ``probe --json`` prints them), probed as ``introspect diff`` probes its operands."""
    from introspect.cli.connect import executor_for, known_hosts_for, load_inventory_for
    from introspect.cli.progress import Phases
    from introspect.client.diff import live_profile

    inventory = load_inventory_for(flags.hosts_file)
    opts = dataclasses.replace(opts, inventory=inventory)
    known_hosts = known_hosts_for(flags, inventory)
    profiles = []
    for side in sides:
        with Phases(f"probing {side.text}"):
            profiles.append(live_profile(side, lambda host: executor_for(dataclasses.replace(flags, host=host),
                                                                         inventory, known_hosts), opts))
    return profiles


def _write(built: Report, output: str | None, markdown: bool) -> None:
    from introspect.report.render import Pictures, render_html, render_markdown

    if not markdown:
        _save(output, render_html(built))
        return
    folder = Path(output).expanduser().with_name(Path(output).stem + "_files") if output else None
    pictures = Pictures(folder, folder.name if folder else None)
    text = render_markdown(built, pictures)
    if folder is not None and pictures.files:
        with _write_errors(str(folder)):
            folder.mkdir(exist_ok=True)
        for name, svg in pictures.files.items():
            _save(str(folder / name), svg)
    _save(output, text)


def _save(path: str | None, text: str) -> None:
    """Write atomically (a reader never sees half a report); without a path, to stdout."""
    if path is None or path == "-":
        click.echo(text, nl=False)
        return
    target = Path(path).expanduser()
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    with _write_errors(path):
        try:
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, target)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
    if not session().quiet and target.suffix != ".svg":
        click.echo(f"wrote {target}", err=True)


@contextlib.contextmanager
def _write_errors(path: str) -> Any:
    try:
        yield
    except OSError as exc:
        from introspect.cli.cmd_probe import _write_hint

        raise UsageError(f"cannot write {path}: {exc.strerror or exc}",
                         hint=_write_hint(Path(path).expanduser(), exc)) from None
