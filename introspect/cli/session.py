"""The run's global flags (``--debug``, ``--quiet``, ``--wide``), accepted anywhere on the line.

``main`` takes them out of argv before click parses it, so ``introspect probe ... --debug``
and ``introspect --debug probe ...`` are the same command with the same exit code; the
renderers and the progress display read them from :data:`SESSION`.
"""

from __future__ import annotations

from dataclasses import dataclass

# flag -> Session attribute. Only long forms: every short letter may be a command's own option.
GLOBAL_FLAGS = {"--debug": "debug", "--quiet": "quiet", "--wide": "wide"}


@dataclass
class Session:
    debug: bool = False  # tracebacks and library logs on stderr; exit codes unchanged
    quiet: bool = False  # no report, progress or warnings: only error/fix lines (and --json's document)
    wide: bool = False  # tables as wide as their content, never folded to the terminal
    json: bool = False  # the command was asked for --json: one document on stdout, even on failure
    json_printed: bool = False  # a document went to stdout already (an error must not add a second)


SESSION = Session()


def start_session(argv: list[str]) -> list[str]:
    """Reset :data:`SESSION` from ``argv`` and return argv without the global flags.

    Words after ``--`` are operands, never flags."""
    global SESSION
    SESSION = Session()
    rest: list[str] = []
    operands = False
    for word in argv:
        if operands:
            rest.append(word)
            continue
        if word == "--":
            operands = True
        elif word in GLOBAL_FLAGS:
            setattr(SESSION, GLOBAL_FLAGS[word], True)
            continue
        elif word == "--json":
            SESSION.json = True
        rest.append(word)
    return rest


def session() -> Session:
    return SESSION
