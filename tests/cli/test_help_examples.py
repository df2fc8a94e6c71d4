"""Every command's ``--help`` ends with an ``Examples:`` block whose lines run as written: each
parses as shell, names an existing command, and passes click's own parser (existing options,
the right number of operands, the required options given)."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Iterator

import click
import pytest

from introspect.cli.main import cli
from introspect.cli.session import GLOBAL_FLAGS

HEADING = "Examples:"
OPERATORS = frozenset({"|", "||", "&&", ";", "&"})
REDIRECTS = frozenset({">", ">>", "<", "2>", "&>"})


def walk(command: click.Command, path: tuple[str, ...] = ("introspect",),
         parent: click.Context | None = None) -> Iterator[tuple[tuple[str, ...], click.Command, click.Context]]:
    ctx = click.Context(command, info_name=path[-1], parent=parent)
    yield path, command, ctx
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, name
            yield from walk(sub, (*path, name), ctx)


COMMANDS = list(walk(cli))


def examples_of(help_text: str) -> list[str]:
    """The example command lines under the heading (continuation lines joined)."""
    lines = help_text.splitlines()
    headings = [i for i, line in enumerate(lines) if line.strip() == HEADING]
    if not headings:
        return []
    indent = len(lines[headings[-1]]) - len(lines[headings[-1]].lstrip())
    out: list[str] = []
    pending = ""
    for line in lines[headings[-1] + 1:]:
        if not line.strip() or len(line) - len(line.lstrip()) <= indent:
            break
        pending += line.strip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        out.append(pending)
        pending = ""
    assert not pending, f"a continued example at the end: {pending!r}"
    return out


def invocations(line: str) -> list[list[str]]:
    """The argv (after ``introspect``) of each introspect command in a shell line: pipes, ``||``,
    redirections, ``VAR=value`` prefixes and ``"$(...)"`` are the shell's, not click's."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = list(lexer)
    found: list[list[str]] = []
    segment: list[str] = []
    skip = False
    for word in [*words, ";"]:
        if skip:
            skip = False
        elif word in REDIRECTS:
            skip = True  # its file name
        elif word in OPERATORS:
            while segment and "=" in segment[0] and segment[0].split("=", 1)[0].isidentifier():
                segment.pop(0)
            if segment and segment[0] == "introspect":
                found.append(segment[1:])
            for inner in (w[2:-1] for w in segment if w.startswith("$(") and w.endswith(")")):
                found += invocations(inner)
            segment = []
        else:
            segment.append(word)
    return found


def check_argv(argv: list[str]) -> str:
    """Parse ``argv`` as ``introspect`` would; the command path it reaches."""
    argv = [word for word in argv if word not in GLOBAL_FLAGS]  # main() takes them from anywhere
    command: click.Command = cli
    name, parent = "introspect", None
    while True:
        strict = click.Context(command, info_name=name, parent=parent)
        # The parser alone raises for an unknown option or a missing option value, which
        # make_context's resilient parsing (below) would swallow.
        _opts, rest, _order = command.make_parser(strict).parse_args(list(argv))
        ctx = command.make_context(name, list(argv), parent=parent, resilient_parsing=True)
        if not isinstance(command, click.Group) or not rest:
            break
        sub = command.get_command(ctx, rest[0])
        assert sub is not None, f"no command {rest[0]!r} in {ctx.command_path}"
        command, name, parent, argv = sub, rest[0], ctx, rest[1:]
    assert not rest or isinstance(command, click.Group), f"{ctx.command_path}: extra operands {rest}"
    asks_help = any(word in ctx.help_option_names for word in argv)  # --help needs nothing else
    for param in command.params:
        if param.required and not asks_help:
            assert ctx.params.get(param.name) not in (None, ()), f"{ctx.command_path}: {param.name} missing"
    return ctx.command_path


@pytest.mark.parametrize(("path", "command", "ctx"), COMMANDS, ids=[" ".join(p) for p, _, _ in COMMANDS])
def test_every_help_ends_with_examples_that_parse(path: tuple[str, ...], command: click.Command,
                                                   ctx: click.Context) -> None:
    help_text = command.get_help(ctx)
    examples = examples_of(help_text)
    assert len(examples) >= 2, f"`{' '.join(path)} --help` has no {HEADING} block of 2+ commands:\n{help_text}"
    bash = subprocess.run(["bash", "-n"], input="\n".join(examples) + "\n", capture_output=True, text=True,
                          check=False)
    assert bash.returncode == 0, (examples, bash.stderr)
    reached = []
    for line in examples:
        argvs = invocations(line)
        assert argvs, f"an example that runs no introspect command: {line!r}"
        try:
            reached += [check_argv(argv) for argv in argvs]
        except click.ClickException as exc:
            pytest.fail(f"{line!r}: {exc.format_message()}")
    # Each block shows its own command (a group's may show its subcommands; a step before it, e.g.
    # the probe that saves what `compare` reads, may be another's).
    assert any(r.split()[:len(path)] == list(path) for r in reached), (path, reached)


def test_a_wrong_example_is_caught() -> None:
    """The checks above can fail: an unknown option, a missing value, an unknown command."""
    with pytest.raises(click.NoSuchOption):
        check_argv(shlex.split("probe --model /m --no-such-flag"))
    with pytest.raises(click.BadOptionUsage):
        check_argv(["probe", "--model"])
    with pytest.raises(AssertionError, match="no command"):
        check_argv(["prob", "--model", "/m"])
    with pytest.raises(AssertionError, match="missing"):
        check_argv(["probe", "--json"])
    with pytest.raises(AssertionError, match="extra operands"):
        check_argv(["plan", "a.json", "b.json"])
    assert invocations('eval "$(introspect completion bash)"') == [["completion", "bash"]]
    assert invocations("X=1 introspect env --json > env.json || echo failed") == [["env", "--json"]]
