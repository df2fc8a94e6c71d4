"""``introspect diff A B``: what differs between two model profiles.

A and B are each a saved profile (``probe --output FILE``) or a live target
``HOST:PATH`` / ``HOST:ORG/NAME[@REV]`` (HOST may be a hosts.yaml entry name), probed
by :mod:`introspect.client.diff` with the connection options, both at the same time.
Exit status: 0 identical in the compared groups, 1 different, 2 bad usage or input.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import TYPE_CHECKING, Any

import click

from introspect.analysis.diff.document import GROUPS, diff_result
from introspect.analysis.diff.shapes import DiffResult, TemplateDiff
from introspect.cli import help_examples
from introspect.cli.connect import (
    ConnectionFlags,
    connection_options,
    executor_for,
    known_hosts_for,
    load_inventory_for,
)
from introspect.cli.jsonout import echo_json
from introspect.cli.options import BYTE_SIZE
from introspect.cli.progress import Phases
from introspect.cli.safe_text import visible
from introspect.cli.session import session
from introspect.client.diff import LiveOptions, parse_side, profiles_for
from introspect.errors import EXIT_FINDINGS, EXIT_OK, UsageError
from introspect.remote.contract import DEFAULT_FILES_TIMEOUT, DEFAULT_JSON_CAP, DEFAULT_TOKENIZER_TIMEOUT
from introspect.transport.base import Executor

if TYPE_CHECKING:
    from introspect.inventory import HostEntry

_SHA_RE = re.compile(r"^[0-9a-f]{64}$")
MAX_VALUE = 100  # characters of one value shown in the human output (all of it with --wide)
DIFF_SCHEMA = "introspect.diff/v1"


# --------------------------------------------------------------------------- output


def show(value: Any) -> str:
    if isinstance(value, str) and _SHA_RE.match(value):
        return value[:12]
    text = "-" if value is None else (value if isinstance(value, str) else json.dumps(value))
    if session().wide:
        return text
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 3] + "..."


def _echo(text: str = "", *, fold: bool = True, **style: Any) -> None:
    """One plain line of the diff, its host-controlled text (model_type, tokens, template lines,
    paths) with control characters escaped (see :mod:`introspect.cli.safe_text`); folded at word
    boundaries to the terminal, except a chat template's own lines (``fold=False``)."""
    from introspect.cli.render_term import fold_lines

    shown = visible(text)
    lines = fold_lines(shown, hang=len(shown) - len(shown.lstrip()) + 4) if fold and shown.strip() else [shown]
    for line in lines:
        click.secho(line, **style)


def _template_lines(template: TemplateDiff) -> None:
    source = template.get("source_b") or template.get("source_a") or "chat template"
    _echo(f"  chat template ({source}) differs: sha256 {show(template.get('sha256_a'))} -> "
          f"{show(template.get('sha256_b'))}")
    for line in template.get("lines") or []:
        color = "green" if line.startswith("+") else "red" if line.startswith("-") else None
        _echo(f"    {line}", fold=False, fg=color)
    if template.get("truncated"):
        _echo("    ... (diff truncated)")


def print_human(result: DiffResult) -> None:
    labels = result["labels"]
    _echo(f"A: {labels['a']}")
    _echo(f"B: {labels['b']}")
    for name, group in result["groups"].items():
        count = len(group["changes"])
        _echo(f"{name}: " + ("identical" if group["identical"] else f"{count} difference{'s' * (count != 1)}"),
              bold=True)
        width = max((len(c["key"]) for c in group["changes"]), default=0)
        for change in group["changes"]:
            _echo(f"  {change['key']:<{width}}  {show(change['a'])}  ->  {show(change['b'])}")
        if template := group.get("template_diff"):
            _template_lines(template)
        for note in group.get("notes") or []:
            _echo(f"  note: {note}")
    differing = [n for n, g in result["groups"].items() if not g["identical"]]
    _echo("result: identical" if result["identical"] else f"result: different ({', '.join(differing)})")


# --------------------------------------------------------------------------- command


@click.command("diff", epilog=help_examples.DIFF)
@click.argument("a")
@click.argument("b")
@click.option("--sections", "sections", multiple=True, type=click.Choice(GROUPS),
              help="Compare only this group of facts (repeatable). Default: all four.")
# The old name of --sections, kept working; hidden because every other command's --only selects hosts.
@click.option("--only", "only", multiple=True, type=click.Choice(GROUPS), hidden=True)
@click.option("--json", "as_json", is_flag=True, help="Print the differences as JSON on stdout.")
@click.option("--venv", help="Virtualenv on the hosts whose bin/python probes live targets "
                             "(default: the host entry's first venv).")
@click.option("--python", "python_exe", help="Interpreter on the hosts (default python3).")
@click.option("--hf-cache", help="HF hub cache dir on the hosts, for HOST:org/name targets.")
@click.option("--timeout", type=float, default=DEFAULT_TOKENIZER_TIMEOUT, show_default=True,
              help="Seconds for each tokenizer load.")
@click.option("--files-timeout", type=float, default=DEFAULT_FILES_TIMEOUT, show_default=True,
              help="Seconds for the file probes.")
@click.option("--no-remote-code", is_flag=True, help="Never run the models' own code (trust_remote_code).")
@click.option("--no-tokenizer", is_flag=True, help="Skip loading tokenizers; facts come from the files.")
@click.option("--no-model-code", is_flag=True,
              help="Skip building the models' code on the meta device; architecture facts come from the files.")
@click.option("--max-json-bytes", type=BYTE_SIZE, default=DEFAULT_JSON_CAP, show_default=True,
              help="Refuse (and do not hash) files above this size.")
@connection_options
def diff(a: str, b: str, sections: tuple[str, ...], only: tuple[str, ...], as_json: bool, venv: str | None, python_exe: str | None,
         hf_cache: str | None, timeout: float, files_timeout: float, no_remote_code: bool, no_tokenizer: bool,
         no_model_code: bool, max_json_bytes: int, **kwargs: Any) -> int:
    """Compare two model profiles: saved files or live HOST:PATH / HOST:org/name[@rev] targets."""
    flags = ConnectionFlags.from_kwargs(kwargs)
    if flags.host:
        raise UsageError("diff takes its hosts from A and B (HOST:PATH), not from --host",
                         hint="write the host into the operand, e.g. gpu-a1:/root/models/Kimi-K2.6")
    sides = [parse_side(a), parse_side(b)]
    opts = LiveOptions(venv=venv, python=python_exe, timeout=timeout, files_timeout=files_timeout,
                       remote_code=not no_remote_code, load_tokenizer=not no_tokenizer, hf_cache=hf_cache,
                       json_cap=max_json_bytes, load_model_code=not no_model_code)
    live = any(side.file is None for side in sides)
    inventory = load_inventory_for(flags.hosts_file) if live else None
    opts = dataclasses.replace(opts, inventory=inventory)
    known_hosts = known_hosts_for(flags, inventory)  # loaded once for both operands

    def make_executor(host: str) -> tuple[Executor, HostEntry | None]:
        return executor_for(dataclasses.replace(flags, host=host), inventory, known_hosts)

    with Phases("probing " + " and ".join(side for side, s in zip((a, b), sides, strict=True) if s.file is None)
                if live else "reading the profiles"):
        profile_a, profile_b = profiles_for(sides, make_executor, opts)
    result = diff_result(profile_a, profile_b, tuple(dict.fromkeys(sections + only)) or GROUPS)
    if as_json:
        echo_json(result, DIFF_SCHEMA)
    elif not session().quiet:
        print_human(result)
    return EXIT_OK if result["identical"] else EXIT_FINDINGS

