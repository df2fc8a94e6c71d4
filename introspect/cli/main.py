"""``introspect``: the CLI is an error shell around the commands (httpie-style).

The commands contain no error handling of their own: every IntrospectError
reaching ``main()`` is printed as one ``error:`` line plus one ``fix:`` line,
and its exit code returned (the rule is in :mod:`introspect.cli.outcome`).
``--debug`` (anywhere on the line) adds the traceback and keeps the exit code.
With ``--json`` a failure is also one ``introspect.error/v1`` document on stdout.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import sys
import traceback

import click

from introspect import __version__, interrupts
from introspect.cli import help_examples
from introspect.cli.jsonout import dumps, error_code, error_document
from introspect.cli.outcome import Finished, Notice, notice
from introspect.cli.safe_text import one_line
from introspect.cli.session import session, start_session
from introspect.errors import EXIT_FINDINGS, EXIT_USAGE, IntrospectError
from introspect.redact import scrub, scrub_fields

# command name -> ("module:attribute", the first line of its help). Commands are imported only
# when used, so that `introspect probe` does not pay for importing health, preflight,
# prometheus_client... and `introspect --help` lists them from these lines without importing
# any (tests/cli/test_lazy_imports.py checks that each line is the command's own).
LAZY_COMMANDS = {
    "probe": ("introspect.cli.cmd_probe:probe", "Profile a model directory: architecture, experts, tokenizer, "
              "chat template, venv, engines, GPUs, plan."),
    "profile": ("introspect.cli.cmd_probe:profile_cmd", "Rebuild a profile from saved raw facts "
                "(`probe --save-raw`) or Ansible's results, without any host."),
    "health": ("introspect.cli.cmd_health:health", "Check the venvs of every host in the inventory (or one "
               "--host): packages, imports, tokenizers, disk, GPUs."),
    "history": ("introspect.cli.cmd_history:history", "Past `introspect health` runs: when, how many hosts, "
                "what passed and failed, what drifted."),
    "preflight": ("introspect.cli.cmd_preflight:preflight", "Gate a data-generation job: tokenizer, chat "
                  "template, loss masks, mask token, ids, endpoint, disk."),
    "models": ("introspect.cli.cmd_models:models", "List the model directories on a host (or the inventory's "
               "hosts): plain dirs and the HF cache."),
    "compare": ("introspect.cli.cmd_compare:compare", "Which hosts differ: a hosts x facts matrix of saved "
                "profiles and live hosts, odd values marked."),
    "gpus": ("introspect.cli.cmd_gpus:gpus", "GPU facts of hosts without a model: names, count, memory, driver "
             "and CUDA (nvidia-smi)."),
    "diff": ("introspect.cli.cmd_diff:diff", "Compare two model profiles: saved files or live HOST:PATH / "
             "HOST:org/name[@rev] targets."),
    "plan": ("introspect.cli.cmd_plan:plan", "Which TP / EP / PP layouts fit, with how much KV cache, from a "
             "saved profile."),
    "report": ("introspect.cli.cmd_report:report", "Draw profiles, plans, fleets and health history as one "
               "self-contained HTML page (or Markdown)."),
    "env": ("introspect.cli.cmd_env:env", "Versions, platform and config paths for a bug report (secrets are "
            "never shown)."),
    "completion": ("introspect.cli.cmd_completion:completion", "Print the shell completion script for bash, zsh "
                   "or fish."),
    "cache": ("introspect.cli.cmd_cache:cache", "The local cache of probe results: where it is, how big, and "
              "emptying it."),
    "init": ("introspect.cli.cmd_init:init", "Write a starter inventory (from ~/.ssh/config or an Ansible "
             "inventory) and user config."),
    "man": ("introspect.cli.cmd_man:man", "Write the manual pages (roff), generated from the same text as --help."),
    "schema": ("introspect.cli.cmd_schema:schema", "Print the JSON Schema of a document introspect emits "
               "(profile, raw, health, plan, ...)."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(LAZY_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in LAZY_COMMANDS:
            return None
        module_name, attribute = LAZY_COMMANDS[cmd_name][0].split(":")
        return getattr(importlib.import_module(module_name), attribute)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # click's own imports every command for its line; a stand-in with the same help is
        # shortened to the column width exactly as the command itself would be.
        stand_ins = {name: click.Command(name, help=line) for name, (_target, line) in LAZY_COMMANDS.items()}
        limit = formatter.width - 6 - max(map(len, stand_ins))
        with formatter.section("Commands"):
            formatter.write_dl([(name, stand_ins[name].get_short_help_str(limit)) for name in sorted(stand_ins)])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
             epilog=help_examples.INTROSPECT)
# The three global flags are taken out of argv by main() wherever they stand (see
# cli/session.py); they are declared here for --help.
@click.option("--debug", is_flag=True, help="Also show tracebacks and library logs (exit codes stay the same).")
@click.option("--quiet", is_flag=True, help="Print only error/fix lines (and --json's document); no report, "
              "progress or warnings.")
@click.option("--wide", is_flag=True, help="Tables as wide as their content instead of folded to the terminal.")
@click.version_option(version=__version__, prog_name="introspect")
@click.pass_context
def cli(ctx: click.Context, debug: bool, quiet: bool, wide: bool) -> None:
    """Remote model introspection over SSH: architecture, experts, tokenizer and venv health.

    Exit codes: 0 ok, 1 findings or failed checks, 2 bad usage or input, 3 host unreachable,
    authentication refused or host key rejected; 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP (remote probes
    stopped, nothing left running). --debug, --quiet and --wide go anywhere.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = session().debug


def _quiet_libraries(debug: bool) -> None:
    """paramiko logs handshake failures with tracebacks through logging's last-resort
    handler; we report those errors ourselves, in one line. --debug shows them."""
    for name in ("paramiko", "fabric", "invoke"):
        logger = logging.getLogger(name)
        if debug:
            logging.basicConfig(level=logging.DEBUG, format="%(name)s: %(message)s")
        else:
            logger.addHandler(logging.NullHandler())
            logger.propagate = False


def print_notices(notices: tuple[Notice, ...] | list[Notice]) -> None:
    """The one printer of ``error:``/``fix:`` lines (stderr, in the order given, never wrapped)."""
    for item in notices:
        if item.level == "warning" and session().quiet:
            continue
        # Messages carry host-controlled text (paths, model_type, remote stderr): escaped, so a
        # terminal shows an ESC sequence instead of obeying it, and each line stays one line.
        click.echo(f"{item.level}: {one_line(item.text)}", err=True)
        for line in fix_lines(item.hint):
            click.echo(f"fix: {one_line(line)}", err=True)


def fix_lines(hint: str | None) -> list[str]:
    """A hint as the ``fix:`` lines to print: one per line of it (a command, then a ``# comment``
    naming the alternative), and a sentence as a ``# comment``, so that each pastes as it reads."""
    if not hint:
        return []
    from introspect.cli.fix_lines import shell_line  # only once a fix is printed

    return [shell_line(line) for line in hint.splitlines() if line.strip()]


def warning_notices() -> list[Notice]:
    """The run's known_hosts warnings (only when a command loaded known_hosts at all)."""
    connect = sys.modules.get("introspect.cli.connect")
    lines = connect.known_hosts_warnings() if connect is not None else []
    cache = sys.modules.get("introspect.client.cache")  # a healed entry, a cache write that failed
    cached = cache.drain_warnings() if cache is not None else []
    config = sys.modules.get("introspect.userconfig")  # an XDG variable that names no directory
    cached += config.dir_warnings() if config is not None else []
    return [*(Notice(line, level="warning") for line in lines),
            *(Notice(text, hint, level="warning") for text, hint in cached)]


def finish(notices: list[Notice], code: int) -> int:
    """Print the notices; under --json, also the error document when no document was printed."""
    notices = [scrub_fields(item) for item in notices]  # the last guard: no secret in an error/fix line
    print_notices(notices)
    state = session()
    errors = [n for n in notices if n.level == "error"]
    if state.json and not state.json_printed and code != 0 and errors:
        first = errors[0]
        hint = "\n".join(fix_lines(first.hint)) or None  # the lines the fix: lines print
        click.echo(dumps(error_document(error_code(first.kind or "error"), first.text, hint, code, first.host)))
        state.json_printed = True
    return code


class _HelpPrinted(click.UsageError):
    """Never raised: click 8.1 prints a bare group's help and exits 0 itself."""


# Since 8.2 click raises this for a group called without its subcommand (Group.parse_args), and its
# standalone mode prints the help as an error, exit 2:
# https://github.com/pallets/click/blob/8.2.0/src/click/core.py#L1784
NO_ARGS_IS_HELP: type[click.UsageError] = getattr(click.exceptions, "NoArgsIsHelpError", _HelpPrinted)


def _usage_notice(exc: click.ClickException) -> Notice:
    ctx = getattr(exc, "ctx", None)
    where = ctx.command_path if ctx is not None else "introspect"
    return Notice(exc.format_message(), f"{where} --help", kind="UsageError")


def main(argv: list[str] | None = None) -> int:
    # SIGTERM (systemd stop, timeout(1)) and SIGHUP (a closed terminal) raise as Ctrl-C does, so
    # that every cleanup path runs: see introspect/interrupts.py.
    with interrupts.handling():
        try:
            return _main(argv)
        except KeyboardInterrupt as exc:  # one that arrived while the outcome was printed
            return _interrupted(exc)


def _main(argv: list[str] | None) -> int:
    argv = start_session(list(sys.argv[1:] if argv is None else argv))
    debug = session().debug
    _quiet_libraries(debug)
    try:
        result = cli.main(args=argv, prog_name="introspect", standalone_mode=False)
        if isinstance(result, Finished):
            return finish([*warning_notices(), *result.notices], result.code)
        return finish(warning_notices(), int(result or 0))
    except IntrospectError as exc:
        if debug:
            click.echo(scrub(traceback.format_exc()), err=True, nl=False)  # secrets masked here too
        return finish([*warning_notices(), notice(exc)], exc.exit_code)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except NO_ARGS_IS_HELP as exc:  # a group without its subcommand (`introspect cache`): its help, as gh does
        click.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
        return 0
    except click.Abort as exc:
        # click turns Ctrl-C (and our Terminated) into Abort; by now the executors closed their channels.
        return _interrupted(exc.__cause__ or exc.__context__)
    except click.ClickException as exc:
        return finish([_usage_notice(exc)], EXIT_USAGE)
    except KeyboardInterrupt as exc:
        return _interrupted(exc)
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - the last line of defence: never a raw traceback
        if interrupts.stopping():  # e.g. click's newline to the terminal that SIGHUP took away
            return _interrupted(None)
        if debug:
            click.echo(scrub(traceback.format_exc()), err=True, nl=False)  # secrets masked here too
        return finish([Notice(f"internal error: {type(exc).__name__}: {exc}",
                              "introspect env  # rerun with --debug, report the traceback with this output",
                              kind="InternalError")], EXIT_FINDINGS)


def _interrupted(exc: BaseException | None) -> int:
    """The one error line of a run stopped by a signal, exit 128 + the signal (130 for Ctrl-C).
    A command that kept a partial result (probe, health) printed it and returned its own
    Finished with this same line; this is the path of a run stopped before it had any."""
    signum = interrupts.signum_of(exc)
    text, fix, kind = interrupts.describe(signum)
    # After SIGHUP the terminal may be gone: writing to it must not turn into an internal error.
    with contextlib.suppress(OSError):
        finish([Notice(text, fix, kind=kind)], 128 + signum)
    return 128 + signum


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
