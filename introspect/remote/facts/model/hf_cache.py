"""The Hugging Face hub cache on the host, read with the standard library.

Runs on the host under its own interpreter: standard library only, Python 3.8+.
Nothing here raises to the caller; problems come back as error records
``{"probe": "hf_cache", "type", "message", "path"?}``.

Cache layout (huggingface_hub's ``file_download`` / ``_cache_manager``)::

    <cache>/models--<org>--<name>/
        refs/<branch or tag>           # one line: the commit hash (refs/pr/<n> nests)
        snapshots/<commit>/<file>      # symlinks -> ../../blobs/<sha>
        blobs/<sha256 or git sha1>

Where the cache is: an explicit directory, else ``HF_HUB_CACHE``, else the legacy
``HUGGINGFACE_HUB_CACHE``, else ``HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``,
else ``~/.cache/huggingface/hub`` (the order huggingface_hub.constants uses).

Used by the tasks "resolve" (a hub id to a snapshot directory) and "discover"
(every cached model). Without ``@REV`` the newest snapshot (by the snapshot
directory's mtime, which moves whenever a file lands in it) wins; ``@REV`` is a
ref name (branch or tag, as in ``refs/``) or a commit hash or unique prefix of one.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Any, Dict, List, Optional, Tuple

from ... import confine
from ...contract import ErrorRecord, error_record
from ...readers import read_bytes_capped

PROBE = "hf_cache"
REPO_PREFIX = {"model": "models", "dataset": "datasets", "space": "spaces"}
MAX_REPOS = 5000        # repo folders read from one cache
MAX_REVISIONS = 256     # snapshots read per repo
MAX_REFS = 1024         # ref files read per repo
MAX_REF_BYTES = 4096    # a ref holds one commit hash
MIN_PREFIX = 4          # shortest commit prefix accepted (git's own minimum)
_COMMIT_RE = re.compile(r"^[0-9a-fA-F]{4,64}$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _err(kind: str, message: str, path: Optional[str] = None) -> ErrorRecord:
    return error_record(kind, message, path, probe=PROBE)


# --------------------------------------------------------------------------- location


def cache_dir(explicit: Optional[str] = None, environ: Optional[Dict[str, str]] = None) -> str:
    """The hub cache directory this host's huggingface_hub would use."""
    env = os.environ if environ is None else environ
    if explicit:
        return os.path.expanduser(explicit)
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(name):
            return os.path.expanduser(env[name])
    if env.get("HF_HOME"):
        return os.path.join(os.path.expanduser(env["HF_HOME"]), "hub")
    xdg = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "huggingface", "hub")


# --------------------------------------------------------------------------- names


def repo_folder_name(repo_id: str, repo_type: str = "model") -> str:
    """``org/name`` -> ``models--org--name`` (huggingface_hub's repo_folder_name)."""
    return "--".join([REPO_PREFIX.get(repo_type, repo_type + "s")] + repo_id.split("/"))


def parse_repo_folder(name: str) -> Optional[Tuple[str, str]]:
    """``models--org--name`` -> ("model", "org/name"); None for anything else."""
    for repo_type, prefix in REPO_PREFIX.items():
        if name.startswith(prefix + "--"):
            rest = name[len(prefix) + 2:]
            if rest:
                return repo_type, rest.replace("--", "/")
    return None


def parse_spec(spec: str) -> Tuple[Optional[str], Optional[str], Optional[str]]:
    """``org/name[@REV]`` -> (repo_id, revision, problem). ``problem`` explains a bad spec."""
    if not isinstance(spec, str) or not spec.strip():
        return None, None, "an empty model id"
    text = spec.strip()
    revision: Optional[str] = None
    if "@" in text:
        text, revision = text.split("@", 1)
        if not revision:
            return None, None, "%r: nothing after '@' (write org/name@REVISION)" % spec
    parts = text.split("/")
    if len(parts) > 2 or not all(_NAME_RE.match(p) and ".." not in p for p in parts):
        return None, None, "%r is not a hub model id (org/name[@revision])" % spec
    return text, revision, None


# --------------------------------------------------------------------------- reading


def is_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def list_repos(cache: str, repo_type: str = "model") -> Tuple[List[Dict[str, Any]], List[ErrorRecord]]:
    """Repo folders of one type in the cache: [{"repo_id", "repo_type", "path"}], errors."""
    if not os.path.lexists(cache):
        return [], []
    try:
        names = sorted(os.listdir(cache))
    except OSError as exc:
        return [], [_err("permission-denied" if isinstance(exc, PermissionError) else "os-error",
                         "%s: %s" % (cache, exc.strerror or exc), cache)]
    repos: List[Dict[str, Any]] = []
    errors: List[ErrorRecord] = []
    for name in names:
        parsed = parse_repo_folder(name)
        if parsed is None or parsed[0] != repo_type:
            continue
        if len(repos) >= MAX_REPOS:
            errors.append(_err("scan-truncated", "more than %d repos in %s; listed the first %d"
                               % (MAX_REPOS, cache, MAX_REPOS), cache))
            break
        path = os.path.join(cache, name)
        if is_dir(path):
            repos.append({"repo_id": parsed[1], "repo_type": parsed[0], "path": path})
    return repos, errors


def read_refs(repo_path: str) -> Tuple[Dict[str, str], List[ErrorRecord]]:
    """{ref name: commit} from ``refs/`` (nested names such as ``pr/1`` included)."""
    refs_dir = os.path.join(repo_path, "refs")
    refs: Dict[str, str] = {}
    errors: List[ErrorRecord] = []
    if not is_dir(refs_dir):
        return refs, errors
    confine.confine(repo_path)  # a ref that links out of the repo is not read (nor a FIFO: it would block)
    # followlinks=False: a ref tree is plain files; a link loop there must not spin us.
    for dirpath, dirnames, filenames in os.walk(refs_dir, onerror=None, followlinks=False):
        dirnames.sort()
        for fname in sorted(filenames):
            if len(refs) >= MAX_REFS:
                return refs, errors
            full = os.path.join(dirpath, fname)
            name = os.path.relpath(full, refs_dir).replace(os.sep, "/")
            raw, err = read_bytes_capped(full, MAX_REF_BYTES)
            if raw is None:
                kind = "link-outside" if err and err["type"] == "link-outside" else "unreadable-ref"
                errors.append(_err(kind, err["message"] if err else full, full))
                continue
            commit = raw[:256].decode("utf-8", "replace").strip()
            if _COMMIT_RE.match(commit):
                refs[name] = commit.lower()
    return refs, errors


def list_revisions(repo_path: str) -> Tuple[List[Dict[str, Any]], List[ErrorRecord]]:
    """Snapshots of one repo, newest first: [{"commit", "path", "mtime", "refs"}], errors."""
    refs, errors = read_refs(repo_path)
    snapshots = os.path.join(repo_path, "snapshots")
    try:
        names = sorted(os.listdir(snapshots))
    except OSError as exc:
        if not os.path.lexists(snapshots):
            return [], errors
        errors.append(_err("permission-denied" if isinstance(exc, PermissionError) else "os-error",
                           "%s: %s" % (snapshots, exc.strerror or exc), snapshots))
        return [], errors
    by_commit: Dict[str, List[str]] = {}
    for ref, commit in sorted(refs.items()):
        by_commit.setdefault(commit, []).append(ref)
    revisions = []
    for name in names[:MAX_REVISIONS]:
        path = os.path.join(snapshots, name)
        try:
            st = os.stat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode):
            continue
        revisions.append({"commit": name.lower(), "path": path, "mtime": st.st_mtime,
                          "refs": by_commit.get(name.lower(), [])})
    revisions.sort(key=lambda r: (r["mtime"], r["commit"]), reverse=True)
    return revisions, errors


def describe_revisions(revisions: List[Dict[str, Any]]) -> str:
    """``abc123def456 (main), 0123456789ab`` for messages."""
    if not revisions:
        return "none"
    out = []
    for rev in revisions:
        refs = rev.get("refs") or []
        out.append("%s%s" % (rev["commit"][:12], " (%s)" % ", ".join(refs) if refs else ""))
    return ", ".join(out)


# --------------------------------------------------------------------------- choosing a revision


def pick_revision(revisions: List[Dict[str, Any]], refs: Dict[str, str],
                  wanted: Optional[str]) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """The snapshot for ``wanted`` (None: the newest) and, when none fits, why."""
    if not revisions:
        return None, "no snapshot is cached"
    if wanted is None:
        return revisions[0], None
    by_commit = dict((r["commit"], r) for r in revisions)
    if wanted in refs:  # a ref name wins over a hex-looking prefix, as in git
        commit = refs[wanted]
        if commit in by_commit:
            return by_commit[commit], None
        return None, "ref %r points to commit %s, whose snapshot is not cached" % (wanted, commit[:12])
    lowered = wanted.lower()
    if not _COMMIT_RE.match(lowered) or len(lowered) < MIN_PREFIX:
        return None, "no ref named %r is cached" % wanted
    matches = [r for r in revisions if r["commit"].startswith(lowered)]
    if len(matches) == 1:
        return matches[0], None
    if len(matches) > 1:
        return None, "commit prefix %r is ambiguous (%s)" % (wanted, describe_revisions(matches))
    return None, "no cached commit or ref matches %r" % wanted
