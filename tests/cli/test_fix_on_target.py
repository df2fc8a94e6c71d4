"""A fix for the profiled machine runs through its transport: ``podman exec NAME pip install ...``,
``ssh root@gpu1 '...'``; pasted as printed, it must not install on the controller."""

from __future__ import annotations

import io
import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from introspect.analysis.profile import build_profile, build_profile_document
from introspect.cli.fix_lines import report_fixes, report_optional
from introspect.cli.remote_fix import fix_on_target, on_target, runs_on_target
from introspect.cli.render import print_report
from tests.cli.test_fix_lines import block

RAW = Path(__file__).resolve().parent.parent / "data" / "golden" / "raw"
PIP = "/root/venv/bin/pip install tiktoken"

CASES: list[tuple[dict[str, Any], str]] = [
    ({"scheme": "local"}, PIP),
    ({"scheme": "ssh", "host": "gpu1", "port": 2222, "user": "root"},
     "ssh -p 2222 root@gpu1 '/root/venv/bin/pip install tiktoken'"),
    ({"scheme": "openssh", "host": "gpu1"}, "ssh gpu1 '/root/venv/bin/pip install tiktoken'"),
    ({"scheme": "podman", "container": "vllm"}, f"podman exec vllm {PIP}"),
    ({"scheme": "docker", "container": "vllm", "user": "nobody"}, f"docker exec -u nobody vllm {PIP}"),
    ({"scheme": "kubectl", "container": "serving/vllm-0/engine", "host": "prod"},
     f"kubectl --context prod exec -n serving -c engine vllm-0 -- {PIP}"),
    ({"scheme": "kubectl", "container": "vllm-0"}, f"kubectl exec vllm-0 -- {PIP}"),
    ({"scheme": "lxc", "container": "llm"}, f"lxc-attach -n llm -- {PIP}"),
    ({"scheme": "pct", "container": "101"}, f"pct exec 101 -- {PIP}"),
    ({"scheme": "pct", "container": "101", "host": "pve", "user": "root"},
     "ssh root@pve 'pct exec 101 -- /root/venv/bin/pip install tiktoken'"),
]


def bash_parses(line: str) -> None:
    run = subprocess.run(["bash", "-n", "-c", line], capture_output=True, text=True, check=False)
    assert run.returncode == 0, (line, run.stderr)
    shlex.split(line, comments=True)


@pytest.mark.parametrize(("target", "expected"), CASES, ids=[str(t["scheme"]) + str(len(t)) for t, _ in CASES])
def test_each_scheme_wraps_the_command(target: dict[str, Any], expected: str) -> None:
    assert on_target(PIP, target) == expected
    bash_parses(expected)


@pytest.mark.parametrize("target", [t for t, _ in CASES], ids=[str(t["scheme"]) + str(len(t)) for t, _ in CASES])
def test_a_shell_command_survives_the_wrapping(target: dict[str, Any]) -> None:
    """Operators, ``~`` and quoted spaces reach the target's shell intact: the wrapped line, once
    its transport words are dropped, is the command again (or ``sh -c`` of it)."""
    command = "ls -l '/models/my model' && CUDA_VISIBLE_DEVICES=0 python3 -c 'print(1)' ~/x"
    wrapped = on_target(command, target)
    bash_parses(wrapped)
    words = shlex.split(wrapped)
    if target["scheme"] == "local":
        assert wrapped == command
    elif target.get("host") and target["scheme"] != "kubectl":  # ssh: the last word is for the remote shell
        inner = shlex.split(words[-1]) if target["scheme"] == "pct" else ["sh", "-c", words[-1]]
        assert inner[-3:-1] == ["sh", "-c"] and inner[-1] == command, wrapped
    else:
        assert words[-3:-1] == ["sh", "-c"] and words[-1] == command, wrapped


def test_comments_and_controller_commands_stay_as_they_are() -> None:
    podman = {"scheme": "podman", "container": "vllm"}
    for line in ("# add the model's config.json", "introspect probe --model /m  # again",
                 "ssh-keygen -R gpu1", "git pull && pip install .  # in your introspect clone"):
        assert fix_on_target(line, podman) == line
    line = "python3 -m pip install tiktoken  # the tokenizer's code imports it"
    assert fix_on_target(line, podman) == (
        "podman exec vllm python3 -m pip install tiktoken  # the tokenizer's code imports it")
    assert runs_on_target("CUDA_VISIBLE_DEVICES=0 /v/bin/python -c 1")
    assert not runs_on_target("/opt/bin/introspect probe") and not runs_on_target("")


def test_a_hash_inside_quotes_is_not_a_comment() -> None:
    line = "ls '/models/a #1'  # list it"
    assert fix_on_target(line, {"scheme": "lxc", "container": "c"}) == (
        "lxc-attach -n c -- ls '/models/a #1'  # list it")


def _podman_profile() -> dict[str, Any]:
    raw = json.loads((RAW / "kimi-k2.6-no-tiktoken.json").read_text(encoding="utf-8"))
    raw["target"] = dict(raw["target"], scheme="podman", container="vllm")
    return dict(build_profile(raw))


def test_podman_report_prints_pip_through_podman_exec() -> None:
    profile = _podman_profile()
    buffer = io.StringIO()
    print_report(profile, Console(file=buffer, width=100, force_terminal=False, color_system=None))
    out = buffer.getvalue()
    lines = block(out, "To fix:") + block(out, "Optional:")
    pips = [line for line in lines if "pip install" in line]
    assert pips and all(line.startswith("podman exec vllm ") for line in pips), out
    assert any("install tiktoken" in line for line in pips), out
    for line in lines:
        bash_parses(line)


def test_the_same_profile_taken_locally_prints_bare_pip() -> None:
    """The wrapping comes from the target alone: the local golden's fixes are unchanged."""
    raw = json.loads((RAW / "kimi-k2.6-no-tiktoken.json").read_text(encoding="utf-8"))
    profile = build_profile_document(raw)
    lines = report_fixes(profile).items + report_optional(profile).items
    assert any(line.startswith("/venvs/venv_no_tiktoken/bin/pip install tiktoken") for line in lines), lines
    assert not any(line.startswith(("podman", "ssh")) for line in lines), lines
