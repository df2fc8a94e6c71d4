"""One host's item of a fleet run (``probe --all-hosts``, ``profile --ansible-tree``, ``compare``).

The items are the ``hosts`` of ``introspect.fleet-profiles/v1`` as printed: a TypedDict (not a
model) because the CLI dumps them as they are, keys in this order, and ``compare`` reads the same
shape back from saved documents.
"""

from __future__ import annotations

from typing import Any, TypedDict, cast

from introspect.errors import IntrospectError
from introspect.remote.contract import JSONObject, TokenizerProbe


class HostFailure(TypedDict, total=False):
    """Why a host has no profile (or a partial one): ``IntrospectError.as_dict`` (``type``,
    ``message``, ``hint``, ``host``, ``stage``), the remote's ``fatal`` record (with its
    ``exit_code``), or :func:`introspect.client.probe_fleet.not_probed`'s three keys."""

    type: str
    message: str
    hint: str | None
    host: str | None
    stage: str | None
    exit_code: int


class FreeDisk(TypedDict):
    """The free space of a model dir's file system, or why it was not measured (``reason``)."""

    path: str | None
    free_bytes: int | None
    total_bytes: int | None
    reason: str | None


class _Item(TypedDict):
    host: str
    exit_code: int
    # The profile document as build_profile returns it and the CLI prints it (client/model.py
    # ProbeOutcome.profile); None when the host was not profiled.
    profile: dict[str, Any] | None
    error: HostFailure | None


class FleetItem(_Item, total=False):
    """A host's item: ``host``, ``exit_code``, ``profile``, ``error``; ``compare``'s live probes
    add the raw tokenizer task's result and the model dir's free disk."""

    tokenizer_result: TokenizerProbe | None
    disk: FreeDisk | None


class TreeSource(TypedDict):
    """Where ``profile --ansible-tree`` read its hosts (in place of a live fleet's counters)."""

    source: str
    tree: str


class TreeProfiles(TypedDict):
    """``introspect.fleet-profiles/v1`` made from an Ansible run's tree."""

    schema: str
    model: str | list[str]  # the one model path of every host, else each path found
    hosts: list[FleetItem]
    fleet: TreeSource


def failure_of(fatal: JSONObject | None) -> HostFailure | None:
    """The raw facts' ``fatal`` record (JSON from the target, or ``IntrospectError.as_dict`` with
    its exit code when the controller failed) as the item's ``error``, keys as they came."""
    return cast("HostFailure | None", fatal)


def failure_from(exc: BaseException) -> HostFailure:
    """A failed host's ``error``: an :class:`IntrospectError`'s five keys, another exception's type,
    message and no hint."""
    if isinstance(exc, IntrospectError):
        return {"type": type(exc).__name__, "message": exc.message, "hint": exc.hint, "host": exc.host,
                "stage": exc.stage}
    return {"type": type(exc).__name__, "message": str(exc), "hint": None}


__all__ = ["FleetItem", "FreeDisk", "HostFailure", "TreeProfiles", "TreeSource", "failure_from", "failure_of"]
