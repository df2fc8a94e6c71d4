"""The controller side of ``diff``: each operand to a profile, live ones probed at once.

An operand is a saved profile (``probe --output FILE``) or a live target
``HOST:PATH`` / ``HOST:ORG/NAME[@REV]``, probed exactly as ``probe`` does, so the
profiles carry the file hashes the diff compares.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from introspect.analysis.profile import PROFILE_SCHEMA
from introspect.client.documents import read_document
from introspect.client.hub import is_repo_id
from introspect.client.model import ProbeRequest, probe_model
from introspect.errors import IntrospectError, ModelPathError, UsageError
from introspect.remote.contract import JSONObject
from introspect.transport.base import Executor

if TYPE_CHECKING:
    from introspect.inventory import HostEntry, Inventory
    from introspect.remote.contract import RawFacts

# host name -> its executor and inventory entry (the CLI's connection layers).
ExecutorFor = Callable[[str], "tuple[Executor, HostEntry | None]"]


@dataclass(frozen=True)
class Side:
    """One operand: a saved profile file, or a live host + model path / hub id."""

    text: str
    file: str | None = None
    host: str | None = None
    path: str | None = None
    repo_id: str | None = None


@dataclass(frozen=True)
class LiveOptions:
    venv: str | None
    python: str | None
    timeout: float
    files_timeout: float
    remote_code: bool
    load_tokenizer: bool
    hf_cache: str | None
    json_cap: int
    load_model_code: bool = True
    inventory: Inventory | None = None  # what named the hosts (the profiles' settings say so)


def split_operand(text: str) -> tuple[str, str, str]:
    """``HOST:REST`` like ``str.partition(":")``, where HOST may be a URL (``podman://vllm:/m``,
    ``openssh://root@h:2222:/m``): the colon after a URL's netloc that no port digits follow."""
    scheme, found, rest = text.partition("://")
    if not found or "/" in scheme or ":" in scheme:
        return text.partition(":")
    depth = 0
    for index, char in enumerate(rest):
        depth += char == "["
        depth -= char == "]"
        after = rest[index + 1:index + 3]
        if char == ":" and depth <= 0 and not after[:1].isdigit() and after != "//":  # ?via=ssh://...
            return f"{scheme}://{rest[:index]}", ":", rest[index + 1:]
    return text, "", ""


def parse_side(text: str) -> Side:
    """A saved profile when ``text`` is an existing local file, else ``HOST:PATH`` / ``HOST:ORG/NAME``
    (HOST: an inventory name, an address or a host URL)."""
    if Path(text).is_file():
        return Side(text, file=text)
    host, sep, rest = split_operand(text)
    if not sep or not host or not rest:
        raise UsageError(f"{text!r} is neither a saved profile file nor HOST:PATH",
                         hint="pass a file written by `introspect probe --output`, or HOST:/path/to/model "
                              "or HOST:org/name[@rev]")
    if rest.startswith("/"):
        return Side(text, host=host, path=rest)
    if is_repo_id(rest):
        return Side(text, host=host, repo_id=rest)
    raise UsageError(f"{text!r}: {rest!r} is neither an absolute model path nor a hub id org/name[@rev]",
                     hint="write HOST:/absolute/path/to/model or HOST:org/name[@rev]")


def load_profile(path: str) -> JSONObject:
    """A saved profile as read: a user's file of any introspect version, the JSON the diff flattens."""
    return read_document(path, PROFILE_SCHEMA, what="an introspect profile",
                         hint="pass a file written by `introspect probe --output` (not --save-raw)")


def live_profile(side: Side, make_executor: ExecutorFor, opts: LiveOptions) -> JSONObject:
    """Probe one live target (resolving a hub id first) exactly as `introspect probe` does;
    the profile (as ``probe --json`` prints it: the JSON the diff flattens, beside saved ones)
    carries the file hashes the diff compares."""
    executor, entry = make_executor(side.host or "")
    request = ProbeRequest(
        model=side.repo_id or side.path or "", venv=opts.venv, python_exe=opts.python, timeout=opts.timeout,
        files_timeout=opts.files_timeout, no_remote_code=not opts.remote_code,
        no_tokenizer=not opts.load_tokenizer, max_json_bytes=opts.json_cap, hf_cache=opts.hf_cache,
        no_model_code=not opts.load_model_code, no_cache=True)
    outcome = probe_model(request, executor, entry, opts.inventory)
    _check_raw(side, outcome.raw)
    return outcome.profile


def _check_raw(side: Side, raw: RawFacts) -> None:
    """A run that could not read the model is an error here: a diff against nothing means nothing."""
    fatal = raw.get("fatal")
    if isinstance(fatal, dict):
        raise IntrospectError(f"{side.text}: {fatal.get('message')}", hint=fatal.get("hint"),
                              stage=fatal.get("stage"))
    files = raw.get("files")
    status = files.get("status") if files else None
    if status and status != "ok":
        raise ModelPathError(f"{side.text}: model path {raw['target'].get('model_path')!r}: {status}",
                             hint="give the directory that holds config.json")


def profiles_for(sides: list[Side], make_executor: ExecutorFor, opts: LiveOptions) -> list[JSONObject]:
    """Profiles in ``sides`` order; live ones probed in parallel, one connection each."""
    out: dict[int, JSONObject] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="diff") as pool:
        futures = {i: pool.submit(live_profile, s, make_executor, opts)
                   for i, s in enumerate(sides) if s.file is None}
        for i, side in enumerate(sides):
            if side.file is not None:
                out[i] = load_profile(side.file)
        for i, future in futures.items():
            out[i] = future.result()
    return [out[i] for i in range(len(sides))]
