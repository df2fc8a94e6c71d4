"""The API calls that answer with one typed document: :func:`plan`, :func:`diff`, :func:`models`.

Each returns the pydantic model of the document the CLI prints with ``--json`` (attribute
access, ``.to_json()`` for the same JSON, ``.to_dict()``), validated on the way out, so a
renamed member fails here and not in a consumer. :mod:`introspect.api` re-exports them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from introspect.analysis.result import PROFILE_SCHEMA
from introspect.analysis.serving.plan import DEFAULT_FRACTION, GpuBudget
from introspect.documents.compare import DiffDocument
from introspect.documents.listing import ModelsDocument
from introspect.documents.plan import PlanDocument
from introspect.documents.profile import ProfileDocument
from introspect.errors import UsageError
from introspect.remote.contract import (
    DEFAULT_FILES_TIMEOUT,
    DEFAULT_JSON_CAP,
    DEFAULT_TOKENIZER_TIMEOUT,
    JSONObject,
)

if TYPE_CHECKING:
    from introspect.api import SSH

ProfileInput = ProfileDocument | Mapping[str, Any] | str | Path


def _profile_dict(profile: ProfileInput) -> JSONObject:
    """A profile given as a typed document, its JSON dict, or a saved file's path, as JSON (``diff`` compares
    profiles of any version as read)."""
    if isinstance(profile, ProfileDocument):
        return profile.to_dict()
    if isinstance(profile, Mapping):
        return dict(profile)
    from introspect.client.documents import read_document

    return read_document(str(profile), PROFILE_SCHEMA, what="a profile",
                         hint="introspect probe --model M --json --output PROFILE.json  # save one first")


def _stamped(document: JSONObject, schema: str) -> JSONObject:
    """A document's JSON with ``schema`` and ``introspect_version`` first, as the CLI prints it, to validate."""
    from introspect.cli.jsonout import stamped

    return stamped(document, schema)


def plan(profile: ProfileInput, *, gpus: int | None = None, gpu_mem: str | None = None, gpu: str | None = None,
         mem_fraction: float = DEFAULT_FRACTION, max_model_len: int | None = None, kv_dtype: str = "auto",
         context_len: int | None = None, gpus_per_node: int | None = None) -> PlanDocument:
    """Which TP / EP / PP layouts of ``profile``'s model fit ``gpus`` GPUs (``introspect plan --json``).

    ``gpu_mem`` is a size (``"141GB"``, ``"96GiB"``) or ``gpu`` a name (``"H200"``); without
    either, the GPUs the profile probed. ``gpus_per_node`` spreads ``gpus`` over nodes. A profile that
    does not fit ``introspect.profile/v1`` raises :class:`~introspect.errors.InputError` naming the key.

    >>> from introspect import plan
    >>> document = plan(PROFILE, gpus=8, gpu="H200", max_model_len=32768)
    >>> document.best, document.gpus.count, document.max_model_len
    ('TP8', 8, 32768)
    >>> [layout.name for layout in document.layouts if layout.fits][:1]
    ['TP8']
    """
    from introspect.analysis.serving.plan_context import ContextOptions
    from introspect.analysis.serving.section import replan
    from introspect.cli.cmd_plan import profile_document
    from introspect.cli.gpu_mem import gpu_by_name, parse_gpu_mem

    document = profile if isinstance(profile, ProfileDocument) else profile_document(_profile_dict(profile))
    probed = document.plan.gpus
    if gpu and gpu_mem:
        raise UsageError("gpu= and gpu_mem= both give the GPU's memory", hint="# pass one of them")
    name, memory = gpu_by_name(gpu) if gpu else (None, parse_gpu_mem(gpu_mem) if gpu_mem else 0)
    if (gpus is None or not memory) and probed is None:
        raise UsageError("the profile has no GPU facts", hint="# pass gpus= and gpu= (or gpu_mem=)")
    budget = GpuBudget(count=gpus or (probed.count if probed else 0),
                       memory_bytes=memory or (probed.memory_bytes if probed else 0),
                       name=name if memory else (probed.name if probed else None),
                       source="flags" if gpus or memory else str(probed.source if probed else None),
                       per_node=gpus_per_node)
    section = replan(document, budget, mem_fraction, ContextOptions(max_model_len, kv_dtype, context_len))
    return PlanDocument.model_validate(_stamped(section.to_dict(), PlanDocument.SCHEMA))


def diff(a: ProfileInput, b: ProfileInput, *, sections: Sequence[str] = (), ssh: SSH | None = None,
         venv: str | None = None, python: str | None = None, remote_code: bool = True, tokenizer: bool = True,
         hosts_file: str | Path | None = None) -> DiffDocument:
    """Two profiles compared, grouped as ``introspect diff --json``: each side a profile (typed, a
    dict or a saved file) or a live ``HOST:PATH`` / ``HOST:ORG/NAME`` target probed now.

    >>> from introspect import diff
    >>> document = diff(PROFILE, PROFILE)
    >>> document.identical
    True
    """
    from introspect.analysis.diff.document import GROUPS, diff_profiles

    profiles = [_side(side) for side in (a, b)]
    if any(p is None for p in profiles):
        live = _live_profiles([a, b], ssh, venv, python, remote_code, tokenizer, hosts_file)
        profiles = [p if p is not None else live.pop(0) for p in profiles]
    result = diff_profiles(profiles[0] or {}, profiles[1] or {}, tuple(sections) or GROUPS)
    return DiffDocument.model_validate(_stamped(result, DiffDocument.SCHEMA))


def _side(side: ProfileInput) -> JSONObject | None:
    """The profile of one operand, or None when it names a live target."""
    if isinstance(side, (ProfileDocument, Mapping)) or Path(side).is_file():
        return _profile_dict(side)
    return None


def _live_profiles(sides: list[ProfileInput], ssh: SSH | None, venv: str | None, python: str | None,
                   remote_code: bool, tokenizer: bool, hosts_file: str | Path | None) -> list[JSONObject]:
    """The live operands' profiles, in order, probed in parallel (one connection each)."""
    from introspect.api import SSH, _executor, _inventory
    from introspect.client.diff import LiveOptions, parse_side, profiles_for

    inventory = _inventory(hosts_file)
    opts = LiveOptions(venv=venv, python=python, timeout=DEFAULT_TOKENIZER_TIMEOUT,
                       files_timeout=DEFAULT_FILES_TIMEOUT, remote_code=remote_code, load_tokenizer=tokenizer,
                       hf_cache=None, json_cap=DEFAULT_JSON_CAP, inventory=inventory)
    live = [parse_side(str(s)) for s in sides if not isinstance(s, (ProfileDocument, Mapping))
            and not Path(s).is_file()]
    return profiles_for(live, lambda host: _executor(host, ssh or SSH(), inventory), opts)


def models(*, host: str | None = None, ssh: SSH | None = None, roots: Sequence[str] = (),
           venv: str | None = None, python: str | None = None, hf_cache: str | None = None,
           hosts_file: str | Path | None = None, parallel: int = 8) -> ModelsDocument:
    """The model directories on ``host`` (this machine when None), or on every host of
    ``hosts_file`` when ``host`` is None and an inventory is given (``introspect models --json``).

    >>> from introspect import models
    >>> document = models(roots=[MODELS_ROOT])
    >>> [(m["name"].rsplit("/", 1)[-1], m["model_type"]) for m in document.hosts[0].models]
    [('Kimi-K2.6', 'kimi_k25')]
    """
    from introspect.api import SSH, _executor, _inventory
    from introspect.cli.cmd_models import as_json
    from introspect.client.discover import DiscoverOptions, discover_hosts, plan_jobs

    inventory = _inventory(hosts_file)
    jobs = plan_jobs(host, inventory, tuple(roots), venv, python)
    options = DiscoverOptions(hf_cache=hf_cache)
    results = discover_hosts(jobs, lambda job: _executor(job.host, ssh or SSH(), inventory)[0], options,
                             parallel=parallel)
    if len(results) == 1 and results[0].error is not None:
        raise results[0].error
    return ModelsDocument.model_validate(_stamped(as_json(results), ModelsDocument.SCHEMA))


__all__ = ["diff", "models", "plan"]
