"""Fix lines a user can paste: the report's ``To fix:`` and ``Optional:`` blocks.

A finding's ``fix`` is either a shell command (the why after ``#``) or, in older findings,
a sentence. A sentence pasted into a shell is a syntax error or, worse, runs its first word
(``check``, ``test``), so every line printed here is a command or a ``# comment``:
:func:`shell_line` turns a sentence into a comment and leaves a command alone.

``To fix:`` holds the fixes of warnings and errors only. An info finding's fix is an
optional extra (e.g. torch for the model-code witness, gigabytes a serving venv does not
need), so it goes under ``Optional:``, after the report.

A block is never wider than the terminal in prose: a ``# comment`` folds at word boundaries
into several ``# `` lines, and a command's trailing ``  # why`` moves onto a ``# `` line above
it when the line would not fit. A command itself is never folded: it pastes as it reads.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

from introspect.cli.remote_fix import fix_on_target, split_comment
from introspect.cli.render_term import Fixes, print_fixes
from introspect.remote.contract import as_dict

if TYPE_CHECKING:
    from rich.console import Console

    from introspect.client.fleet_items import FleetItem
    from introspect.documents.profile import ProfileDocument

# First words of the commands our fixes print; any other first word is read as prose.
PROGRAMS = frozenset({
    "introspect", "pip", "pip3", "python", "python3", "uv", "ls", "cp", "mv", "ln", "rm", "mkdir",
    "chmod", "chown", "cat", "df", "du", "nvidia-smi", "podman", "docker", "ssh", "ssh-keygen",
    "ssh-keyscan", "sudo", "export", "hf", "huggingface-cli", "git", "systemctl", "ansible",
    "ansible-playbook", "ansible-doc", "sha256sum", "kubectl", "lxc", "lxc-ls", "lxc-start", "pct", "snap",
    "apt-get", "fuser", "sqlite3", "touch", "unset", "ansible-inventory", "command",
})
BLOCKING = ("error", "warning")
INDENT = 2  # of every line of a block under its heading
HANG = 2  # more for a folded comment's next lines: "#   ..." reads as the same comment


def is_command(line: str) -> bool:
    """Whether ``line`` reads as a shell command: balanced quotes, and a first word that is a
    program we print, a path to one, or an environment assignment (``CUDA_VISIBLE_DEVICES=0``)."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:  # an apostrophe in a sentence: unbalanced quotes
        return False
    if not words:
        return line.lstrip().startswith("#")
    first = words[0]
    return (first in PROGRAMS or "/" in first or first.startswith("${")  # ${EDITOR:-vi} FILE
            or ("=" in first and first.split("=", 1)[0].isidentifier()))


def shell_line(fix: str) -> str:
    """``fix`` as a line that parses as shell: a command as it is, a sentence as a comment."""
    text = " ".join(fix.split("\n")).strip()
    return text if is_command(text) else f"# {text}"


def fold_comment(text: str, width: int) -> list[str]:
    """``text`` (a comment without its ``#``) as ``# `` lines that fit ``width`` under the block's
    indent, broken only between words (a number keeps its unit); a word too long for a line is
    a line of its own, whole."""
    from rich.text import Text

    from introspect.cli.render_fold import fold

    room = width - INDENT - len("# ")
    lines = fold(Text(" ".join(text.split())), room, room - HANG)
    return ["# " + (" " * HANG if i else "") + line.plain for i, line in enumerate(lines)]


def paste_lines(lines: Sequence[str], width: int) -> list[str]:
    """A block's lines as printed at ``width``: a ``# comment`` folded (:func:`fold_comment`); a
    command whole, its trailing ``  # why`` on a comment line above it when the two overflow."""
    from rich.cells import cell_len  # rich only once a block is printed for people

    out: list[str] = []
    for line in lines:
        if line.startswith("#"):
            out += fold_comment(line[1:], width)
            continue
        command, comment = split_comment(line)
        if comment and INDENT + cell_len(line) > width:
            out += fold_comment(comment.strip()[1:], width)
            line = command
        out.append(line)
    return out


def print_block(console: Console, heading: str, lines: Sequence[str]) -> None:
    """``heading`` and ``lines`` (shell lines) under it, folded as :func:`paste_lines` says to the
    console's width (``--wide``: never)."""
    from rich.markup import escape

    console.print(f"[bold]{heading}[/]")
    for line in paste_lines(lines, console.width):
        console.print(" " * INDENT + escape(line), soft_wrap=True)


def _lines(profile: ProfileDocument, severities: tuple[str, ...]) -> Fixes:
    # A fix for the profiled machine (pip, ls) runs through its transport (podman exec, ssh).
    target = profile.target.to_dict()
    out = Fixes()
    for item in profile.findings:
        if item.severity in severities and item.fix:
            out.add(fix_on_target(shell_line(item.fix), target))
    return out


def report_fixes(profile: ProfileDocument) -> Fixes:
    """The fixes of warnings and errors, each once, in finding order (the ``To fix:`` block)."""
    return _lines(profile, BLOCKING)


def report_optional(profile: ProfileDocument) -> Fixes:
    """The fixes of info findings: extras that add to a complete profile (the ``Optional:`` block)."""
    return _lines(profile, ("info",))


def fleet_fixes(results: Sequence[FleetItem]) -> Fixes:
    """The fixes of warnings and errors of a fleet's profiles (``probe --all-hosts`` items:
    ``host``, ``profile``), each with the host that needs it and the target it runs through."""
    out = Fixes()
    for item in results:
        profile = item["profile"] or {}
        target = as_dict(profile.get("target"))
        for finding in profile.get("findings") or []:
            finding = as_dict(finding)
            if str(finding.get("severity")) in BLOCKING and finding.get("fix"):
                out.add(shell_line(str(finding["fix"])), item["host"], target)
    return out


def print_fleet_fixes(console: Console, results: Sequence[FleetItem]) -> None:
    """One ``To fix:`` block for the fleet: each command once, with the hosts that need it."""
    print_fixes(console, fleet_fixes(results), gap=True)


def print_report_fixes(console: Console, profile: ProfileDocument) -> None:
    """``To fix:`` then ``Optional:``, each command unfolded so it pastes as it reads."""
    fixes = report_fixes(profile)
    print_fixes(console, fixes)
    optional = report_optional(profile)
    if not optional.items:
        return
    if fixes.items:
        console.print()
    print_block(console, "Optional:", optional.items)
