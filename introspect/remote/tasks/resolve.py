"""Remote task "resolve": a hub model id to the snapshot directory in this host's cache.

Standard library only, Python 3.8+. Request :class:`~introspect.remote.contract.ResolveRequest`
(``{"spec": "org/name[@REV]", "cache_dir": optional}``), reply
:class:`~introspect.remote.contract.ResolveReply`; the cache is read by
:mod:`introspect.remote.facts.model.hf_cache`.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

from ..contract import ErrorRecord, ResolveReply, error_record
from ..facts.model import hf_cache

PROBE = "hf_cache"  # what the errors are about: the cache


def _err(kind: str, message: str, path: Optional[str] = None) -> ErrorRecord:
    return error_record(kind, message, path, probe=PROBE)


def run(request: Dict[str, Any]) -> ResolveReply:
    """The snapshot for ``spec``; when none fits, the errors say which revisions are cached."""
    cache = hf_cache.cache_dir(request.get("cache_dir"))
    out = ResolveReply(spec=request.get("spec"), cache_dir=cache, path=None, repo_id=None, revision=None, commit=None,
                       refs=[], cached_revisions=[], errors=[])
    repo_id, wanted, problem = hf_cache.parse_spec(str(request.get("spec") or ""))
    if problem is not None or repo_id is None:
        out["errors"].append(_err("bad-spec", problem or "no model id"))
        return out
    out["repo_id"], out["revision"] = repo_id, wanted
    repo_path = os.path.join(cache, hf_cache.repo_folder_name(repo_id))
    if not hf_cache.is_dir(repo_path):
        out["errors"].append(_not_cached(cache, repo_id))
        return out
    refs, ref_errors = hf_cache.read_refs(repo_path)
    revisions, rev_errors = hf_cache.list_revisions(repo_path)
    out["errors"].extend(ref_errors + rev_errors)
    out["cached_revisions"] = _cached_summary(revisions)
    chosen, why = hf_cache.pick_revision(revisions, refs, wanted)
    if chosen is None:
        out["errors"].append(_err("revision-not-cached", "%s: %s; cached revisions: %s"
                                  % (repo_id, why, hf_cache.describe_revisions(revisions)), repo_path))
        return out
    out["path"], out["commit"], out["refs"] = chosen["path"], chosen["commit"], list(chosen["refs"])
    if wanted is None:
        out["revision"] = chosen["refs"][0] if chosen["refs"] else chosen["commit"]
    return out


def _cached_summary(revisions: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [{"commit": r["commit"], "refs": list(r["refs"]), "mtime": r["mtime"], "path": r["path"]}
            for r in revisions]


def _not_cached(cache: str, repo_id: str) -> ErrorRecord:
    repos, _errors = hf_cache.list_repos(cache)
    names = [r["repo_id"] for r in repos]
    # The nearest cached ids first: same name under another org, then the same org.
    tail = repo_id.split("/")[-1].lower()
    org = repo_id.split("/")[0].lower() + "/"
    related = [n for n in names if n.split("/")[-1].lower() == tail or n.lower().startswith(org)]
    if not os.path.lexists(cache):
        msg = "%s is not cached: there is no hub cache at %s" % (repo_id, cache)
    else:
        shown = related or names[:20]
        msg = "%s is not in the hub cache %s; cached models: %s" % (
            repo_id, cache, ", ".join(shown) if shown else "none")
    return _err("not-cached", msg, cache)
