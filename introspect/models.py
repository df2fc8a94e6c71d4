"""Models across the fleet (issue 8): hub ids resolved on a host, model dirs discovered, summarised.

The remote work is two shipped tasks ("resolve" in :mod:`introspect.remote.hf_cache`,
"discover" in :mod:`introspect.remote.discover_probe`); this module runs them through an
:class:`~introspect.transport.base.Executor` and turns their facts into what the CLI shows.
:func:`summarize_model` is pure, so listings are testable without a host.
"""

from __future__ import annotations

import re
from typing import Any

from introspect.analysis.architecture import analyze_architecture
from introspect.analysis.findings import finding
from introspect.analysis.speculative import describe_drafter
from introspect.errors import ModelPathError, RemoteError
from introspect.transport.base import Executor

DEFAULT_ROOTS = ("/root/models", "/data", "~/models")
DEFAULT_MAX_DEPTH = 4
DEFAULT_SHIP_CAP = 256 * 1024  # a raw config.json above this stays on the host (the digest still comes)

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


# --------------------------------------------------------------------------- resolve


def resolve_model(executor: Executor, python: str, spec: str, timeout: float, *,
                  cache_dir: str | None = None) -> tuple[str, dict[str, Any]]:
    """The snapshot directory of hub id ``spec`` in the host's HF cache, and the resolve facts.

    Newest cached snapshot unless ``@REV`` names a ref or a commit (prefix). Raises
    ModelPathError (exit 2) naming the cached revisions when nothing matches.
    """
    request: dict[str, Any] = {"spec": spec, "cache_dir": cache_dir}
    reply = executor.run_python(python, "resolve", request, timeout=timeout)
    facts = reply.facts if isinstance(reply.facts, dict) else None
    if facts is None:
        raise RemoteError(f"resolving {spec} failed: {_first_message(reply.errors)}",
                          hint="run with --debug to see the remote stderr", host=executor.label,
                          stage="resolve")
    if facts.get("path"):
        return str(facts["path"]), facts
    raise ModelPathError(_first_message(reply.errors or facts.get("errors") or []),
                         hint=_resolve_hint(facts), host=executor.label, stage="resolve")


def _first_message(errors: list[Any]) -> str:
    for err in errors:
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
    return "no answer"


def _resolve_hint(facts: dict[str, Any]) -> str:
    repo = facts.get("repo_id") or "ORG/NAME"
    cached = facts.get("cached_revisions") or []
    if cached:
        first = cached[0]
        ref = (first.get("refs") or [first.get("commit", "")[:12]])[0]
        return (f"name a cached revision ({repo}@{ref}), or download the one you want on the host: "
                f"hf download {repo} --revision REV")
    return (f"download it on the host (hf download {repo}), point --hf-cache at the cache that holds it, "
            "or pass --model the model directory")


# --------------------------------------------------------------------------- discover


def discover_request(roots: list[str] | tuple[str, ...], *, optional_roots: tuple[str, ...] = (),
                     max_depth: int = DEFAULT_MAX_DEPTH, use_hf_scanner: bool = True,
                     hf_cache: str | None = None, json_cap: int = DEFAULT_SHIP_CAP,
                     deadline: float = 60.0) -> dict[str, Any]:
    return {"roots": list(roots), "optional_roots": list(optional_roots), "max_depth": max_depth,
            "use_hf_scanner": use_hf_scanner, "hf_cache": hf_cache, "json_cap": json_cap,
            "deadline": deadline}


def discover_facts(executor: Executor, python: str, roots: list[str] | tuple[str, ...], *,
                   timeout: float = 90.0, **options: Any) -> dict[str, Any]:
    """The whole "discover" reply: models, roots, hf_cache, errors (one remote process)."""
    # The remote walk stops a little before our deadline so that it answers with what it found.
    request = discover_request(roots, deadline=max(1.0, timeout * 0.8), **options)
    reply = executor.run_python(python, "discover", request, timeout=timeout)
    if not isinstance(reply.facts, dict):
        raise RemoteError(f"model discovery failed: {_first_message(reply.errors)}",
                          hint="run with --debug to see the remote stderr", host=executor.label,
                          stage="discover")
    facts = dict(reply.facts)
    facts["errors"] = list(reply.errors)
    return facts


def discover(executor: Executor, python: str, roots: list[str] | tuple[str, ...], **options: Any) -> list[dict[str, Any]]:
    """Model entries under ``roots`` and in the host's HF cache (see discover_probe's docstring)."""
    return list(discover_facts(executor, python, roots, **options).get("models") or [])


# --------------------------------------------------------------------------- summary


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def quantization_label(quant: Any) -> str | None:
    """``compressed-tensors 4-bit pack-quantized g32`` from architecture.quantization."""
    q = _d(quant)
    if not q:
        return None
    parts = [str(q.get("method") or "unknown")]
    if q.get("bits"):
        parts.append(f"{q['bits']}-bit")
    if q.get("format"):
        parts.append(str(q["format"]))
    if q.get("group_size"):
        parts.append(f"g{q['group_size']}")
    return " ".join(parts)


def model_name(entry: dict[str, Any]) -> str:
    """``org/name@main (0123abcd)`` for cache entries, the path otherwise."""
    if entry.get("repo_id"):
        commit = str(entry.get("commit") or "")
        rev = entry.get("revision") or commit[:12]
        suffix = f" ({commit[:8]})" if commit and not commit.startswith(str(rev)) else ""
        return f"{entry['repo_id']}@{rev}{suffix}"
    return str(entry.get("path"))


def _drafter(entry: dict[str, Any], config: Any) -> dict[str, Any] | None:
    remote = entry.get("drafter")
    if not isinstance(remote, dict):
        return None
    described = describe_drafter({"path": entry.get("path"), "config": config}) if isinstance(config, dict) else None
    kind = (described or {}).get("kind")
    if not kind or kind == "unknown":
        signals = " ".join(map(str, remote.get("signals") or [])).lower()
        kind = next((k for k in ("dflash", "eagle3", "eagle", "mtp", "medusa") if k in signals), "drafter")
        if kind == "eagle" and "draft_vocab_size" in signals:
            kind = "eagle3"
    return {"kind": kind, "target": remote.get("target"), "target_key": remote.get("target_key"),
            "signals": remote.get("signals") or []}


def summarize_model(entry: dict[str, Any]) -> dict[str, Any]:
    """One listing row: family and type, layers, params (config estimate), quantization, size,
    tokenizer layout, drafter and target. Pure; never raises on a malformed entry."""
    entry = _d(entry)
    digest = _d(entry.get("digest"))
    config = entry.get("config")
    arch: dict[str, Any] = {}
    if isinstance(config, dict):
        path = entry.get("path")
        arch, _findings = analyze_architecture(config, config_path=f"{path}/config.json" if path else None)
    estimate = _d(_d(arch.get("params")).get("config_estimate"))
    model_type = arch.get("model_type") or digest.get("model_type")
    text_type = arch.get("text_model_type") or digest.get("text_model_type")
    tokenizer = _d(entry.get("tokenizer"))
    spec = _d(arch.get("speculative"))
    return {
        "name": model_name(entry),
        "path": entry.get("path"),
        "source": entry.get("source"),
        "repo_id": entry.get("repo_id"),
        "revision": entry.get("revision"),
        "commit": entry.get("commit"),
        "model_type": model_type,
        "text_model_type": text_type,
        "family": text_type if text_type and text_type != model_type else model_type,
        "architectures": arch.get("architectures") or digest.get("architectures") or [],
        "layers": arch.get("num_layers") or digest.get("num_layers"),
        "params_total": estimate.get("total"),
        "params_active": estimate.get("active"),
        "quantization": quantization_label(arch.get("quantization")) or digest.get("quant_method"),
        "size": entry.get("size"),
        "tokenizer": tokenizer.get("layout"),
        "tokenizer_class": tokenizer.get("class"),
        "drafter": _drafter(entry, config),
        "mtp_layers": spec.get("mtp_layers") or digest.get("mtp_layers") or 0,
        "aliases": list(entry.get("aliases") or []),
        "config_error": entry.get("config_error"),
    }


# --------------------------------------------------------------------------- snapshot remote code


def snapshot_remote_code_finding(raw: dict[str, Any]) -> dict[str, Any] | None:
    """A finding when the tokenizer's remote code failed to load *because* the model dir is a
    hub snapshot: the files are symlinks into ``blobs/``, and transformers releases that resolve
    the module's real path look for its relative imports (Kimi's ``tool_declaration_ts.py``)
    beside the blob, where no such name exists. Pure; None when the case does not apply.
    """
    files = _d(raw.get("files"))
    probe = _d(raw.get("tokenizer_probe"))
    error = _d(probe.get("error"))
    if not error or not _is_snapshot(files):
        return None
    relative = sorted({imp.lstrip(".") for code in files.get("custom_code") or [] if isinstance(code, dict)
                       for imp in code.get("relative_imports") or [] if isinstance(imp, str)})
    text = f"{error.get('type')} {error.get('message')} {' '.join(map(str, error.get('traceback') or []))}"
    named = [module for module in relative if module and module in text]
    if not named and "blobs" not in text:
        return None
    path = _d(raw.get("target")).get("model_path") or files.get("model_path")
    what = f"relative import {', '.join(named)}" if named else "its custom code"
    version = probe.get("transformers_version")
    return finding(
        "error", "snapshot-remote-code",
        f"transformers {version or '(this version)'} could not load the tokenizer's {what} from the hub "
        f"snapshot {path}: the snapshot's files are symlinks into blobs/, and the module's relative "
        "imports were looked up beside the blob",
        f"copy the snapshot to a plain directory (cp -rL {path} /root/models/NAME) and probe that, or use a "
        "transformers release that resolves remote code inside the snapshot")


def _is_snapshot(files: dict[str, Any]) -> bool:
    path = str(files.get("model_path") or "")
    if "/snapshots/" not in path:
        return False
    return any(isinstance(row, dict) and "/blobs/" in str(row.get("resolved") or "")
               for row in files.get("listing") or [])


__all__ = [
    "DEFAULT_ROOTS",
    "discover",
    "discover_facts",
    "is_repo_id",
    "model_name",
    "resolve_model",
    "snapshot_remote_code_finding",
    "summarize_model",
]
