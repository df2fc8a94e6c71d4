"""``introspect man``: the manual pages, from the same click tree as ``--help`` (:mod:`.manpage`)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import click

from introspect.cli import help_examples
from introspect.errors import UsageError

MAN = help_examples.examples(
    "introspect man --out ~/.local/share/man/man1   # then: man introspect-probe",
    "introspect man probe | man -l -                # one page, not installed",
    "introspect man --out man1 && groff -man -Tutf8 man1/introspect.1 | less",
)


@click.command("man", epilog=MAN)
@click.argument("command", nargs=-1, metavar="[COMMAND]...")
@click.option("--out", type=click.Path(file_okay=False), metavar="DIR",
              help="Write introspect.1 and an introspect-COMMAND.1 for every command into DIR (created when "
                   "missing) instead of printing one page.")
def man(command: tuple[str, ...], out: str | None) -> int:
    """Write the manual pages (roff), generated from the same text as --help.

    Without --out, the page of COMMAND (default: introspect.1) is printed on stdout.
    """
    from introspect.cli.main import cli
    from introspect.cli.manpage import man_pages

    if command and out is not None:
        raise UsageError("--out writes every page; COMMAND picks the one page printed on stdout",
                         hint="introspect man --out DIR  # or: introspect man " + shlex.join(command))
    pages = man_pages(cli)
    if out is None:
        wanted = " ".join(("introspect", *command))
        page = next((p for p in pages if p.path == wanted), None)
        if page is None:
            raise UsageError(f"no command `{wanted}`", hint="introspect --help  # the commands there have pages")
        click.echo(page.roff, nl=False)
        return 0
    directory = Path(out).expanduser()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for page in pages:
            tmp = directory / f".{page.filename}.tmp"
            tmp.write_text(page.roff, encoding="utf-8")
            os.replace(tmp, directory / page.filename)  # a reader never sees half a page
    except OSError as exc:
        raise UsageError(f"cannot write the man pages to {directory}: {exc.strerror or exc}",
                         hint=f"ls -ld {shlex.quote(str(directory))}  # it must be a directory you can write") from None
    click.echo(f"wrote {len(pages)} man pages to {directory}", err=True)
    return 0
