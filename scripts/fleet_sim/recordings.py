"""Recorded exchanges: what the real remote runner answered to each request, stored to replay.

A request is named by what the controller asked for, read off the exec line and the first line of
stdin (the envelope, see introspect/transport/shipping.py): ``health``, ``model``, a batch as
``batch:fingerprint+model``, and the peers' version one-liner as ``peer-version``. The stored
exchange is the real run's stdout, stderr and exit status, byte for byte, and the request without
the shipped module sources (kept for reading, never matched on).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMAT = "introspect-fleet-sim/1"
PEER = "peer-version"
# The peers' job in scripts/bench_peers.py: the version one-liner Ansible, pyinfra and pssh run.
PEER_JOB = "import sys; print(sys.version)"
# The files-only probe that the recorder records and every bench runs (scripts/bench, scripts/bench
# --fleet): the safetensors headers and config files, none of the loads that import transformers on
# the host (the tokenizer and the model-code witness), no result cache.
FILES_ONLY = ("--no-tokenizer", "--no-model-code", "--no-cache")
# Every introspect exec line carries BOOT (introspect/transport/shipping.py), which imports the runner.
BOOT_MARK = "introspect.remote.runner"


@dataclass(frozen=True)
class Exchange:
    stdout: bytes
    stderr: bytes
    exit: int
    request: dict[str, Any]
    seconds: float  # how long the real run took

    def to_json(self) -> dict[str, Any]:
        return {"stdout": base64.b64encode(self.stdout).decode(), "stderr": base64.b64encode(self.stderr).decode(),
                "exit": self.exit, "request": self.request, "seconds": round(self.seconds, 4)}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Exchange:
        return cls(base64.b64decode(doc["stdout"]), base64.b64decode(doc["stderr"]), int(doc["exit"]),
                   dict(doc.get("request") or {}), float(doc.get("seconds") or 0.0))


def is_introspect(command: str) -> bool:
    return BOOT_MARK in command


def is_peer_job(command: str) -> bool:
    return PEER_JOB in command and not is_introspect(command)


def envelope_signature(first_line: bytes) -> tuple[str, dict[str, Any]]:
    """The name of an introspect request and its readable part (the envelope without sources)."""
    envelope = json.loads(first_line)
    readable = {k: v for k, v in envelope.items() if k not in ("sources", "packages")}
    readable["stdin_sha256"] = hashlib.sha256(first_line).hexdigest()
    if envelope.get("batch") is not None:
        return "batch:" + "+".join(str(item.get("task")) for item in envelope["batch"]), readable
    return str(envelope.get("task")), readable


class Recordings:
    """Exchanges by request name, and what they were recorded against (the paths on the host)."""

    def __init__(self, exchanges: dict[str, Exchange] | None = None, meta: dict[str, Any] | None = None) -> None:
        self.exchanges: dict[str, Exchange] = dict(exchanges or {})
        self.meta: dict[str, Any] = dict(meta or {})

    def get(self, name: str) -> Exchange | None:
        return self.exchanges.get(name)

    def save(self, path: Path) -> None:
        doc = {"format": FORMAT, "meta": self.meta,
               "exchanges": {k: v.to_json() for k, v in sorted(self.exchanges.items())}}
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> Recordings:
        doc = json.loads(path.read_text())
        if doc.get("format") != FORMAT:
            raise ValueError(f"{path}: not a {FORMAT} file (format {doc.get('format')!r})")
        return cls({k: Exchange.from_json(v) for k, v in doc["exchanges"].items()}, doc.get("meta") or {})


def product_key() -> str:
    """What a recording depends on: introspect's version, the shipped remote sources, this Python.
    A change to any of them makes a new recording (the old replies could be stale)."""
    from introspect import __version__
    from introspect.transport import shipping

    digest = hashlib.sha256()
    for name, source in sorted(shipping.remote_sources().items()):
        digest.update(name.encode() + b"\0" + source.encode() + b"\0")
    digest.update(f"{__version__}|{sys.version}".encode())
    return digest.hexdigest()[:16]


def default_path() -> Path:
    return Path.home() / ".cache" / "introspect-bench" / "fleet-sim" / f"recordings-{product_key()}.json"
