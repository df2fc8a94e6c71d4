"""A fleet's ``To fix:`` block names the hosts that need each command, once per command, with
one host's package installs into the same venv merged (``pip install transformers tiktoken``);
a command for the host runs through each host's transport. Every line parses as shell."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from introspect.cli.fix_groups import grouped_lines, merge_installs
from introspect.cli.fix_lines import print_fleet_fixes
from introspect.cli.render_term import Fixes, print_fixes
from tests.cli.test_fix_lines import block
from tests.conftest import run_cli
from tests.fixtures.venvs import make_venv


def bash_parses(lines: list[str]) -> None:
    """The whole block at once: a dangling quote on one line would swallow the next."""
    run = subprocess.run(["bash", "-n"], input="\n".join(lines) + "\n", capture_output=True, text=True, check=False)
    assert run.returncode == 0, (lines, run.stderr)


def rendered(fixes: Fixes) -> list[str]:
    console = Console(file=io.StringIO(), width=60, highlight=False, emoji=False)
    print_fixes(console, fixes)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    lines = block(out, "To fix:")
    assert len(lines) == len(out.splitlines()) - 1, out  # nothing folded: each line pastes as it reads
    return lines


@pytest.mark.parametrize(("lines", "merged"), [
    (["/v/bin/pip install transformers", "/v/bin/pip install tiktoken"], ["/v/bin/pip install transformers tiktoken"]),
    (["/v/bin/python -m pip install a", "/v/bin/python -m pip install 'b>=2'", "/v/bin/python -m pip install a"],
     ["/v/bin/python -m pip install a 'b>=2'"]),
    (["uv pip install a", "uv pip install b"], ["uv pip install a b"]),
    # Another interpreter, an option, another comment or a second command: not the same install.
    (["/v/bin/pip install a", "/w/bin/pip install b"], ["/v/bin/pip install a", "/w/bin/pip install b"]),
    (["pip install -U a", "pip install b"], ["pip install -U a", "pip install b"]),
    (["pip install a  # why", "pip install b"], ["pip install a  # why", "pip install b"]),
    (["pip install a; rm -rf x", "pip install b"], ["pip install a; rm -rf x", "pip install b"]),
    (["# check the disk", "pip install a", "ls /m", "pip install b"], ["# check the disk", "pip install a b", "ls /m"]),
])
def test_installs_into_one_interpreter_merge(lines: list[str], merged: list[str]) -> None:
    assert [line for _, line in merge_installs(list(enumerate(lines)))] == merged


def test_health_style_fixes_group_by_command_with_the_hosts() -> None:
    """No transport known (a health run knows inventory names): the hosts as a comment line."""
    fixes = Fixes()
    for host in ("h1", "h2", "h3"):
        fixes.add("/v/bin/pip install transformers", host)
        fixes.add("/v/bin/pip install tiktoken", host)
    fixes.add("/v/bin/pip install tiktoken", "h4")
    fixes.add("check that /data exists on the host", "h4")
    lines = rendered(fixes)
    assert lines == ["# h1, h2, h3 (3 hosts)", "/v/bin/pip install transformers tiktoken",
                     "# h4", "/v/bin/pip install tiktoken", "# h4: check that /data exists on the host"]
    bash_parses(lines)


def _item(host: str, target: dict[str, Any], *fixes: tuple[str, str]) -> dict[str, Any]:
    findings = [{"severity": severity, "message": "m", "fix": fix} for severity, fix in fixes]
    return {"host": host, "exit_code": 1, "error": None, "profile": {"target": target, "findings": findings}}


def test_fleet_probe_fixes_run_through_each_hosts_transport() -> None:
    pip = "/srv/venv/bin/python -m pip install"
    results = [_item(f"gpu{i}", {"scheme": "ssh", "host": f"127.0.0.{10 + i}", "port": 2222, "user": "root"},
                     ("error", f"{pip} tiktoken"), ("warning", f"{pip} 'blobfile>=2'"), ("info", f"{pip} torch"))
               for i in range(3)]
    results.append(_item("vllm", {"scheme": "podman", "container": "vllm"}, ("error", f"{pip} tiktoken"),
                         ("error", "introspect probe --model /m --host vllm  # after the install")))
    results.append({"host": "down", "exit_code": 3, "error": {"message": "refused"}, "profile": None})
    # Another inventory name for gpu0's address: the same line, both names after it.
    results.append(_item("gpu0-alias", results[0]["profile"]["target"], ("error", f"{pip} tiktoken"),
                         ("error", f"{pip} 'blobfile>=2'")))
    # Wide enough that no line's why moves above it (tests/cli/test_fix_folding.py folds them).
    console = Console(file=io.StringIO(), width=160, highlight=False, emoji=False)
    print_fleet_fixes(console, results)
    lines = block(console.file.getvalue(), "To fix:")  # type: ignore[attr-defined]
    merged = f"{pip} tiktoken 'blobfile>=2'"
    assert lines == [
        f"# {merged}",  # the heading, then one line per host through ssh: no torch, an info finding's extra
        *(f"ssh -p 2222 root@127.0.0.{10 + i} '{pip} tiktoken '\"'\"'blobfile>=2'\"'\"''  # gpu{i}"
          + (", gpu0-alias" if i == 0 else "") for i in range(3)),
        f"# {pip} tiktoken",
        f"podman exec vllm {pip} tiktoken  # vllm",
        "# vllm",  # a command for the controller: once, under its host
        "introspect probe --model /m --host vllm  # after the install",
    ], lines
    bash_parses(lines)


def test_one_command_for_many_hosts_is_printed_once() -> None:
    lines = grouped_lines(["introspect cache clear"], {"introspect cache clear": ["a", "b"]}, {})
    assert lines == ["# a, b (2 hosts)", "introspect cache clear"]
    # Through a transport, the why after '#' stays, after the host's name.
    line = "ls /m  # is it there?"
    assert grouped_lines([line], {line: ["a"]}, {"a": {"scheme": "podman", "container": "c"}}) == [
        "# ls /m  # is it there?", "podman exec c ls /m  # a: is it there?"]


@pytest.mark.ssh
def test_health_over_three_hosts_prints_one_block_per_command(sshd, client_keys, tmp_path: Path) -> None:
    """Three inventory names on the session's sshd: two lack both packages, one lacks one."""
    bare = make_venv(tmp_path / "bare", exclude={"tiktoken", "transformers"})
    partial = make_venv(tmp_path / "partial", exclude={"tiktoken"})
    venv = {"requires": ["transformers", "tiktoken"]}
    hosts = {name: {"address": sshd.address, "port": sshd.port, "venvs": [{"path": str(path), **venv}]}
             for name, path in (("h1", bare), ("h2", partial), ("h3", bare))}
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text(yaml.safe_dump({"defaults": {"identity": str(client_keys.key),
                                                      "known_hosts": str(client_keys.known_hosts)},
                                         "hosts": hosts}))
    result = run_cli("health", "--hosts", str(inventory), "--db", str(tmp_path / "h.sqlite3"),
                     "--ssh-config", "/dev/null", env={"COLUMNS": "80"})
    assert result.code == 1, (result.stdout[-2000:], result.stderr[-2000:])
    lines = block(result.stdout, "To fix:")
    assert lines == ["# h1, h3 (2 hosts)", f"{bare}/bin/pip install transformers tiktoken",
                     "# h2", f"{partial}/bin/pip install tiktoken"], result.stdout
    bash_parses(lines)


@pytest.mark.ssh
def test_fleet_preflight_prints_the_fixes_once_after_the_summary(sshd, client_keys, kimi_model,
                                                                 tmp_path: Path) -> None:
    """Each host's checklist without its own fixes; after 'N of M hosts ready', one block whose
    install runs through ssh on the hosts that need it."""
    bare = make_venv(tmp_path / "bare", exclude={"tiktoken", "transformers"})
    hosts = {name: {"address": sshd.address, "port": sshd.port, "venvs": [{"path": str(bare)}]} for name in ("a", "b")}
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text(yaml.safe_dump({"defaults": {"identity": str(client_keys.key),
                                                      "known_hosts": str(client_keys.known_hosts)},
                                         "hosts": hosts}))
    result = run_cli("preflight", "--all-hosts", "--hosts", str(inventory), "--model", str(kimi_model),
                     "--min-free-gb", "0", "--endpoint", "http://127.0.0.1:9", "--ssh-config", "/dev/null",
                     env={"COLUMNS": "400"})  # no line folds: the long tmp paths would fold the heading
    assert result.code == 1 and "Traceback" not in result.stderr, (result.stdout[-2000:], result.stderr[-2000:])
    out = result.stdout
    assert out.count("To fix:") == 1 and out.index("0 of 2 hosts ready") < out.index("To fix:"), out
    lines = block(out, "To fix:")
    install = f"{bare}/bin/pip install transformers tiktoken"
    assert lines[:2] == [f"# {install}", f"ssh -p {sshd.port} {sshd.address} '{install}'  # a, b"], lines
    assert all(line.startswith("#") for line in lines[2:]), lines  # the endpoint's advice, as comments
    bash_parses(lines)
