"""Every file read for a model stays inside its directory, or inside the hub-cache repo it belongs to.

Runs on the host: standard library only, Python 3.8+. A model directory is filled by
someone else (a download, a colleague, a git clone: git stores symlinks as such), so a
``config.json`` or ``chat_template.jinja`` may be a symbolic link to ``~/.docker/config.json``,
a cloud key or ``/etc/shadow``. Following it would put that file's content into the profile,
``--save-raw`` and the result cache. A task calls :func:`confine` with its model dir first;
from then on :func:`check` (called by the one file opener, ``readers.open_regular``) refuses any
path under that dir whose real path leaves the allowed root, and names the link that leads out.

The allowed root is the model dir's real path, except for a hub-cache snapshot
(``.../models--org--name/snapshots/<rev>``), whose files are links into the repo's
``blobs/`` (huggingface_hub's file_download.py ``_create_symlink``,
https://github.com/huggingface/huggingface_hub/blob/main/src/huggingface_hub/file_download.py):
there the root is ``.../models--org--name``.
"""

from __future__ import annotations

import errno
import os
import threading
from typing import Dict, List, Optional, Tuple

HUB_REPO_PREFIXES = ("models--", "datasets--", "spaces--")
# Files the tokenizer load and the config class never open (weights, and their indexes): a
# link out among them costs the static reads of that file only, never the isolated loads.
NOT_OPENED_BY_LOADS = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack", ".onnx",
                       ".safetensors.index.json", ".bin.index.json")
MAX_WALK_ENTRIES = 20000  # entries looked at by links_out, at most
MAX_WALK_DEPTH = 4        # transformers reads the top level and a few subfolders (additional_chat_templates/)

_roots: Dict[str, str] = {}  # a model dir (as given, and real) -> the root its files must stay in
_lock = threading.Lock()


class LinkOutside(OSError):
    """A path under a confined model dir whose real path is outside its allowed root."""

    def __init__(self, path: str, link: str) -> None:
        OSError.__init__(self, errno.EPERM, describe(path, link))
        self.path, self.link = path, link


def describe(path: str, link: str) -> str:
    """The words of a link out: the link named, never its target."""
    words = "%s is a symbolic link that points outside the model directory; not followed" % link
    return words if path == link else "%s (reading %s)" % (words, path)


def allowed_root(model_path: str) -> str:
    """The real path the model's files must stay in (see the module docstring)."""
    real = os.path.realpath(model_path)
    snapshots, _rev = os.path.split(real)
    repo, name = os.path.split(snapshots)
    if name == "snapshots" and os.path.basename(repo).startswith(HUB_REPO_PREFIXES):
        return repo
    return real


def _key(path: str) -> str:
    return os.path.normpath(os.path.abspath(path))


def confine(model_path: str) -> str:
    """Confine reads under ``model_path`` (as given and as its real path); returns the allowed root."""
    root = allowed_root(model_path)
    with _lock:
        _roots[_key(model_path)] = root
        _roots[os.path.realpath(model_path)] = root
    return root


def within(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def _confining(path: str) -> Optional[Tuple[str, str]]:
    """(model dir, root) of the nearest confined dir that ``path`` (normalised) lies under, or None:
    looked up parent by parent, so a run that confined thousands of dirs (discovery) stays cheap."""
    current = path
    with _lock:
        while True:
            root = _roots.get(current)
            if root is not None:
                return current, root
            parent = os.path.dirname(current)
            if parent == current:
                return None
            current = parent


def link_out(path: str, base: str, root: str) -> Optional[str]:
    """The first link on the way from ``base`` down to ``path`` that leads out of ``root``, else None."""
    if within(os.path.realpath(path), root):
        return None
    current = base
    for part in os.path.relpath(path, base).split(os.sep):
        current = os.path.join(current, part)
        if os.path.islink(current) and not within(os.path.realpath(current), root):
            return current
    return path  # out without a link of its own: base itself was swapped meanwhile


def check(path: str) -> None:
    """Raise :class:`LinkOutside` when ``path`` lies under a confined model dir and resolves outside it."""
    absolute = _key(path)
    found = _confining(absolute)
    if found is None:
        return
    link = link_out(absolute, found[0], found[1])
    if link is not None:
        raise LinkOutside(absolute, link)


def links_out(model_path: str, loads_only: bool = True) -> List[str]:
    """Links under ``model_path`` whose targets are outside its allowed root, sorted.

    Walks a few levels without following directory links (a link out is reported, one
    inside is walked from its real place already). ``loads_only`` leaves out hidden entries
    and the files the isolated loads never open (:data:`NOT_OPENED_BY_LOADS`).
    """
    root = allowed_root(model_path)
    found: List[str] = []
    pending = [(model_path, 0)]
    seen = 0
    while pending and seen < MAX_WALK_ENTRIES:
        current, depth = pending.pop()
        try:
            with os.scandir(current) as it:
                entries = list(it)
        except OSError:
            continue  # an unreadable subdir: what reads it reports it
        for entry in entries:
            seen += 1
            if loads_only and (entry.name.startswith(".") or entry.name.endswith(NOT_OPENED_BY_LOADS)):
                continue
            if entry.is_symlink():
                if not within(os.path.realpath(entry.path), root):
                    found.append(entry.path)
            elif depth + 1 < MAX_WALK_DEPTH and entry.is_dir(follow_symlinks=False):
                pending.append((entry.path, depth + 1))
    return sorted(found)
