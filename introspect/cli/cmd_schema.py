"""``introspect schema``: print the JSON Schema of a document introspect emits.

The schemas ship in the package (introspect/schemas/, generated from the typed models of
introspect/documents by ``python -m introspect.documents.export``); printing one reads the
file and imports no model.
"""

from __future__ import annotations

from importlib import resources

import click

from introspect.cli import help_examples
from introspect.errors import UsageError

SCHEMA_EXAMPLES = help_examples.examples(
    "introspect schema --list                     # every document, its version",
    "introspect schema profile > profile.v1.json  # validate probe --json output with it",
    "introspect schema raw                        # the file probe --save-raw writes",
)


def _versions() -> dict[str, str]:
    """Document name -> its current version, from the VERSIONS file shipped with the schemas."""
    text = resources.files("introspect.schemas").joinpath("VERSIONS").read_text(encoding="utf-8")
    rows = [line.split() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return {row[0]: row[1] for row in rows}


def _name_of(name: str) -> str:
    """``profile``, ``profile/v1`` or ``introspect.profile/v1`` -> ``profile``."""
    return name.removeprefix("introspect.").split("/", 1)[0]


@click.command("schema", epilog=SCHEMA_EXAMPLES)
@click.argument("name", required=False, metavar="NAME")
@click.option("--list", "list_all", is_flag=True, help="List the documents (name, version, schema id).")
def schema(name: str | None, list_all: bool) -> int:
    """Print the JSON Schema of a document introspect emits (profile, raw, health, plan, ...).

    NAME is the document's name, as in its `schema` key: `profile` for introspect.profile/v1.
    """
    versions = _versions()
    if list_all or name is None:
        if name is not None:
            raise UsageError("--list lists every document; NAME prints one schema",
                             hint=f"introspect schema {name}")
        if not list_all:
            raise UsageError("which schema? name a document", hint="introspect schema --list")
        for doc, version in sorted(versions.items()):
            click.echo(f"{doc:<16} introspect.{doc}/{version}")
        return 0
    key = _name_of(name)
    if key not in versions:
        raise UsageError(f"no document named {name!r} (known: {', '.join(sorted(versions))})",
                         hint="introspect schema --list")
    path = resources.files("introspect.schemas").joinpath(f"{key}.{versions[key]}.json")
    click.echo(path.read_text(encoding="utf-8"), nl=False)
    return 0
