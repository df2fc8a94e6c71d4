"""``introspect completion SHELL``: the shell's completion script, as ``gh completion`` prints.

The script is click's own (https://click.palletsprojects.com/en/stable/shell-completion/):
it calls ``introspect`` back with ``_INTROSPECT_COMPLETE`` set, and click answers from the
command tree, so commands and options added later complete without regenerating anything.
"""

from __future__ import annotations

import click
from click.shell_completion import CompletionItem, get_completion_class

from introspect.errors import UsageError

SHELLS = ("bash", "zsh", "fish")
# click.Group.main derives this name from prog_name ("_{PROG}_COMPLETE"), and main() passes
# prog_name="introspect": https://github.com/pallets/click/blob/main/src/click/core.py
COMPLETE_VAR = "_INTROSPECT_COMPLETE"


def _complete_shell(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    return [CompletionItem(name) for name in SHELLS if name.startswith(incomplete)]


@click.command(name="completion", epilog="""\b
Examples:
  eval "$(introspect completion bash)"                               # in ~/.bashrc
  introspect completion zsh > "${fpath[1]}/_introspect"               # then restart zsh
  introspect completion fish > ~/.config/fish/completions/introspect.fish""")
@click.argument("shell", metavar="SHELL", shell_complete=_complete_shell)
def completion(shell: str) -> None:
    """Print the shell completion script for bash, zsh or fish.

    Load it from the shell's startup file (see Examples); commands and options then complete
    with TAB.
    """
    # Checked here rather than by click.Choice: click's own message would end in a prose
    # hint, ours ends in a command to paste.
    script_class = get_completion_class(shell) if shell in SHELLS else None
    if script_class is None:
        raise UsageError(f"no completion for shell {shell!r} (bash, zsh and fish have one)",
                         hint="introspect completion bash   # or: zsh, fish")
    from introspect.cli.main import cli  # imported here: main imports this module lazily, by name

    click.echo(script_class(cli, {}, "introspect", COMPLETE_VAR).source(), nl=False)
