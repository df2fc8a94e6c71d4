"""``introspect``: the CLI is an error shell around the commands (httpie-style).

The commands contain no error handling of their own: every IntrospectError
reaching ``main()`` is printed as one ``error:`` line plus one ``fix:`` line,
and its exit code returned. ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import importlib
import logging
import sys

import click

from introspect.cli.outcome import Finished, Notice, notice
from introspect.errors import EXIT_USAGE, IntrospectError

# command name -> "module:attribute". Commands are imported only when used, so that
# `introspect probe` does not pay for importing health, preflight, prometheus_client...
LAZY_COMMANDS = {
    "probe": "introspect.cli.cmd_probe:probe",
    "profile": "introspect.cli.cmd_probe:profile_cmd",
    "health": "introspect.cli.cmd_health:health",
    "history": "introspect.cli.cmd_history:history",
    "preflight": "introspect.cli.cmd_preflight:preflight",
    "models": "introspect.cli.cmd_models:models",
    "diff": "introspect.cli.cmd_diff:diff",
    "plan": "introspect.cli.cmd_plan:plan",
    "cache": "introspect.cli.cmd_cache:cache",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(LAZY_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = LAZY_COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attribute = target.split(":")
        return getattr(importlib.import_module(module_name), attribute)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--debug", is_flag=True, help="Show tracebacks and remote stderr.")
@click.version_option(package_name="introspect")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Remote model introspection over SSH: architecture, experts, tokenizer and venv health."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def _debug_requested(argv: list[str]) -> bool:
    return "--debug" in argv


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
    """The one printer of ``error:``/``fix:`` lines (stderr, in the order given)."""
    for item in notices:
        click.echo(f"{item.level}: {item.text}", err=True)
        if item.hint:
            click.echo(f"fix: {item.hint}", err=True)


def warning_notices() -> list[Notice]:
    """The run's known_hosts warnings (only when a command loaded known_hosts at all)."""
    connect = sys.modules.get("introspect.cli.connect")
    lines = connect.known_hosts_warnings() if connect is not None else []
    return [Notice(line, level="warning") for line in lines]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _quiet_libraries(_debug_requested(argv))
    try:
        result = cli.main(args=argv, prog_name="introspect", standalone_mode=False)
        if isinstance(result, Finished):
            print_notices([*warning_notices(), *result.notices])
            return result.code
        print_notices(warning_notices())
        return int(result or 0)
    except IntrospectError as exc:
        if _debug_requested(argv):
            raise
        print_notices([*warning_notices(), notice(exc)])
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.Abort:
        # click turns Ctrl-C into Abort; by now the executors closed their channels.
        print_notices([Notice("interrupted; remote probes were stopped")])
        return 130
    except click.ClickException as exc:
        exc.show()
        return EXIT_USAGE
    except KeyboardInterrupt:
        print_notices([Notice("interrupted; remote probes were stopped")])
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - the last line of defence: never a raw traceback
        if _debug_requested(argv):
            raise
        print_notices([Notice(f"internal error: {type(exc).__name__}: {exc}",
                              "rerun with --debug and report the traceback")])
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
