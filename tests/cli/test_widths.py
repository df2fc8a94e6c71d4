"""Every command's human output at 60, 80 and 120 columns, in a pseudo-terminal of that size.

Each screen is checked for what a reader in a split tmux pane needs:

(a) no value is broken mid-word: the tokens of values the command printed (numbers with their
    units, model types, quantization names, paths) each appear whole on one line, and every word
    on the screen is a word of the same command's ``--wide`` output (digits aside: timings and
    run ids differ between runs), so no fragment of a word is left anywhere;
(b) no line is wider than the terminal unless it holds a single word that cannot be broken
    (a path longer than the line); in a ``To fix:``/``Optional:``/``Next:`` block a ``# comment``
    line is held to the same rule (prose folds into several ``# `` lines), while a command is
    never folded (a folded command cannot be pasted), so it is checked by (c) instead;
(c) every line of a ``To fix:``, ``Optional:`` or ``Next:`` block parses as a shell command (``bash -n``).

One process per command and width, two at a time; stdout is the terminal, stderr (progress and
the one-line ``error:``/``warning:`` notices, which stay one line for scripts) goes to a file.
"""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from rich.cells import cell_len

from introspect.checks.history import HistoryStore
from introspect.checks.result import CheckResult
from introspect.cli.main import LAZY_COMMANDS, main
from tests.cli.terminal import ANSI, drain
from tests.conftest import NEUTRAL_CWD, REPO, SESSION_TMP, run_cli

WIDTHS = (60, 80, 120)
NOT_REPORTS = {"completion": "prints a shell script for the shell to source, not a report",
               "man": "prints a roff manual page for man(1) to lay out, not a report",
               "schema": "prints a JSON Schema for validators (--list: one name a line, under 46 columns)",
               "report": "writes an HTML or Markdown file (tests/report opens it at 1280 px in Chromium)"}
DATA = REPO / "tests" / "data"
PROFILES = DATA / "golden" / "profiles"
# A number and its unit are one value: "553.4 GiB" must never be split between two lines.
ATOM = re.compile(r"\d[\d.,]*\s(?:[KMGTP]i?B|B)\b|\S+")


@dataclass
class Case:
    args: Callable[[int], list[str]]  # the command line at a width (a health run: its own database)
    values: list[str] = field(default_factory=list)  # printed values whose every token must stay whole
    codes: tuple[int, ...] = (0,)
    pty: bool = True  # False: an offline command, run in-process as when piped (COLUMNS, no terminal)


@dataclass
class Screen:
    code: int
    out: str
    err: str


def _screen(args: list[str], columns: int, env: dict[str, str]) -> Screen:
    """``introspect ARGS`` with stdin and stdout on a pseudo-terminal ``columns`` wide."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    full_env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TERM="xterm-256color",
                    COLUMNS=str(columns), LINES="50", TMPDIR=str(SESSION_TMP / "tmp"), **env)
    full_env.pop("NO_COLOR", None)
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "introspect.cli.main", *args], stdin=slave, stdout=slave,
                                stderr=err, env=full_env, cwd=NEUTRAL_CWD, close_fds=True)
        os.close(slave)
        code, out = drain(master, proc, 90)
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    text = out.decode("utf-8", "replace").replace("\r\n", "\n")
    return Screen(code, ANSI.sub("", text), stderr)


def _piped(args: list[str], columns: int, env: dict[str, str]) -> Screen:
    """``introspect ARGS`` in this process, stdout not a terminal, ``COLUMNS=columns``: what a CI
    log or ``> file`` gets. Only for commands that touch no host."""
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch, redirect_stdout(out), redirect_stderr(err):
        for name, value in {**env, "COLUMNS": str(columns)}.items():
            patch.setenv(name, value)
        patch.chdir(NEUTRAL_CWD)
        code = main(list(args))
    return Screen(code, out.getvalue(), err.getvalue())


def _seed_history(db: Path) -> None:
    """Two recorded runs over hosts and venvs with names as long as real fleets give them."""
    host, venv = "gpu-node-a1.inference.example.internal", "/opt/venvs/serving-2026-q4-sglang-0.5.4"
    store = HistoryStore(db)
    try:
        for i in range(2):
            results = [(host, venv, CheckResult(f"import:{n}", "pass", "imports")) for n in ("torch", "sglang")]
            results += [(host, venv, CheckResult("package:tiktoken", "fail", "tiktoken is not installed; "
                                                 "the Kimi tokenizer needs it to load",
                                                 fix=f"{venv}/bin/pip install 'tiktoken>=0.7' sentencepiece"))]
            results += [(host, None, CheckResult("disk:/data/checkpoints", "warn", "31.5 GiB free of 7.0 TiB "
                                                 "on /data/checkpoints, below min_free_gb 64"))]
            argv = ["health", "--hosts", "/etc/introspect/hosts.yaml", "--prom",
                    "/var/lib/node_exporter/textfile_collector/introspect.prom", "--tags", f"serving-{i}"]
            store.record_run(argv=argv, started_at=time.time() - 60, finished_at=time.time(), results=results)
    finally:
        store.close()


def _model_root(base: Path) -> Path:
    """Real configs under a path as long as shared checkpoint trees get."""
    root = base / "shared-checkpoints-for-the-inference-team" / "2026-q4"
    for real, name in (("kimi-k2.5", "Kimi-K2.5-Instruct-int4-pack-quantized"),
                       ("qwen3-30b-a3b", "Qwen3-30B-A3B-Instruct-2507")):
        (root / name).mkdir(parents=True)
        shutil.copy(DATA / "realconfigs" / real / "config.json", root / name / "config.json")
    return root


def _json(*args: str, env: dict[str, str]) -> dict:
    result = run_cli(*args, "--json", env=env)
    assert "Traceback" not in result.stderr, result.stderr
    return result.json()


def _cases(kimi_model: Path, venv_full: Path, base: Path, env: dict[str, str]) -> dict[str, Case]:
    from introspect.cli.render_term import human_bytes, human_count

    # One probe fills the result cache: the terminal runs then render the same profile quickly.
    probe = _json("probe", "--model", str(kimi_model), "--venv", str(venv_full), env=env)
    arch = probe["architecture"]
    eight_shards = str(PROFILES / "raw-kimi-k25-int4-8shards.json")
    plan = _json("plan", eight_shards, "--gpu", "H200", "--gpus", "8", env=env)
    root = _model_root(base)
    listing = _json("models", "--roots", str(root), env=env)
    models = [m for host in listing["hosts"] for m in host["models"]]
    db = base / "history.sqlite3"
    _seed_history(db)
    pair = [str(PROFILES / "raw-kimi-k2.6-loaded.json"), str(PROFILES / "raw-kimi-k2.6-no-tiktoken.json")]
    missing_venv = str(base / "venvs" / "serving-venv-that-was-never-created-on-this-host")
    return {
        "probe": Case(lambda w: ["probe", "--model", str(kimi_model), "--venv", str(venv_full)],
                      [probe["target"]["model_path"], arch["model_type"], *arch["architectures"],
                       str(probe["tokenizer"]["class"]), probe["environment"]["python_executable"]]),
        "profile": Case(lambda w: ["profile", str(DATA / "golden" / "raw" / "kimi-k25-int4-8shards.json")],
                        ["553.4 GiB", "compressed-tensors", "pack-quantized", "kimi_k25",
                         "/models/Kimi-K2.5-INT4/model.safetensors.index.json"], codes=(1,), pty=False),
        "plan": Case(lambda w: ["plan", eight_shards, "--gpu", "H200", "--gpus", "8"],
                     [*(layout["name"] for layout in plan["layouts"]),
                      *(human_bytes(layout["weight_bytes_per_gpu"]) for layout in plan["layouts"]),
                      *(reason for layout in plan["layouts"] for reason in layout.get("reasons") or [])]),
        "models": Case(lambda w: ["models", "--roots", str(root)],
                       [value for m in models for value in
                        (m["name"], m["model_type"], m.get("quantization") or "-", human_bytes(m["size"]),
                         human_count(m["params_total"]))]),
        "diff": Case(lambda w: ["diff", *pair], ["packages.tiktoken", "tiktoken"], codes=(1,), pty=False),
        "compare": Case(lambda w: ["compare", *pair, eight_shards], ["kimi_k25", "TikTokenTokenizer"], pty=False),
        "health": Case(lambda w: ["health", "--host", "local://", "--venv", str(venv_full), "--venv", missing_venv,
                                  "--db", str(base / f"health-{w}.sqlite3")],
                       [str(venv_full), missing_venv], codes=(1,)),
        "history": Case(lambda w: ["history", "--db", str(db)],
                        [str(db), "/var/lib/node_exporter/textfile_collector/introspect.prom"], pty=False),
        "history --run": Case(lambda w: ["history", "--db", str(db), "--run", "1"],
                              ["gpu-node-a1.inference.example.internal", "31.5 GiB", "7.0 TiB",
                               "/opt/venvs/serving-2026-q4-sglang-0.5.4/bin/pip"], pty=False),
        "preflight": Case(lambda w: ["preflight", "--model", str(kimi_model), "--venv", str(venv_full),
                                     "--min-free-gb", "1"], [str(kimi_model), "chat-template", "loss-masks"]),
        "env": Case(lambda w: ["env"], [sys.executable], pty=False),
        "cache": Case(lambda w: ["cache", "info"], [env["INTROSPECT_CACHE_DIR"]], pty=False),
        "gpus": Case(lambda w: ["gpus"], ["local"]),
        "init": Case(lambda w: ["init", "--ssh-config", str(DATA / "init" / "ssh_config"), "--force",
                                "--config", str(base / "init" / "config.yaml")], [str(base / "init" / "hosts.yaml")],
                     pty=False),
    }


@pytest.fixture(scope="module")
def screens(kimi_model: Path, venv_full: Path, tmp_path_factory: pytest.TempPathFactory,
            ) -> tuple[dict[str, Case], dict[tuple[str, int | str], Screen]]:
    base = tmp_path_factory.mktemp("widths")
    env = {"INTROSPECT_CACHE_DIR": str(base / "cache")}
    cases = _cases(kimi_model, venv_full, base, env)
    jobs = [(name, width) for name in cases for width in (*WIDTHS, "wide")]

    def run(job: tuple[str, int | str]) -> Screen:
        name, width = job
        if width == "wide":  # the reference: every table and line at its natural width
            return _screen([*cases[name].args(0), "--wide"], 120, env)
        return _screen(cases[name].args(int(width)), int(width), env)

    def run_piped(job: tuple[str, int | str]) -> Screen:
        name, width = job
        args = cases[name].args(0 if width == "wide" else int(width))
        return _piped([*args, "--wide"] if width == "wide" else args, 120 if width == "wide" else int(width), env)

    with ThreadPoolExecutor(2) as pool:  # the terminal runs in two threads, the in-process ones here
        terminal = [job for job in jobs if cases[job[0]].pty]
        running = pool.map(run, terminal)
        screens = {job: run_piped(job) for job in jobs if not cases[job[0]].pty}
        screens.update(zip(terminal, running, strict=True))
    return cases, screens


def _words(text: str) -> set[str]:
    return {re.sub(r"\d+", "0", word) for word in text.split()}


def _fragments(narrow: str, wide: str) -> set[str]:
    """Words of ``narrow`` that ``wide`` does not hold: fragments of a broken word. A column's
    name as a record's label (``size:`` where the table's header says ``size``) is no fragment."""
    known = _words(wide)
    return {word for word in _words(narrow) - known if not (word.endswith(":") and word[:-1] in known)}


def _fix_blocks(out: str) -> list[str]:
    """The lines of every ``To fix:``, ``Optional:`` and ``Next:`` (init) block (indented lines after
    the heading): commands, never folded, and ``# comment`` lines, folded to the width."""
    lines, inside = [], False
    for line in out.splitlines():
        if line.rstrip() in ("To fix:", "Optional:", "Next:"):
            inside = True
        elif inside and line.startswith("  ") and line.strip():
            lines.append(line.strip())
        else:
            inside = False
    return lines


def test_every_command_has_a_case(screens: tuple[dict[str, Case], dict]) -> None:
    cases, _ = screens
    assert set(LAZY_COMMANDS) - set(NOT_REPORTS) == {name.split()[0] for name in cases}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", ["probe", "profile", "plan", "models", "diff", "compare", "health", "history",
                                  "history --run", "preflight", "env", "cache", "gpus", "init"])
def test_screen_fits_and_breaks_no_value(screens: tuple[dict[str, Case], dict], name: str, width: int) -> None:
    cases, shown = screens
    case, screen, wide = cases[name], shown[(name, width)], shown[(name, "wide")]
    assert "Traceback" not in screen.err + wide.err, screen.err + wide.err
    assert screen.code in case.codes, (screen.code, screen.out, screen.err)
    lines = screen.out.splitlines()
    assert lines, screen.err
    # (a) each token of each printed value whole on one line; no word on the screen that the
    # --wide output does not hold (a fragment of a broken word)
    for value in case.values:
        for atom in ATOM.findall(value):
            assert any(atom in line for line in lines), (atom, value, screen.out)
    fragments = _fragments(screen.out, wide.out)
    assert not fragments, (fragments, screen.out, wide.out)
    # (b) nothing wider than the terminal but a single unbreakable word; in a fix block only a
    # command may be (see (c)), a comment folds like any prose
    block = _fix_blocks(screen.out)
    commands = {line for line in block if not line.startswith("#")}
    too_wide = [line for line in lines if cell_len(line.rstrip()) > width
                and len([word for word in line.split() if word != "#"]) > 1 and line.strip() not in commands]
    assert not too_wide, (too_wide, screen.out)
    # (c) every fix line pastes as a shell command, and so does the block as a whole (a folded
    # comment leaves nothing open for the next line)
    for command in {*block, "\n".join(block)}:
        check = subprocess.run(["bash", "-n", "-c", command], capture_output=True, text=True, timeout=10)
        assert check.returncode == 0, (command, check.stderr)


def test_the_plan_reasons_stand_on_their_own_lines(screens: tuple[dict[str, Case], dict]) -> None:
    """80 columns: one line per layout, its reason whole on the line under it (not a 3-character
    verdict column of fragments)."""
    cases, shown = screens
    out = shown[("plan", 80)].out
    reasons = [line.strip() for line in out.splitlines() if line.strip().startswith("weights ")]
    plan_reasons = [r for r in cases["plan"].values if r.startswith("weights ") and " > usable " in r]
    assert plan_reasons and set(plan_reasons) <= set(reasons), out
    assert len(out.splitlines()) < 70, out  # the layouts, the drafter plans and their serving flags


def test_piped_output_folds_to_columns_without_trailing_blanks(screens: tuple[dict[str, Case], dict]) -> None:
    """Not a terminal (a CI log, ``> file``): COLUMNS is the width, and no line is padded to it."""
    cases, _ = screens
    result = run_cli(*cases["plan"].args(80), env={"COLUMNS": "80"})
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    # A word wider than the screen (a cited source URL) stands alone on its line, never cut.
    assert all((cell_len(line) <= 80 or len(line.split()) == 1) and line == line.rstrip() for line in lines), \
        result.stdout
    reasons = [r for r in cases["plan"].values if " > usable " in r]
    assert reasons and all(any(r in line for line in lines) for r in reasons), result.stdout
