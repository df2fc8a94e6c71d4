"""Every fix the CLI prints pastes as it reads: a shell command (its why after ``  # ``) or a
``# comment`` alone, never a sentence whose first word a shell would run (``free 10 GB ...``,
``check that sshd runs ...``).

Three layers: the fix texts of the transports, the inventory, the host checks and the preflight
checks read from the source (every literal ``hint=`` and client rule, placeholders filled in);
the preflight checks' fix paths built from evidence; and the CLI's own ``fix:`` lines.
"""

from __future__ import annotations

import ast
import copy
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from introspect.checks.health import check_reachable
from introspect.checks.preflight import evaluate
from introspect.checks.preflight.common import Check, no_evidence
from introspect.checks.preflight.disk_packages import check_disk_and_packages
from introspect.checks.preflight.endpoint import _endpoint_fix
from introspect.checks.preflight.tokenizer import _load_failure
from introspect.cli.fix_lines import is_command
from introspect.cli.main import fix_lines
from introspect.errors import IntrospectError, UsageError
from introspect.inventory import HostEntry
from introspect.transport.exec_cli import INSTALL_HINTS
from introspect.transport.hostspec import parse_host
from introspect.transport.openssh_errors import SSHContext, classify
from tests.conftest import run_cli
from tests.preflight.test_preflight_checks import PIP, good

REPO = Path(__file__).resolve().parents[2]
AUDITED = [*sorted((REPO / "introspect" / "transport").glob("*.py")),
           *sorted((REPO / "introspect" / "inventory").glob("*.py")),
           REPO / "introspect" / "errors.py", REPO / "introspect" / "checks" / "health.py",
           *sorted((REPO / "introspect" / "checks" / "preflight").glob("*.py"))]


def prose(lines: list[str]) -> list[str]:
    """The lines a shell would not read as we mean them: a syntax error, or a sentence."""
    bad = [line for line in lines if not (line.startswith("#") or is_command(line))]
    for line in lines:
        run = subprocess.run(["bash", "-n", "-c", line], capture_output=True, text=True, check=False)
        if run.returncode != 0:
            bad.append(f"{line}  <- bash -n: {run.stderr.strip()}")
    return bad


def _filled(node: ast.expr) -> str | None:
    """A literal fix text with each ``{...}`` filled: a path where a line starts with one (an
    interpreter, a pip), a plain word elsewhere. None: not a literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = [v.value if isinstance(v, ast.Constant) else ("/opt/v/bin/python" if i == 0 else "x")
                 for i, v in enumerate(node.values)]
        return "".join(str(p) for p in parts)
    return None


def source_fixes() -> Iterator[tuple[str, str]]:
    """(where, text) of every literal ``hint=`` and client rule hint in the audited modules."""
    for path in AUDITED:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            value = None
            if isinstance(node, ast.keyword) and node.arg == "hint":
                value = node.value
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "rule" and len(node.args) >= 4:
                value = node.args[3]
            text = _filled(value) if value is not None else None
            if text is not None:
                yield f"{path.relative_to(REPO)}:{value.lineno}", text  # type: ignore[union-attr]


def test_every_literal_fix_in_the_transports_inventory_and_checks_pastes() -> None:
    found = list(source_fixes())
    assert len(found) > 100  # the walk reached the modules' hints
    bad = [f"{where}: {line}" for where, text in found for line in prose(text.splitlines())]
    assert bad == []


def test_the_client_install_hints_paste() -> None:
    assert prose(list(INSTALL_HINTS.values())) == []


def _ssh_errors() -> Iterator[IntrospectError]:
    ctx = SSHContext("gpu1", "10.0.0.5", 2222, "root", 5.0, "/home/u/.ssh/known_hosts")
    for stderr in ("ssh: connect to host 10.0.0.5 port 2222: Connection refused",
                   "ssh: connect to host 10.0.0.5 port 2222: Connection timed out",
                   "ssh: connect to host 10.0.0.5 port 2222: No route to host",
                   "ssh: Could not resolve hostname gpu1: Name or service not known",
                   "kex_exchange_identification: read: Connection reset by peer",
                   "root@10.0.0.5: Permission denied (publickey).",
                   "Host key verification failed.",
                   "WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!\nHost key for [10.0.0.5]:2222 has changed",
                   "/home/u/.ssh/config line 3: Bad configuration option: frobnicate",
                   "Connection closed by 10.0.0.5 port 2222",
                   "client_loop: send disconnect: Broken pipe"):
        error = classify(stderr, ctx)
        if error is not None:
            yield error


@pytest.mark.parametrize("spec", ["", "ssh://root:pw@gpu1", "ssh://gpu 1", "ftp://gpu1", "ssh://",
                                  "podman://", "kubectl://a/b/c/d", "lxc://-x", "pct://abc", "-gpu1",
                                  "gpu1;rm", "ssh://root@gpu1:99999", "a/b c"])
def test_host_spec_errors_fix_with_a_comment_or_command(spec: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_host(spec)
    assert prose(fix_lines(info.value.hint) or ["<no fix>"]) == [], info.value.hint


def test_ssh_client_errors_fix_with_commands() -> None:
    errors = list(_ssh_errors())
    assert len(errors) >= 6
    hints = [line for error in errors for line in (error.hint or "").splitlines()]
    assert prose(hints) == []
    # A changed key's fix is the ssh-keygen line itself, its condition after '#'
    assert any(line.startswith("ssh-keygen -R '[10.0.0.5]:2222' -f") for line in hints), hints


def _preflight_fixes() -> Iterator[Check]:
    """Checks that fail or warn in each way the judges know, each with its fix."""
    for cause, extra in (("missing-packages", {"missing_packages": ["tiktoken"]}), ("remote-code-refused", {}),
                         ("incompatible-code", {}), ("link-outside", {}), ("missing-files", {}), ("other", {})):
        yield _load_failure({"error": {"cause": cause, **extra}, "transformers_version": "4.57.1"}, PIP, "/m/x y")
    yield no_evidence("ids", {"errors": [{"type": "timeout"}]}, "ids", None)
    yield no_evidence("ids", {}, "ids", None)
    disk = {"free_bytes": 5 * 10**9, "checked_path": "/data/out dir", "writable": True}
    packages = {"items": [{"name": "tiktoken", "available": False}], "missing": ["tiktoken"]}
    yield check_disk_and_packages({"disk": disk, "packages": packages}, 600.0, PIP)
    yield check_disk_and_packages({"disk": dict(disk, writable=False), "packages": packages}, 1.0, PIP)
    yield check_disk_and_packages({"disk": {"error": {"message": "gone"}}, "packages": packages}, 1.0, PIP)
    for status, error, key in ((401, {}, None), (401, {}, "MY_KEY"), (None, {"type": "timeout"}, None),
                               (None, {"type": "unreachable"}, None), (404, {}, None), (500, {}, None)):
        fix = _endpoint_fix({"url": "http://127.0.0.1:1", "api_key_env": key, "api_key_present": False},
                            {"status": status, "error": error})
        yield Check("endpoint", "fail", {}, fix, "")
    yield from evaluate(_broken_evidence(), min_free_gb=1.0, pip=PIP)


def _broken_evidence() -> dict[str, Any]:
    """The all-pass evidence with a problem in each of the template, ids, mask and endpoint checks."""
    ev = copy.deepcopy(good())
    ev["template"]["renders"]["conversation"]["error"] = {"type": "TemplateError", "message": "boom"}
    ev["config"]["vocab_size"] = 3
    ev["mask_token"]["present"] = None
    ev["endpoint"] = {"skipped": True}
    return ev


def test_every_preflight_fix_path_pastes_line_by_line() -> None:
    checks = [check for check in _preflight_fixes() if check.fix]
    assert len(checks) >= 20
    lines = [line for check in checks for line in check.fix.splitlines()]  # type: ignore[union-attr]
    assert prose(lines) == []
    # Two fixes in one check are two lines (the JSON field: one string, newline-separated), never
    # one line joined by '; ' that runs the second sentence's first word.
    both = next(c for c in checks if c.name == "disk-and-packages" and "df -h" in str(c.fix))
    assert both.fix == (f"df -h '/data/out dir'  # free 595.0 GB there\n# or pass --output-dir on a larger filesystem\n"
                        f"{PIP} install tiktoken")


def test_health_reachability_fix_is_the_ssh_login_itself() -> None:
    host = HostEntry(name="gpu-a", address="10.1.2.200", port=2222, user="ops")
    assert prose([str(check_reachable("refused", host).fix)]) == []


def test_a_sentence_hint_prints_as_a_comment_and_each_line_on_its_own() -> None:
    assert fix_lines("check that sshd runs there") == ["# check that sshd runs there"]
    assert fix_lines("ls -l /m  # why\n# or this") == ["ls -l /m  # why", "# or this"]


def test_cli_fix_lines_paste(tmp_path: Path) -> None:
    bad_inventory = tmp_path / "hosts.yaml"
    bad_inventory.write_text("hosts:\n  gpu1: {adress: 10.0.0.1}\n")
    runs = [run_cli("probe"), run_cli("health", "--hosts", str(bad_inventory)),
            run_cli("probe", "--host", "ssh://root:pw@gpu1", "--model", "/m")]
    for result in runs:
        assert result.code == 2 and "Traceback" not in result.stderr, result.stderr
        fixes = [line[len("fix: "):] for line in result.stderr.splitlines() if line.startswith("fix: ")]
        assert fixes and prose(fixes) == [], result.stderr


@pytest.mark.parametrize("group", ["cache", ""])
def test_a_group_without_its_subcommand_prints_its_help(group: str) -> None:
    result = run_cli(*([group] if group else []))
    assert result.code == 0 and result.stderr == "", result.stderr
    assert result.stdout.startswith(f"Usage: introspect {group}".rstrip() + " [OPTIONS] COMMAND"), result.stdout
    assert "Commands:" in result.stdout and "\\x0a" not in result.stdout
