"""Per-host variation of the replayed replies: each host its own versions, disk and pid, by seed.

A fleet where every host answers the same bytes would hide work the controller does per distinct
answer (history rows that differ, drift found, versions summarised). So each host gets, from a
generator seeded by (seed, host, epoch):

- the patch level of the packages the checks look at (transformers, tokenizers, tiktoken) in the
  health task's ``distributions`` and the file probe's ``environment.packages``;
- the patch level of Python in the peers' version line and in the health task's ``python`` block;
- the free bytes of every disk the health task measured, and the reply's ``pid``.

A drifting host (``FleetSpec.drift``) is seeded with the simulator's epoch too: when the epoch
changes (SIGHUP to the simulator), its versions change, and the health history reports drift.
Only the reply frames are rewritten (parsed and written back as the runner writes them:
``json.dumps`` with its default separators); anything around them stays byte for byte.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

from introspect.remote.contract import BEGIN, END

from .recordings import PEER

PACKAGES = ("transformers", "tokenizers", "tiktoken")
_FRAME = re.compile(re.escape(BEGIN) + b"(.*?)" + re.escape(END), re.S)
_PEER = re.compile(rb"^(\d+)\.(\d+)\.(\d+)")


def _patch(version: str, rng: random.Random) -> str:
    """``5.24.0`` -> ``5.24.<0..2>``: the same or a later patch release, so that the venv's own
    pins (``tokenizers<0.24.0,>=0.23.1``) still hold and the variation adds no failed check; a
    version without three numeric parts stays as it is."""
    parts = version.split(".")
    if len(parts) >= 3 and parts[2].isdigit():
        parts[2] = str(int(parts[2]) + rng.randrange(3))
    return ".".join(parts)


def _python(block: dict[str, Any], micro: int) -> None:
    """The health task's ``python`` block ``micro`` patch releases later, its every spelling."""
    info = block.get("version_info")
    if isinstance(info, list) and len(info) >= 3 and isinstance(info[2], int):
        info[2] += micro
        text = ".".join(str(v) for v in info[:3])
        block["version"] = text
        env = block.get("marker_env")
        if isinstance(env, dict):
            env["python_full_version"] = text
            env["implementation_version"] = text


def _facts(facts: Any, rng: random.Random, micro: int) -> None:
    if not isinstance(facts, dict):
        return
    dists = facts.get("distributions")
    if isinstance(dists, dict):
        for name in PACKAGES:
            if isinstance(dists.get(name), dict) and isinstance(dists[name].get("version"), str):
                dists[name]["version"] = _patch(dists[name]["version"], rng)
    if isinstance(facts.get("python"), dict):
        _python(facts["python"], micro)
    packages = (facts.get("environment") or {}).get("packages") if isinstance(facts.get("environment"), dict) else None
    if isinstance(packages, dict):
        for name in PACKAGES:
            if isinstance(packages.get(name), str):
                packages[name] = _patch(packages[name], rng)
    for disk in (facts.get("disk") or {}).values() if isinstance(facts.get("disk"), dict) else ():
        if isinstance(disk, dict) and isinstance(disk.get("free_bytes"), int) and isinstance(disk.get("total_bytes"), int):
            disk["free_bytes"] = int(disk["total_bytes"] * rng.uniform(0.05, 0.9))


def micro_version(seed: int, index: int, epoch: int) -> int:
    """How many Python patch releases host ``index`` is ahead of the recording (0..3)."""
    return random.Random(f"python:{seed}:{index}:{epoch}").randrange(4)


def vary(name: str, stdout: bytes, index: int, seed: int, epoch: int) -> bytes:
    """``stdout`` as host ``index`` answers it (see the module's docstring)."""
    micro = micro_version(seed, index, epoch)
    if name == PEER:
        return _PEER.sub(lambda m: m.group(1) + b"." + m.group(2) + b"." + str(int(m.group(3)) + micro).encode(),
                         stdout, count=1)
    rng = random.Random(f"vary:{seed}:{index}:{epoch}")

    def one(match: re.Match[bytes]) -> bytes:
        try:
            reply = json.loads(match.group(1))
        except ValueError:
            return match.group(0)
        if not isinstance(reply, dict):
            return match.group(0)
        reply["pid"] = rng.randrange(1000, 4_000_000)
        _facts(reply.get("facts"), rng, micro)
        version = reply["python"].get("version") if isinstance(reply.get("python"), dict) else None
        if isinstance(version, list) and len(version) >= 3 and isinstance(version[2], int):
            version[2] += micro
        return BEGIN + json.dumps(reply).encode("utf-8") + END

    return _FRAME.sub(one, stdout)
