"""The ``snapshot-remote-code`` finding: remote code that failed *because* the model dir is a hub snapshot.

A hub snapshot's files are symlinks into ``blobs/``; transformers releases that
resolve the module's real path look for its relative imports (Kimi's
``tool_declaration_ts.py``) beside the blob, where no such name exists. Pure.
"""

from __future__ import annotations

from introspect.analysis.findings import Finding, Severity
from introspect.remote.contract import FilesFacts, RawFacts, as_dict


def snapshot_remote_code_finding(raw: RawFacts) -> Finding | None:
    """The finding for raw facts whose tokenizer load failed this way; None when the case does not apply."""
    files = raw.get("files")
    probe = as_dict(raw.get("tokenizer_probe"))
    error = as_dict(probe.get("error"))
    if not error or files is None or not _is_snapshot(files):
        return None
    relative = sorted({imp.lstrip(".") for code in files.get("custom_code") or [] if isinstance(code, dict)
                       for imp in code.get("relative_imports") or [] if isinstance(imp, str)})
    text = f"{error.get('type')} {error.get('message')} {' '.join(map(str, error.get('traceback') or []))}"
    named = [module for module in relative if module and module in text]
    if not named and "blobs" not in text:
        return None
    path = as_dict(raw.get("target")).get("model_path") or files.get("model_path")
    what = f"relative import {', '.join(named)}" if named else "its custom code"
    version = probe.get("transformers_version")
    return Finding(
        Severity.ERROR, "snapshot-remote-code",
        f"transformers {version or '(this version)'} could not load the tokenizer's {what} from the hub "
        f"snapshot {path}: the snapshot's files are symlinks into blobs/, and the module's relative "
        "imports were looked up beside the blob",
        f"copy the snapshot to a plain directory (cp -rL {path} /root/models/NAME) and probe that, or use a "
        "transformers release that resolves remote code inside the snapshot")


def _is_snapshot(files: FilesFacts) -> bool:
    """``files``: the raw files section as read (rows checked: raw facts may be damaged)."""
    path = str(files.get("model_path") or "")
    if "/snapshots/" not in path:
        return False
    return any(isinstance(row, dict) and "/blobs/" in str(row.get("resolved") or "")
               for row in files.get("listing") or [])
