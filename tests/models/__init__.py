"""Tests of issue 8 (models across the fleet), and the HF cache layouts they build.

``add_revision`` writes a revision of a repo into a hub cache exactly as
huggingface_hub lays it out: content in ``blobs/<sha256>``, every snapshot file
a *relative* symlink ``snapshots/<commit>/<file> -> ../../blobs/<sha256>``
(one more ``../`` per sub-directory), and ``refs/<name>`` holding the commit.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

REPO_ID = "moonshotai/Kimi-K2.6"
OLD_COMMIT = "1111111111aaaaaaaaaa2222222222bbbbbbbbbb"
NEW_COMMIT = "3333333333cccccccccc4444444444dddddddddd"


def repo_dir(cache: Path, repo_id: str) -> Path:
    return cache / ("models--" + repo_id.replace("/", "--"))


def add_revision(cache: Path, repo_id: str, commit: str, files: dict[str, bytes], *,
                 refs: tuple[str, ...] = (), mtime: float | None = None) -> Path:
    """One snapshot of ``repo_id`` at ``commit``; returns the snapshot directory."""
    repo = repo_dir(cache, repo_id)
    blobs = repo / "blobs"
    snapshot = repo / "snapshots" / commit
    blobs.mkdir(parents=True, exist_ok=True)
    for name, data in sorted(files.items()):
        sha = hashlib.sha256(data).hexdigest()
        blob = blobs / sha
        if not blob.exists():
            blob.write_bytes(data)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        depth = name.count("/")
        link.symlink_to(("../" * (depth + 2)) + "blobs/" + sha)
    for ref in refs:
        ref_file = repo / "refs" / ref
        ref_file.parent.mkdir(parents=True, exist_ok=True)
        ref_file.write_text(commit)
    if mtime is not None:
        os.utime(snapshot, (mtime, mtime))
    return snapshot


def files_of(model_dir: Path) -> dict[str, bytes]:
    """Every file of a plain model dir, by relative name (for add_revision)."""
    out = {}
    for path in sorted(model_dir.rglob("*")):
        if path.is_file():
            out[path.relative_to(model_dir).as_posix()] = path.read_bytes()
    return out
