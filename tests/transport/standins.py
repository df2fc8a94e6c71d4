"""Stand-ins for clients whose server cannot exist on a test machine (a Kubernetes cluster,
a Proxmox VE node, an LXC host): a program with the client's name that checks the argv
introspect builds against the client's grammar, records it, and then runs the command after
``--`` here, as the real client would run it in the container.

Only the happy path goes through these; every error case runs the real client binary.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

STANDIN = r'''#!{python}
# Stand-in {name}: checks introspect's argv against {name}'s grammar, then execs the command here;
# asked for the container's state (no "--"), it answers "running" the way {name} prints it.
import json, os, sys
argv = sys.argv[1:]
STATES = {{"kubectl": "Running", "pct": "status: running", "lxc-info": "RUNNING"}}
if "--" not in argv:
    QUERIES = {{
        "kubectl": lambda a: "get" in a and a[a.index("get") + 1] == "pod" and "jsonpath={{.status.phase}}" in a,
        "pct": lambda a: len(a) == 2 and a[0] == "status" and a[1].isdigit(),
        "lxc-info": lambda a: "-n" in a and a[-2:] == ["-s", "-H"],
    }}
    if "{name}" not in QUERIES or not QUERIES["{name}"](argv):
        sys.stderr.write("stand-in {name}: not a state query: " + repr(argv) + "\n"); sys.exit(2)
    with open({log!r}, "a") as fh:
        fh.write(json.dumps(["QUERY", *argv]) + "\n")
    print(STATES["{name}"]); sys.exit(0)
cut = argv.index("--")
prefix, command = argv[:cut], argv[cut + 1:]
GRAMMARS = {{
    "kubectl": lambda p: (lambda rest: rest[:2] == ["exec", "-i"] and len(rest) >= 3)(
        [w for i, w in enumerate(p) if not (w in ("--kubeconfig", "--context") or
                                             (i and p[i - 1] in ("--kubeconfig", "--context")))]),
    "pct": lambda p: len(p) == 2 and p[0] == "exec" and p[1].isdigit(),
    "lxc-attach": lambda p: len(p) == 2 and p[0] == "-n",
    "lxc": lambda p: len(p) == 3 and p[0] == "exec" and p[2] == "--mode=non-interactive",
}}
if not GRAMMARS["{name}"](prefix):
    sys.stderr.write("stand-in {name}: argv does not fit the grammar: " + repr(prefix) + "\n"); sys.exit(2)
with open({log!r}, "a") as fh:
    fh.write(json.dumps(prefix) + "\n")
os.execv(command[0], command)
'''


def make_standin(directory: Path, name: str) -> tuple[Path, Path]:
    """Write the stand-in ``directory/name``; returns (program, log of the argv prefixes it saw)."""
    directory.mkdir(parents=True, exist_ok=True)
    program, log = directory / name, directory / f"{name}.argv.jsonl"
    program.write_text(STANDIN.format(python=os.path.realpath(sys.executable), name=name, log=str(log)))
    program.chmod(0o755)
    log.touch()
    return program, log


def seen(log: Path, *, queries: bool = False) -> list[list[str]]:
    """The argv prefixes the stand-in ran (or, with ``queries``, the state queries it answered)."""
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [line[1:] for line in lines if line[:1] == ["QUERY"]] if queries else [
        line for line in lines if line[:1] != ["QUERY"]]
