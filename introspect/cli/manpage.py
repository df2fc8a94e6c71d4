"""Man pages (roff, ``man 7 man`` macros) generated from the click command tree: the same help,
options, ``Examples:`` and exit codes ``--help`` prints, so the two never disagree.

Not click-man (v0.5.1): it finds subcommands through ``getattr(cli, 'commands', {})``
(https://github.com/click-contrib/click-man/blob/v0.5.1/click_man/core.py#L98), which is empty
for our lazily loaded group (cli/main.py ``LazyGroup``), so it would write ``introspect.1``
alone; it has no place for the epilog, where our examples live; it writes the help text into
roff unescaped (https://github.com/click-contrib/click-man/blob/v0.5.1/click_man/man.py#L104:
a ``\\b`` marker, a backslash or a line starting with ``.`` reaches the formatter as it is); and
it stamps today's date unless SOURCE_DATE_EPOCH is set (man.py#L55), so two builds differ. The
generator below is small and owns those points: every subcommand, an EXAMPLES section, escaped
text, no date.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass

import click

from introspect import __version__

EXIT_PARAGRAPH = re.compile(r"^Exit\b")
EXAMPLES_HEADING = "Examples:"


def escape(text: str, *, code: bool = True) -> str:
    """Text for a roff line: backslashes and minus signs as roff spells them (``\\-`` stays an
    ASCII hyphen-minus in UTF-8 output, so a pasted option works), `code` in bold (``code=False``:
    a shell line's backquotes are its own), and a line starting with ``.`` or ``'`` kept text
    (``\\&``), never read as a request."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    if code:
        text = re.sub(r"`([^`\n]+)`", r"\\fB\1\\fR", text)
    return "\n".join(f"\\&{line}" if line.startswith((".", "'")) else line for line in text.split("\n"))


def _quoted(text: str) -> str:
    """A macro argument in double quotes (``.TH "NAME" ...``)."""
    return '"' + escape(text).replace('"', "\\(dq") + '"'


def paragraphs(text: str | None) -> list[str]:
    """click's help text as paragraphs; a ``\\b`` paragraph keeps its lines (click prints it as written).
    A docstring's indentation goes first, as click's formatter drops it."""
    return [p.strip("\n") for p in re.split(r"\n\s*\n", inspect.cleandoc(text or "")) if p.strip()]


def _verbatim(lines: list[str]) -> list[str]:
    return [".PP", ".nf", ".RS 4", *(escape(line, code=False) for line in lines), ".RE", ".fi"]


def _body(paras: list[str]) -> list[str]:
    out: list[str] = []
    for para in paras:
        if para.startswith("\b"):
            out += _verbatim(para.split("\n")[1:])
        else:
            out += [".PP", escape(" ".join(line.strip() for line in para.split("\n")))]
    return out


def _option(record: tuple[str, str]) -> list[str]:
    """``-m, --model TEXT`` as bold names and an italic metavar, then its help."""
    names, help_text = record
    words = []
    for word in names.split():
        bare = word.rstrip(",")
        style = "B" if bare.startswith("-") or bare == "/" else "I"
        words.append(f"\\f{style}{escape(bare)}\\fR" + ("," if word.endswith(",") else ""))
    return [".TP", " ".join(words), escape(help_text) if help_text else ""]


def _first_line(command: click.Command) -> str:
    return " ".join((paragraphs(command.help) or [command.short_help or ""])[0].split())


@dataclass
class Page:
    path: str  # "introspect probe"
    roff: str

    @property
    def filename(self) -> str:
        return self.path.replace(" ", "-") + ".1"


def _split_help(command: click.Command, root_exit: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(description, exit status, examples) paragraphs of ``command``'s help and epilog."""
    description = paragraphs(command.help)[1:]
    exits = [p for p in description if EXIT_PARAGRAPH.match(p)] or root_exit
    description = [p for p in description if p not in exits]
    examples: list[str] = []
    for para in paragraphs(command.epilog):
        lines = para.lstrip("\b").strip("\n").split("\n")
        if lines and lines[0].strip() == EXAMPLES_HEADING:
            examples += [line[2:] if line.startswith("  ") else line for line in lines[1:]]
        else:
            description.append(para)
    return description, exits, examples


def render(ctx: click.Context, root_exit: list[str], children: list[tuple[str, click.Command]]) -> Page:
    command, path = ctx.command, ctx.command_path
    name = path.replace(" ", "-")
    description, exits, examples = _split_help(command, root_exit)
    lines = [f'.TH {_quoted(name.upper())} "1" "" {_quoted("introspect " + __version__)} "introspect manual"',
             ".nh", ".ad l",  # no hyphenation, ragged right: a path or an option is never split or stretched
             ".SH NAME", f"{escape(name)} \\- {escape(_first_line(command))}",
             ".SH SYNOPSIS", f".B {escape(path)}", escape(" ".join(command.collect_usage_pieces(ctx)))]
    lines += [".SH DESCRIPTION", *_body([_first_line(command), *description])]
    options = [p.get_help_record(ctx) for p in command.get_params(ctx) if isinstance(p, click.Option)]
    records = [record for record in options if record is not None]
    if records:
        lines.append(".SH OPTIONS")
        for record in records:
            lines += _option(record)
    if children:
        lines.append(".SH COMMANDS")
        for child_name, child in children:
            lines += [".TP", f"\\fB{escape(path)} {escape(child_name)}\\fR", escape(_first_line(child)),
                      f"See \\fB{escape(name)}\\-{escape(child_name)}\\fR(1)."]
    if examples:
        lines += [".SH EXAMPLES", *_verbatim(examples)]
    if exits:
        lines += [".SH EXIT STATUS", *_body(exits)]
    see = ["introspect"] if ctx.parent is not None else []
    see += [f"{name}-{child_name}" for child_name, _ in children]
    if see:
        lines += [".SH SEE ALSO", ",\n".join(f"\\fB{escape(page)}\\fR(1)" for page in see)]
    return Page(path, "\n".join(line for line in lines if line != "") + "\n")


def walk(command: click.Command, name: str = "introspect",
         parent: click.Context | None = None) -> Iterator[tuple[click.Context, list[tuple[str, click.Command]]]]:
    """Every visible command, parents first, with its visible subcommands."""
    # The command's context_settings (help_option_names=['-h', '--help']) apply as click applies
    # them in make_context, so the page lists -h where --help does.
    ctx = click.Context(command, info_name=name, parent=parent, **command.context_settings)
    children: list[tuple[str, click.Command]] = []
    if isinstance(command, click.Group):
        for child_name in command.list_commands(ctx):
            child = command.get_command(ctx, child_name)
            if child is not None and not child.hidden:
                children.append((child_name, child))
    yield ctx, children
    for child_name, child in children:
        yield from walk(child, child_name, ctx)


def man_pages(root: click.Command) -> list[Page]:
    """``introspect.1`` and one ``introspect-COMMAND[-SUB].1`` per command. The root's ``Exit``
    paragraph is the EXIT STATUS of every command that does not state its own (the one rule)."""
    root_exit = [p for p in paragraphs(root.help) if EXIT_PARAGRAPH.match(p)]
    return [render(ctx, root_exit, children) for ctx, children in walk(root)]
