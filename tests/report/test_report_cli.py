"""``introspect report`` without a browser: inputs of every kind, Markdown, stdout, errors, a live
HOST:PATH over the loopback sshd, and the templates shipped in the wheel."""

from __future__ import annotations

import fnmatch
import json
import re
import sqlite3
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from introspect.documents.health import HealthDocument
from tests.cli.terminal import run_in_terminal
from tests.conftest import REPO, assert_clean_error, run_cli, ssh_flags
from tests.report import fleet_data
from tests.report.cli import introspect

GOLDEN = REPO / "tests/data/golden"
KIMI_RAW = GOLDEN / "raw/kimi-k2.6-loaded.json"
JAMBA = GOLDEN / "profiles/real-jamba-1.5-mini.json"
TEMPLATES = REPO / "introspect/report/templates"


def _picture(html: str, kind: str) -> str:
    found = re.search(rf'<svg [^>]*data-picture="{kind}".*?</svg>', html, re.S)
    assert found, kind
    return found.group(0)


def test_raw_facts_are_profiled_as_introspect_profile_does(tmp_path: Path) -> None:
    """A raw-facts INPUT draws the same layer map and parameters as the profile `introspect profile` makes."""
    made = introspect("profile", str(KIMI_RAW), "--json", "-o", str(tmp_path / "kimi.json"))
    assert made.code == 0, made.stderr
    for name, source in (("raw", KIMI_RAW), ("profile", tmp_path / "kimi.json")):
        result = introspect("report", str(source), "-o", str(tmp_path / f"{name}.html"))
        assert result.code == 0, result.stderr
    raw, profile = ((tmp_path / f"{name}.html").read_text() for name in ("raw", "profile"))
    for kind in ("layer-map", "param-breakdown"):
        assert _picture(raw, kind) == _picture(profile, kind)
    assert raw.count('class="layer"') == 61


def test_markdown_with_its_pictures_beside_it(tmp_path: Path) -> None:
    out = tmp_path / "out" / "jamba.md"
    out.parent.mkdir()
    result = introspect("report", str(JAMBA), "--md", "-o", str(out))
    assert result.code == 0, result.stderr
    text = out.read_text()
    links = re.findall(r"!\[[^\]]*\]\((jamba_files/[^)]+\.svg)\)", text)
    assert links and sorted(links) == sorted(f"jamba_files/{p.name}" for p in (out.parent / "jamba_files").iterdir())
    for link in links:  # each picture is a standalone SVG document
        assert ET.parse(out.parent / link).getroot().tag == "{http://www.w3.org/2000/svg}svg"
    config = json.loads((REPO / "tests/data/realconfigs/jamba-1.5-mini/config.json").read_text())
    rows = re.findall(r"^\| (\d+) \| (mamba|full\\_attention) \| (dense|moe) \|", text, re.M)
    # transformers configuration_jamba.py: attention where i % attn_layer_period == attn_layer_offset.
    assert [(int(i), kind) for i, kind, _ in rows] == [
        (i, "full\\_attention" if i % config["attn_layer_period"] == config["attn_layer_offset"] else "mamba")
        for i in range(config["num_hidden_layers"])]
    assert "<svg" not in text and "<script" not in text


def test_stdout_when_piped(tmp_path: Path) -> None:
    """Without --output the report goes to stdout (a pipe here): HTML, or Markdown with inline SVG."""
    html = introspect("report", str(JAMBA), cwd=tmp_path)
    assert html.code == 0 and html.stdout.startswith("<!doctype html>") and "wrote" not in html.stderr
    markdown = introspect("report", str(JAMBA), "--md", cwd=tmp_path)
    assert markdown.code == 0 and markdown.stdout.startswith("# introspect report")
    assert '<svg xmlns="http://www.w3.org/2000/svg"' in markdown.stdout
    assert list(tmp_path.iterdir()) == []  # no file beside it


def test_no_secret_reaches_the_page(tmp_path: Path) -> None:
    """A saved profile holding a token (written by hand, or before masking): the page shows it masked."""
    secret = "hf_" + "a" * 34  # an HF access token's form (tests/faults/test_secrets.py)
    profile = json.loads(JAMBA.read_text())
    profile["findings"] = [{"severity": "warning", "code": "leak", "message": f"HF token {secret} expired", "fix": None}]
    (tmp_path / "leak.json").write_text(json.dumps(profile))
    for extra in ((), ("--md",)):
        result = introspect("report", str(tmp_path / "leak.json"), *extra, cwd=tmp_path)
        assert result.code == 0 and "aaaaaaaaaa" not in result.stdout
        assert "HF token &lt;redacted&gt; expired" in result.stdout  # escaped in HTML and in Markdown alike


def test_a_terminal_gets_no_html() -> None:
    """Without --output on a terminal: an error naming the option, and the command that writes the file."""
    code, screen = run_in_terminal("report", str(JAMBA), columns=200)
    assert code == 2 and "<html" not in screen.lower()
    assert "error: the report is a file, not terminal text: name one with --output" in screen
    assert f"fix: introspect report {JAMBA} -o report.html" in screen


def test_a_health_run_document(tmp_path: Path) -> None:
    """`introspect health --json` of one run: each host's status, the unreachable one first."""
    document = fleet_data.health_document(4)
    HealthDocument.model_validate(document)  # the document `health --json` prints
    (tmp_path / "health.json").write_text(json.dumps(document))
    result = introspect("report", str(tmp_path / "health.json"), "-o", str(tmp_path / "health.html"))
    assert result.code == 0, result.stderr
    cells = re.findall(r'class="health-cell" data-host="([^"]+)"(?: data-run="[^"]*")? data-status="([^"]+)"',
                       (tmp_path / "health.html").read_text())
    assert cells[0] == ("gpu3", "unreachable") and dict(cells)["gpu4"] == "fail" and len(cells) == 4


def test_input_errors(tmp_path: Path) -> None:
    (tmp_path / "other.json").write_text(json.dumps({"schema": "introspect.env/v1"}))
    (tmp_path / "damaged.sqlite3").write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    plan = {"schema": "introspect.plan/v1", "weights": None, "gpus": None, "memory_fraction": 0.9, "best": None,
            "reason": None, "layouts": [{"name": "TP1"}]}  # a layout without its numbers: not this version's
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    cases = [((), "nothing to report"), ((str(tmp_path / "other.json"),), "not a document introspect writes"),
             (("no-such-file",), "neither a saved profile file nor HOST:PATH"),
             (("--db", str(tmp_path / "none.sqlite3")), "no history database"),
             ((str(tmp_path / "damaged.sqlite3"),), "cannot read the history database"),
             ((str(tmp_path / "plan.json"),), "the plan is not one this introspect reads"),
             ((str(JAMBA), "-o", str(tmp_path / "missing" / "r.html")), "does not exist")]
    for args, needle in cases:
        assert_clean_error(introspect("report", *args, cwd=tmp_path), 2, needle)


def test_a_history_database_without_runs(tmp_path: Path) -> None:
    sqlite3.connect(tmp_path / "empty.sqlite3").execute("CREATE TABLE t (x)").connection.commit()
    result = introspect("report", "--db", str(tmp_path / "empty.sqlite3"), "-o", str(tmp_path / "r.html"))
    assert result.code == 0, result.stderr
    assert "no run recorded yet" in (tmp_path / "r.html").read_text()


@pytest.mark.ssh
def test_a_live_host_path(tmp_path: Path, sshd, client_keys, kimi_model: Path, venv_full: Path) -> None:  # noqa: ANN001
    """HOST:PATH is probed as `introspect diff` probes its operands, over the loopback sshd."""
    flags = ssh_flags(sshd, client_keys)
    connection = flags[2:]  # --port ... --ssh-config: the host is the operand's
    result = run_cli("report", f"{sshd.address}:{kimi_model}", *connection, "--venv", str(venv_full),
                     "--no-tokenizer", "-o", str(tmp_path / "live.html"))
    assert result.code == 0, result.stderr
    html = (tmp_path / "live.html").read_text()
    assert html.count('class="layer"') == 61 and f"{sshd.address}:{kimi_model}" in html
    assert_clean_error(run_cli("report", f"{sshd.address}:{kimi_model}", *flags, "-o", str(tmp_path / "x.html")),
                       2, "not from --host")


def test_the_templates_ship_in_the_wheel() -> None:
    """Every template file matches the package-data patterns pyproject.toml gives introspect.report."""
    line = re.search(r'^"introspect\.report" = (\[.*\])$', (REPO / "pyproject.toml").read_text(), re.M)
    assert line, "no package-data line for introspect.report"
    patterns = json.loads(line.group(1))
    files = [p.relative_to(TEMPLATES.parent).as_posix() for p in TEMPLATES.iterdir()]
    assert files and all(any(fnmatch.fnmatch(f, pattern) for pattern in patterns) for f in files), (files, patterns)
