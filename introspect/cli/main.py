"""``introspect``: the CLI is an error shell around the commands (httpie-style).

The commands contain no error handling of their own: every IntrospectError
reaching ``main()`` is printed as one ``error:`` line plus one ``fix:`` line,
and its exit code returned. ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import logging
import sys

import click

from introspect.errors import EXIT_USAGE, IntrospectError


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--debug", is_flag=True, help="Show tracebacks and remote stderr.")
@click.version_option(package_name="introspect")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Remote model introspection over SSH: architecture, experts, tokenizer and venv health."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def _register() -> None:
    # Imported here so that `introspect --help` stays fast and each command lives in its own module.
    from introspect.cli import cmd_probe

    cli.add_command(cmd_probe.probe)
    cli.add_command(cmd_probe.profile_cmd)
    for module_name in ("cmd_health", "cmd_preflight", "cmd_models", "cmd_diff"):
        try:
            module = __import__(f"introspect.cli.{module_name}", fromlist=["COMMANDS"])
        except ModuleNotFoundError:
            continue
        for command in getattr(module, "COMMANDS", ()):
            cli.add_command(command)


_register()


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


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _quiet_libraries(_debug_requested(argv))
    try:
        result = cli.main(args=argv, prog_name="introspect", standalone_mode=False)
        return int(result or 0)
    except IntrospectError as exc:
        if _debug_requested(argv):
            raise
        click.echo(f"error: {exc.one_line()}", err=True)
        if exc.hint:
            click.echo(f"fix: {exc.hint}", err=True)
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.Abort:
        # click turns Ctrl-C into Abort; by now the executors closed their channels.
        click.echo("error: interrupted; remote probes were stopped", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return EXIT_USAGE
    except KeyboardInterrupt:
        click.echo("error: interrupted; remote probes were stopped", err=True)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - the last line of defence: never a raw traceback
        if _debug_requested(argv):
            raise
        click.echo(f"error: internal error: {type(exc).__name__}: {exc}", err=True)
        click.echo("fix: rerun with --debug and report the traceback", err=True)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
