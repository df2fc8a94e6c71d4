"""Section ``hashes``: sha256 of the small files that define a model's behaviour, shard sizes by stat.

Runs on the host: standard library only, Python 3.8+. What ``introspect diff``
compares; weights are never read (the index is hashed, each shard only stat'ed).
Errors are tagged ``discover``, the task that first reported them. Never raises.
"""

from __future__ import annotations

import os
import stat
from typing import Any, List, Optional, Tuple

from ... import confine
from ...contract import INDEX_CAP, ErrorRecord, HashesFacts, error_record, tag
from ...readers import os_error, read_json_capped, sha256_file
from ...sections import HashedFile, WeightsHashes
from .discovery import MAX_NAMES
from .index import INDEX_NAME, summarize_index
from .listing import scan_names
from .model_summary import WEIGHT_SUFFIXES

PROBE = "discover"
MAX_HASH_FILES = 256
HASHED_SUFFIXES = (".json", ".jinja", ".py", ".model", ".tiktoken", ".txt", ".tokenizer")


def _err(kind: str, message: str, path: Optional[str] = None) -> ErrorRecord:
    return error_record(kind, message, path, probe=PROBE)


def _int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _hash_candidates(names: List[str]) -> List[str]:
    return [n for n in names if n.endswith(HASHED_SUFFIXES) and not n.endswith(WEIGHT_SUFFIXES)]


def collect_hashes(model_path: str, *, json_cap: int) -> Tuple[HashesFacts, List[ErrorRecord]]:
    """sha256 of the small files that define a model's behaviour, and the weights by their index.

    ``files``: {name: {"sha256", "size"}} for top-level config, tokenizer, template and code
    files of at most ``json_cap`` bytes (bigger ones are listed in ``skipped``). ``weights``: the
    ``model.safetensors.index.json`` sha256 and every shard's size (by ``stat``, never read),
    or the sizes of the weight files when there is no index. Never raises.
    """
    facts = HashesFacts(files={}, skipped=[], weights=WeightsHashes(index=None, shards={}, missing_shards=[]),
                        truncated=False)
    try:
        return _collect_hashes(model_path, json_cap, facts)
    except Exception as exc:  # a bug here costs this section only
        return facts, [_err("internal-error", "hashes: %s: %s" % (type(exc).__name__, exc), model_path)]


def _collect_hashes(model_path: str, cap: int, facts: HashesFacts) -> Tuple[HashesFacts, List[ErrorRecord]]:
    names, _trunc, err = scan_names(model_path, MAX_NAMES, probe=PROBE)
    if err is not None:
        return facts, [err]
    # The "hashes" mode of the discover task reads no other file first: confined here, so that
    # no file is hashed, nor even sized, through a link out of the model dir.
    confine.confine(model_path)
    errors: List[ErrorRecord] = []
    candidates = _hash_candidates(names)
    if len(candidates) > MAX_HASH_FILES:
        facts["truncated"] = True
        candidates = candidates[:MAX_HASH_FILES]
    for name in candidates:
        full = os.path.join(model_path, name)
        try:
            confine.check(full)  # before the stat: a skipped file's size would be the target's
            st = os.stat(full)
        except OSError as exc:  # a link out (confine.LinkOutside) is named by its link
            errors.append(tag(os_error(exc, full), PROBE))
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        if st.st_size > cap:
            facts["skipped"].append({"name": name, "size": st.st_size, "reason": "above the %d-byte cap" % cap})
            continue
        digest, herr = sha256_file(full, limit=cap)
        if herr is not None:
            errors.append(tag(herr, PROBE))
            continue
        facts["files"][name] = HashedFile(sha256=digest, size=st.st_size)
    facts["weights"] = _weights(model_path, names, cap, errors)
    return facts, errors


def _weights(model_path: str, names: List[str], cap: int, errors: List[ErrorRecord]) -> WeightsHashes:
    out = WeightsHashes(index=None, shards={}, missing_shards=[])
    index_name = next((n for n in names if n.endswith(".safetensors.index.json")), None)
    shard_names = [n for n in names if n.endswith(".safetensors")]
    if index_name is not None:
        full = os.path.join(model_path, index_name)
        # The index has its own cap: a 1T checkpoint's is ~25 MB, above the JSON cap of configs.
        index_cap = max(cap, INDEX_CAP)
        digest, herr = sha256_file(full, limit=index_cap)
        total, shards, ierr = _index_shards(model_path, index_name, index_cap)
        # One cause, one error: a file too large to hash is too large to parse as well.
        problem = herr or ierr
        if problem is not None:
            errors.append(tag(problem, PROBE))
        out["index"] = {"file": index_name, "sha256": digest, "total_size": total}
        if shards is not None:
            shard_names = shards
    for shard in shard_names:
        if "/" in shard or shard.startswith(".."):
            continue  # an index naming files outside the dir is not followed
        full = os.path.join(model_path, shard)
        try:
            confine.check(full)
            out["shards"][shard] = os.stat(full).st_size  # size only, never data
        except confine.LinkOutside as exc:  # neither missing nor sized: the link is named
            errors.append(tag(os_error(exc, full), PROBE))
        except OSError:
            out["missing_shards"].append(shard)
    return out



def _index_shards(model_path: str, name: str, cap: int) -> Tuple[Optional[int], Optional[List[str]], Optional[ErrorRecord]]:
    """(total_size, shard names, read error) of an index; None shards when it has no weight_map.

    ``model.safetensors.index.json`` comes from :func:`summarize_index`, memoised: the files and
    safetensors sections parse the same 25 MB once per run, and this one reuses it.
    """
    if name == INDEX_NAME:
        summary, err = summarize_index(model_path, cap)
        if summary is None:
            return None, None, err
        # Its missing-shard and malformed-index errors are the safetensors section's to report.
        has_map = not (err is not None and err.get("type") == "malformed-index")
        return summary["total_size"], (list(summary["shards"]) if has_map else None), None
    index, err = read_json_capped(os.path.join(model_path, name), cap)
    if err is not None:
        return None, None, err
    metadata, wmap = index.get("metadata"), index.get("weight_map")
    total = _int(metadata.get("total_size")) if isinstance(metadata, dict) else None
    shards = sorted(set(v for v in wmap.values() if isinstance(v, str))) if isinstance(wmap, dict) else None
    return total, shards, None
