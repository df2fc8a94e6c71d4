"""Hub ids (``org/name[@rev]``) resolved to a snapshot directory in the host's HF cache.

The remote work is the shipped "resolve" task; this module sends it and turns its
answer into a path, or an error naming the revisions the host does have.
"""

from __future__ import annotations

import re
from typing import Any, cast

from introspect.errors import ModelPathError, RemoteError
from introspect.remote.contract import ResolveReply, ResolveRequest
from introspect.transport.base import Executor

_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
# A revision is a branch, tag (may hold "/": refs/pr/1) or commit prefix; never whitespace or "..".
_REPO_ID_RE = re.compile(rf"^{_NAME}/{_NAME}(@[A-Za-z0-9._/-]+)?$")


def is_repo_id(spec: str) -> bool:
    """``org/name[@rev]``, and not a path: no leading ``/``, ``.`` or ``~``.

    A relative path such as ``models/Kimi`` looks like an id; write it ``./models/Kimi``.
    """
    if not isinstance(spec, str) or not spec or spec[0] in "/.~":
        return False
    if not _REPO_ID_RE.match(spec):
        return False
    return ".." not in spec


def resolve_model(executor: Executor, python: str, spec: str, timeout: float, *,
                  cache_dir: str | None = None) -> tuple[str, ResolveReply]:
    """The snapshot directory of hub id ``spec`` in the host's HF cache, and the resolve facts.

    Newest cached snapshot unless ``@REV`` names a ref or a commit (prefix). Raises
    ModelPathError (exit 2) naming the cached revisions when nothing matches.
    """
    request = ResolveRequest(spec=spec, cache_dir=cache_dir)
    reply = executor.run_python(python, "resolve", request.copy(), timeout=timeout)
    # The frame's members were type-checked (transport/frames.py); its facts are the task's reply.
    facts = cast(ResolveReply, reply.facts) if isinstance(reply.facts, dict) else None
    if facts is None:
        raise RemoteError(f"resolving {spec} failed: {first_message(reply.errors)}",
                          hint="run with --debug to see the remote stderr", host=executor.label,
                          stage="resolve")
    if facts.get("path"):
        return str(facts["path"]), facts
    raise ModelPathError(first_message(reply.errors or facts.get("errors") or []),
                         hint=_resolve_hint(facts), host=executor.label, stage="resolve")


def first_message(errors: list[Any]) -> str:
    """The first error record's message ("no answer" when there is none)."""
    for err in errors:
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
    return "no answer"


def _resolve_hint(facts: ResolveReply) -> str:
    repo = facts.get("repo_id") or "ORG/NAME"
    cached = facts.get("cached_revisions") or []
    if cached:
        first = cached[0]
        ref = (first.get("refs") or [first.get("commit", "")[:12]])[0]
        return (f"name a cached revision ({repo}@{ref}), or download the one you want on the host: "
                f"hf download {repo} --revision REV")
    return (f"download it on the host (hf download {repo}), point --hf-cache at the cache that holds it, "
            "or pass --model the model directory")
