"""The docs a newcomer reads: a short README whose links land, and a command reference that
cannot drift from ``--help``.

scripts/test builds the site itself (``mkdocs build --strict``: broken links, anchors and
pages fail there); these tests check what that build cannot: the README outside the site, and
that the generated reference (docs/hooks.py) lists every command and option ``--help`` shows.
"""

from __future__ import annotations

import importlib.util
import json
import re
import unicodedata
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from click.testing import CliRunner

from introspect.cli.main import cli

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = REPO / "docs"
README_MAX_BYTES = 12_000
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+?)\s*$", re.M)


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"docs_{name}", DOCS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def hooks() -> ModuleType:
    return _load("hooks")


@pytest.fixture(scope="module")
def commands_page(hooks: ModuleType) -> str:
    return str(hooks.commands_markdown())


def test_the_readme_is_short() -> None:
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes; move detail into docs/"


def test_the_readme_keeps_the_two_commands_ci_runs() -> None:
    text = README.read_text(encoding="utf-8")
    for command in ("scripts/demo", "scripts/test"):
        assert re.search(rf"^    {command}\s", text, re.M), command
    assert "exec scripts/test" in (REPO / ".ci" / "run").read_text(encoding="utf-8")


def slug(heading: str) -> str:
    """A heading's anchor as Python-Markdown's toc extension makes it, or its ``{#id}``."""
    explicit = re.search(r"\{#([^}\s]+)\}\s*$", heading)
    if explicit:
        return explicit.group(1)
    text = unicodedata.normalize("NFKD", re.sub(r"`", "", heading)).encode("ascii", "ignore").decode()
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def _nav_pages(nav: object) -> set[str]:
    if isinstance(nav, str):
        return {nav}
    items = nav.values() if isinstance(nav, dict) else nav if isinstance(nav, list) else ()
    return {page for item in items for page in _nav_pages(item)}


def test_every_readme_link_to_the_docs_lands() -> None:
    nav = _nav_pages(yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))["nav"])
    links = [link for link in LINK.findall(README.read_text(encoding="utf-8")) if "://" not in link]
    pages = [link for link in links if link.startswith("docs/") and link.split("#")[0].endswith(".md")]
    assert len(pages) >= 10, links
    for link in links:
        path, _, anchor = link.partition("#")
        target = REPO / path
        assert target.exists(), f"README links to {link}: no such file"
        if path in {str(Path("docs") / page) for page in nav} and anchor:
            anchors = {slug(h) for h in HEADING.findall(target.read_text(encoding="utf-8"))}
            assert anchor in anchors, f"README links to {link}: no such heading in {path}"
    assert {link.split("#")[0] for link in pages} <= {f"docs/{page}" for page in nav}, "a linked page not in nav"


def _help(path: list[str]) -> str:
    result = CliRunner().invoke(cli, [*path, "--help"], terminal_width=1000, prog_name="introspect")
    assert result.exit_code == 0, result.output
    return result.output


def _section(text: str, title: str) -> list[str]:
    """The lines of one ``Title:`` section of click's help."""
    lines = text.split("\n")
    if f"{title}:" not in lines:
        return []
    start = lines.index(f"{title}:") + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith(" ") or not lines[i].strip()),
               len(lines))
    return lines[start:end]


def _help_tree(path: list[str]) -> dict[str, list[str]]:
    """``introspect [PATH] --help`` parsed as its user reads it: each command path -> the
    option names its Options section lists, walked through every Commands section."""
    text = _help(path)
    # An option's names start at click's indent of 2; a help text too long for the line with
    # them continues further in.
    options = [word.rstrip(",") for line in _section(text, "Options") if re.match(r"  -", line)
               for word in line.strip().split("  ")[0].split() if word.startswith("-")]
    assert "--help" in options, text
    tree = {" ".join(["introspect", *path]): options}
    for line in _section(text, "Commands"):
        tree.update(_help_tree([*path, line.split()[0]]))
    return tree


def _page_sections(page: str) -> dict[str, str]:
    """The generated page cut at each command heading: ``introspect history prune`` -> its text."""
    parts = re.split(r"^#{3,4} (introspect[\w -]*?) \{#[\w-]+\}$", page, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_the_reference_lists_every_command_and_option_help_shows(commands_page: str) -> None:
    tree = _help_tree([])
    sections = _page_sections(commands_page)
    assert {"introspect", "introspect probe", "introspect history prune"} <= set(tree)
    assert sorted(sections) == sorted(tree), "commands on the page != commands in --help"
    for command, options in tree.items():
        listed = {word.rstrip(",") for names in re.findall(r"^- `([^`]+)`", sections[command], re.M)
                  for word in names.split() if word.startswith("-")}
        missing = set(options) - listed
        assert not missing, f"{command}: {sorted(missing)} in --help but not on the page"
        assert set(options) == listed, f"{command}: {sorted(listed - set(options))} on the page, not in --help"


def test_each_command_shows_its_usage_and_examples(commands_page: str) -> None:
    sections = _page_sections(commands_page)
    probe = sections["introspect probe"]
    assert "```text\nintrospect probe [OPTIONS]\n```" in probe
    assert "**Examples**" in probe and "introspect probe --all-hosts" in probe
    # The defaults --help prints are on the page too; one under the building user's home as ~/.
    assert "[default: 120.0]" in probe.replace("\\", "")
    from introspect.checks.history import default_path

    database = Path(default_path())
    if database.is_relative_to(Path.home()):
        shown = f"(default ~/{database.relative_to(Path.home())})".replace("_", "\\_")
        assert shown in sections["introspect history"]


def test_help_text_is_escaped_for_markdown(hooks: ModuleType) -> None:
    assert hooks.escape("a <venv> & *x* [y] `<kept>`") == r"a &lt;venv&gt; &amp; \*x\* \[y\] `<kept>`"
    row = r"| `lxc://NAME[?client=lxc-attach\|lxc]` | a \| b |"
    assert hooks.table_pipes(row) == r"| `lxc://NAME[?client=lxc-attach|lxc]` | a \| b |"
    assert hooks.table_pipes("not a row `a\\|b`") == "not a row `a\\|b`"


def test_the_schemas_page_renders_each_schema_file(hooks: ModuleType, tmp_path: Path) -> None:
    assert "No schema files yet" in hooks.schemas_markdown(tmp_path)
    schema = {"title": "introspect.demo/v1", "description": "A demo document.", "type": "object",
              "required": ["schema"],
              "properties": {"schema": {"const": "introspect.demo/v1"},
                             "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
                             "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "description": "Why."}},
              "$defs": {"Item": {"type": "object", "properties": {"id": {"type": "integer"}}}}}
    (tmp_path / "demo.v1.json").write_text(json.dumps(schema), encoding="utf-8")
    page = hooks.schemas_markdown(tmp_path)
    assert "## introspect.demo/v1 {#demo-v1}" in page
    assert '- `schema` ("introspect.demo/v1", required)' in page
    assert "- `items` (array of Item)" in page and "- `note` (string or null): Why." in page
    assert "**Item** (object)" in page and "- `id` (integer)" in page
    assert "[schemas/demo.v1.json](schemas/demo.v1.json); `introspect schema demo` prints it" in page


def test_every_shipped_schema_is_on_the_documents_page(hooks: ModuleType) -> None:
    page = hooks.schemas_markdown()
    for path in sorted((REPO / "introspect" / "schemas").glob("*.json")):
        assert f"(schemas/{path.name})" in page, path.name


def test_doctest_examples_become_code_blocks() -> None:
    doctest = _load("griffe_doctest")
    text = "Returns :class:`~introspect.client.model.ProbeOutcome`.\n\n>>> probe(MODEL)['a']\n'MLA'\n\nAfter."
    assert doctest.markdown_docstring(text) == (
        "Returns `ProbeOutcome`.\n\n```pycon\n>>> probe(MODEL)['a']\n'MLA'\n```\n\nAfter.")
    assert doctest.markdown_docstring(">>> 1\n1").endswith("1\n```")
