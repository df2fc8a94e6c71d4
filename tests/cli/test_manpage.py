"""``introspect man``: one roff page per command from the click tree (help, options, examples,
exit codes), which groff renders without a warning and whose examples read as ``--help`` shows them."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import click
import pytest

from introspect.cli.main import cli, main
from introspect.cli.manpage import escape, man_pages
from tests.cli.test_help_examples import COMMANDS, examples_of
from tests.conftest import run_cli

PAGES = {page.filename: page for page in man_pages(cli)}
MACROS = {".TH", ".SH", ".PP", ".TP", ".nf", ".fi", ".RS", ".RE", ".B", ".nh", ".ad"}
GROFF = shutil.which("groff")


def test_one_page_per_command() -> None:
    assert set(PAGES) == {"-".join(path) + ".1" for path, _command, _ctx in COMMANDS}


@pytest.mark.parametrize(("path", "command", "ctx"), COMMANDS, ids=[" ".join(p) for p, _, _ in COMMANDS])
def test_page_has_the_help_options_examples_and_exit_codes(path: tuple[str, ...], command: click.Command,
                                                           ctx: click.Context) -> None:
    roff = PAGES["-".join(path) + ".1"].roff
    lines = roff.splitlines()
    assert lines[0].startswith(f'.TH "{escape("-".join(path).upper())}" "1"'), lines[0]
    sections = [line.split(" ", 1)[1] for line in lines if line.startswith(".SH ")]
    assert sections[:4] == ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS"], sections
    assert "EXAMPLES" in sections and "EXIT STATUS" in sections, sections
    # Text never starts a line with a request character; macros are the ones the page uses.
    assert {line.split(" ", 1)[0] for line in lines if line.startswith((".", "'"))} <= MACROS, roff
    assert "\b" not in roff and "\x1b" not in roff
    for param in command.get_params(ctx):
        if isinstance(param, click.Option) and not param.hidden:
            for name in param.opts:
                assert f"\\fB{escape(name.rstrip(','))}\\fR" in roff, (name, path)
    shown = examples_of(command.get_help(ctx))
    examples = roff.split(".SH EXAMPLES\n", 1)[1].split(".SH ", 1)[0]
    body = re.sub(r"\\e", "\\\\", examples.replace("\\-", "-"))
    joined = " ".join(body.replace("\\\n", " ").split())  # continuation lines, as --help's are joined
    for example in shown:
        assert " ".join(example.split()) in joined, (example, examples)


@pytest.mark.skipif(GROFF is None, reason="groff is not installed: the structure checks above still run")
def test_groff_renders_every_page_without_warnings(tmp_path: Path) -> None:
    for name, page in PAGES.items():
        source = tmp_path / name
        source.write_text(page.roff, encoding="utf-8")
        run = subprocess.run([GROFF or "groff", "-man", "-Tutf8", "-ww", "-P-cbou", str(source)], capture_output=True,
                             text=True, check=False)
        assert run.returncode == 0 and run.stderr == "", (name, run.stderr)
        assert run.stdout.isascii(), name  # options and examples paste as typed: ASCII hyphen-minus, quotes
        assert "EXAMPLES" in run.stdout and "introspect" in run.stdout, name


def test_man_command_writes_every_page(tmp_path: Path) -> None:
    out = tmp_path / "man1"
    result = run_cli("man", "--out", str(out))
    assert result.code == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(PAGES), list(out.iterdir())
    assert (out / "introspect-probe.1").read_text(encoding="utf-8") == PAGES["introspect-probe.1"].roff
    assert f"wrote {len(PAGES)} man pages to {out}" in result.stderr


def test_man_prints_one_page_and_refuses_an_unknown_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["man", "history", "prune"]) == 0
    assert capsys.readouterr().out == PAGES["introspect-history-prune.1"].roff
    assert main(["man", "nope"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "error: no command `introspect nope`" and err[1].startswith("fix: introspect --help"), err



def test_pages_list_the_short_help_option_as_help_does() -> None:
    # `introspect probe --help` lists "-h, --help" (the group's context_settings); the page must too.
    assert r"\fB\-h\fR, \fB\-\-help\fR" in PAGES["introspect-probe.1"].roff
