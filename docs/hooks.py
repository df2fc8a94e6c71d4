"""MkDocs hook (``hooks:`` in mkdocs.yml): the pages that are generated at build time, so they
cannot drift from the code.

- ``<!-- introspect:commands -->`` in docs/commands.md becomes the reference of every command,
  walked from the click group the ``introspect`` command runs (``introspect.cli.main:cli``), the
  lazily imported commands included: usage, help, options (the lines ``--help`` prints, defaults
  and ranges included) and the ``Examples:`` block of each.
- ``<!-- introspect:tests-readme -->`` in docs/tests.md becomes tests/README.md, less its title.
- ``<!-- introspect:schemas -->`` in docs/documents.md becomes one section per JSON Schema found
  in ``introspect/schemas/*.json``: its top-level members and each definition's; the files
  themselves are published beside the page (``schemas/NAME.json``).

Not mkdocs-click (0.9.0): it does list a lazy group's commands through ``list_commands``
(https://github.com/mkdocs/mkdocs-click/blob/0.9.0/mkdocs_click/_docs.py#L122), but it never
renders a command's ``epilog``, where every ``Examples:`` block of ours lives
(introspect/cli/help_examples.py). The help text is split as the man pages split it
(introspect/cli/manpage.py), and each command's context is made as click makes it for
``--help`` (with the group's ``context_settings``), so this page lists what ``--help`` does.

tests/test_docs.py renders the commands page through :func:`commands_markdown` and checks that
every command and option ``--help`` shows is on it; scripts/test builds the site with
``mkdocs build --strict``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

REPO = Path(__file__).resolve().parent.parent
SCHEMAS = REPO / "introspect" / "schemas"
COMMANDS_MARK = "<!-- introspect:commands -->"
SCHEMAS_MARK = "<!-- introspect:schemas -->"
# docs/tests.md shows tests/README.md (the fault matrix) from where it lives, less its title.
TESTS_README_MARK = "<!-- introspect:tests-readme -->"

_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)


def escape(text: str) -> str:
    """Help text as Markdown that shows it as written: code spans kept, HTML and emphasis
    characters outside them escaped (Python-Markdown has no backslash escape for ``<``)."""
    out, pos = [], 0
    for span in _CODE_SPAN.finditer(text):
        out += [_escape_plain(text[pos:span.start()]), span.group(0)]
        pos = span.end()
    return "".join([*out, _escape_plain(text[pos:])])


def _escape_plain(text: str) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([\\*_\[\]])", r"\\\1", text)


def _home(text: str) -> str:
    """Defaults under the building user's home (the history database) as ``~``, as on any machine."""
    return text.replace(str(Path.home()), "~")


def _fence(lines: list[str], lang: str = "text") -> list[str]:
    return [f"```{lang}", *lines, "```", ""]


# --- the commands page -----------------------------------------------------------------------

def _split_help(command: Any) -> tuple[list[str], list[list[str]], list[str]]:
    """(description paragraphs, verbatim blocks, the epilog's Examples lines) of a command."""
    from introspect.cli import manpage

    text: list[str] = []
    blocks: list[list[str]] = []
    examples: list[str] = []
    for para in manpage.paragraphs(command.help)[1:]:
        if para.startswith("\b"):
            blocks.append(para.split("\n")[1:])
        else:
            text.append(" ".join(line.strip() for line in para.split("\n")))
    for para in manpage.paragraphs(command.epilog):
        lines = para.lstrip("\b").strip("\n").split("\n")
        if lines and lines[0].strip() == manpage.EXAMPLES_HEADING:
            examples += [line[2:] if line.startswith("  ") else line for line in lines[1:]]
        else:
            text.append(" ".join(line.strip() for line in lines))
    return text, blocks, examples


def _command_markdown(ctx: Any, children: list[tuple[str, Any]]) -> list[str]:
    from introspect.cli import manpage

    command, path = ctx.command, ctx.command_path
    level = "#" * (3 + max(path.count(" ") - 1, 0))  # under the page's "## Reference"
    anchor = path.replace(" ", "-")
    first = " ".join((manpage.paragraphs(command.help) or [command.short_help or ""])[0].split())
    out = [f"{level} {path} {{#{anchor}}}", "", escape(_home(first)), ""]
    out += _fence([f"{path} {' '.join(command.collect_usage_pieces(ctx))}"])
    text, blocks, examples = _split_help(command)
    out += [line for para in text for line in (escape(_home(para)), "")]
    for block in blocks:
        out += _fence(block)
    records = [p.get_help_record(ctx) for p in command.get_params(ctx) if isinstance(p, click.Option)]
    options = [record for record in records if record is not None]
    if options:
        out += ["**Options**", ""]
        out += [f"- `{names}`" + (f": {escape(_home(help_text))}" if help_text else "")
                for names, help_text in options]
        out.append("")
    if children:
        out += ["**Commands**", ""]
        out += [f"- [`{path} {name}`](#{anchor}-{name})" for name, _child in children]
        out.append("")
    if examples:
        out += ["**Examples**", "", *_fence(examples, "shell")]
    return out


def walk(command: click.Command, name: str = "introspect",
         parent: click.Context | None = None) -> Iterator[tuple[click.Context, list[tuple[str, Any]]]]:
    """Every visible command, parents first, with its visible subcommands, each in a context made
    as click makes it for ``--help`` (``context_settings`` applied: ``-h`` is a help option too)."""
    ctx = click.Context(command, info_name=name, parent=parent, **command.context_settings)
    children: list[tuple[str, Any]] = []
    if isinstance(command, click.Group):
        for child_name in command.list_commands(ctx):  # a lazy group imports each command here
            child = command.get_command(ctx, child_name)
            if child is not None and not child.hidden:
                children.append((child_name, child))
    yield ctx, children
    for child_name, child in children:
        yield from walk(child, child_name, ctx)


def commands_markdown() -> str:
    """The reference of every visible command, parents first, as ``introspect --help`` and each
    ``introspect COMMAND --help`` print it."""
    from introspect.cli.main import cli

    out: list[str] = []
    for ctx, children in walk(cli):
        out += _command_markdown(ctx, children)
    return "\n".join(out)


# --- the JSON documents page ---------------------------------------------------------------

def _type(schema: dict[str, Any]) -> str:
    """A JSON Schema node's type in a few words: ``string``, ``array of Finding``, ``integer or null``."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "const" in schema:
        return json.dumps(schema["const"])
    if "enum" in schema:
        return " | ".join(json.dumps(value) for value in schema["enum"])
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return " or ".join(_type(part) for part in schema[key])
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        return " or ".join(map(str, kind))
    if kind == "array" and isinstance(schema.get("items"), dict):
        return f"array of {_type(schema['items'])}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"object of {_type(schema['additionalProperties'])}"
    return str(kind)


def _members(schema: dict[str, Any]) -> list[str]:
    """One bullet per property: name, type, required or not, and its description (not the
    title pydantic makes up from the name)."""
    required = set(schema.get("required") or ())
    out = []
    for name, prop in (schema.get("properties") or {}).items():
        prop = prop if isinstance(prop, dict) else {}
        words = f"`{name}` ({escape(_type(prop))}{', required' if name in required else ''})"
        description = " ".join(str(prop.get("description") or "").split())
        out.append(f"- {words}" + (f": {escape(description)}" if description else ""))
    return [*out, ""] if out else []


def _description(schema: dict[str, Any]) -> list[str]:
    text = " ".join(str(schema.get("description") or "").split())
    return [escape(text), ""] if text else []


def _schema_markdown(path: Path) -> list[str]:
    schema = json.loads(path.read_text(encoding="utf-8"))
    name = path.name.removesuffix(".json")  # profile.v1
    document = str(schema.get("title") or f"introspect.{name.replace('.', '/')}")
    out = [f"## {escape(document)} {{#{name.replace('.', '-')}}}", "", *_description(schema)]
    out += [f"The schema: [schemas/{path.name}](schemas/{path.name}); `introspect schema "
            f"{name.rsplit('.', 1)[0]}` prints it (in the wheel: `introspect/schemas/{path.name}`).", ""]
    out += _members(schema)
    for def_name, definition in sorted((schema.get("$defs") or {}).items()):
        if isinstance(definition, dict):
            members = _members(definition)
            if members or definition.get("description"):
                out += [f"**{escape(def_name)}** ({escape(_type(definition))})", "",
                        *_description(definition), *members]
    return out


def schemas_markdown(folder: Path = SCHEMAS) -> str:
    """A section per schema file, or a note that none has been generated into ``folder``."""
    paths = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not paths:
        return ("!!! note \"No schema files yet\"\n\n    This build found no `introspect/schemas/*.json`: "
                "the schemas are generated from the document models; each appears here once it is.\n")
    return "\n".join(line for path in paths for line in _schema_markdown(path))


# --- the MkDocs events ---------------------------------------------------------------------

def on_files(files: Any, config: Any, **_kwargs: Any) -> Any:
    """Each schema file, published as ``schemas/NAME.json`` of the site (links to it are checked)."""
    from mkdocs.structure.files import File

    for path in sorted(SCHEMAS.glob("*.json")):
        files.append(File.generated(config, f"schemas/{path.name}", abs_src_path=str(path)))
    return files


def table_pipes(markdown: str) -> str:
    """GitHub needs ``\\|`` for a pipe even inside a code span of a table cell (the pages read
    well there too); Python-Markdown's tables already skip pipes inside code spans and would show
    the backslash."""
    def row(line: str) -> str:
        if not line.startswith("|"):
            return line
        return _CODE_SPAN.sub(lambda span: span.group(0).replace("\\|", "|"), line)

    return "\n".join(row(line) for line in markdown.split("\n"))


def on_page_markdown(markdown: str, **_kwargs: Any) -> str:
    if TESTS_README_MARK in markdown:
        text = (REPO / "tests" / "README.md").read_text(encoding="utf-8")
        markdown = markdown.replace(TESTS_README_MARK, re.sub(r"\A# [^\n]*\n", "", text))
    markdown = table_pipes(markdown)
    if COMMANDS_MARK in markdown:
        markdown = markdown.replace(COMMANDS_MARK, commands_markdown())
    if SCHEMAS_MARK in markdown:
        markdown = markdown.replace(SCHEMAS_MARK, schemas_markdown())
    return markdown
