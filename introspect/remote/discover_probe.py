"""Remote task "discover": every model directory on the host, and file hashes of one (issue 8).

Runs on the host under its own interpreter: standard library only, Python 3.8+.
The one heavy import allowed is ``huggingface_hub`` (for ``scan_cache_dir``),
tried inside ``try`` so that a venv without it falls back to the stdlib cache
reader in :mod:`introspect.remote.hf_cache`. Nothing here raises to the
caller: unreadable dirs, symlink loops, broken configs become error records
``{"probe": "discover", "type", "message", "path"?}`` and the walk goes on.

Request (mode "discover", the default)::

    {"roots": [dirs, reported when missing], "optional_roots": [dirs, skipped quietly when missing],
     "max_depth": int, "use_hf_scanner": bool, "hf_cache": dir | null, "json_cap": int,
     "deadline": seconds, "max_models": int}

Result::

    {"models": [<entry>], "roots": [{"path", "status"}], "hf_cache": {"path", "exists", "scanner",
     "scanner_version", "repos"}, "truncated": bool, "errors": [...]}

    <entry> = {"path", "real_path", "source": "dir" | "hf-cache", "root",
               "repo_id", "commit", "refs", "revision",     # hf-cache entries (null otherwise)
               "aliases": [other paths reaching the same dir],
               "size": bytes (files summed, each inode once), "file_count", "size_truncated",
               "config": {...} | null (raw, when config.json is at most json_cap bytes),
               "config_size", "config_error": null | {type, message},
               "digest": {model_type, text_model_type, architectures, num_layers, hidden_size,
                          vocab_size, dtype, quant_method, mtp_layers},
               "tokenizer": {"layout", "formats", "remote_code", "class", "files"},
               "weights": {"format", "files", "index"},
               "drafter": null | {"signals", "target", "target_key"}}

Request (mode "hashes")``{"mode": "hashes", "model_path", "json_cap"}`` -> ``{"hashes": ..., "errors"}``,
see :func:`collect_hashes`.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from typing import Any, Dict, List, Optional, Set, Tuple

from introspect.remote import common, hf_cache, tokenizer_vocab_files
from introspect.remote.files_probe import drafter_signals

PROBE = "discover"
DEFAULT_MAX_DEPTH = 4
DEFAULT_DEADLINE = 60.0
DEFAULT_SHIP_CAP = 256 * 1024     # raw config.json shipped back when at most this big
READ_CAP = 4 * 1024 * 1024        # configs and tokenizer_config.json read at most this big
MAX_DIRS = 20000                  # directories visited in one walk
MAX_NAMES = 20000                 # names read from one directory
MAX_MODELS = 2000
MAX_SIZE_FILES = 50000            # files stat'ed for one model's size
SIZE_DEPTH = 2                    # sub-directory levels summed into a model's size
MAX_HASH_FILES = 256

# Directories never worth descending into: VCS, caches, and the cache's blob store
# (its files are reached through snapshots, each once).
SKIP_DIRS = frozenset(["__pycache__", "node_modules", "blobs", "lost+found", "site-packages"])
WEIGHT_SUFFIXES = (".safetensors", ".gguf", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".onnx")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "tiktoken.model",
                   "tekken.json", "spiece.model", "sentencepiece.bpe.model",  # HOOK(tokenizers)
                   "special_tokens_map.json", "vocab.json", "merges.txt", "vocab.txt", "added_tokens.json",
                   "chat_template.jinja", "chat_template.json")
HASHED_SUFFIXES = (".json", ".jinja", ".py", ".model", ".tiktoken", ".txt", ".tokenizer")
CONFIG_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
# Where drafter configs record the model they were trained against.
TARGET_KEYS = ("target_model", "target_model_name_or_path", "target_model_path", "target_model_id",
               "verifier_name_or_path", "base_model", "base_model_name_or_path", "target")
TARGET_SECTIONS = ("dflash_config", "eagle_config", "speculators_config")


def _err(kind: str, message: str, path: Optional[str] = None) -> Dict[str, Any]:
    return common.error(kind, message, path, probe=PROBE)

def _os_err(exc: OSError, path: str) -> Dict[str, Any]:
    rec = common.os_error(exc, path)
    rec["probe"] = PROBE
    return rec


# --------------------------------------------------------------------------- config digest


def _int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _first_int(configs: List[Dict[str, Any]], keys: Tuple[str, ...]) -> Optional[int]:
    for cfg in configs:
        for key in keys:
            if _int(cfg.get(key)) is not None:
                return cfg[key]
    return None


def config_digest(config: Any) -> Dict[str, Any]:
    """The few config facts a listing shows, read from the top level or ``text_config``."""
    if not isinstance(config, dict):
        return {}
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else None
    layers = [c for c in (text, config) if c is not None]
    archs = config.get("architectures")
    quant = None
    for cfg in layers:
        qc = cfg.get("quantization_config") or cfg.get("compression_config")
        if isinstance(qc, dict):
            quant = qc.get("quant_method") or qc.get("format") or "unknown"
            break
    dtype = None
    for cfg in layers:
        dtype = cfg.get("torch_dtype") or cfg.get("dtype")
        if isinstance(dtype, str):
            break
    return {
        "model_type": config.get("model_type") if isinstance(config.get("model_type"), str) else None,
        "text_model_type": text.get("model_type") if text and isinstance(text.get("model_type"), str) else None,
        "architectures": [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else [],
        "num_layers": _first_int(layers, CONFIG_LAYER_KEYS),
        "hidden_size": _first_int(layers, ("hidden_size", "n_embd", "d_model")),
        "vocab_size": _first_int(layers, ("vocab_size",)),
        "dtype": dtype if isinstance(dtype, str) else None,
        "quant_method": quant if isinstance(quant, str) else None,
        "mtp_layers": _first_int(layers, ("num_nextn_predict_layers", "mtp_num_hidden_layers")) or 0,
    }


def drafter_target(config: Any) -> Tuple[Optional[str], Optional[str]]:
    """(target model, the key it was read from) when a drafter config states one."""
    if not isinstance(config, dict):
        return None, None
    places = [("", config)]
    for section in TARGET_SECTIONS:
        if isinstance(config.get(section), dict):
            places.append((section + ".", config[section]))
    spec = config.get("speculators_config")
    if isinstance(spec, dict) and isinstance(spec.get("verifier"), dict):
        # speculators packaging: {"verifier": {"name_or_path": "org/Target", ...}}
        places.insert(0, ("speculators_config.verifier.", spec["verifier"]))
    for prefix, cfg in places:
        keys = TARGET_KEYS + (("name_or_path",) if prefix.endswith("verifier.") else ())
        for key in keys:
            value = cfg.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip(), prefix + key
    return None, None


def describe_drafter(config: Any) -> Optional[Dict[str, Any]]:
    signals = drafter_signals(config)
    if not signals:
        return None
    target, key = drafter_target(config)
    return {"signals": signals, "target": target, "target_key": key}


# --------------------------------------------------------------------------- tokenizer and weights


def tokenizer_layout(names: List[str], tok_config: Any) -> Dict[str, Any]:
    """Which tokenizer files a model dir ships, in words: "tiktoken + remote code", "tokenizer.json"..."""
    present = set(names)
    formats = []
    if "tiktoken.model" in present or any(n.endswith(".tiktoken") for n in names):
        formats.append("tiktoken")
    if "tokenizer.json" in present:
        formats.append("tokenizer.json")
    if "tokenizer.model" in present or "spiece.model" in present or any(
            tokenizer_vocab_files.is_mistral_sentencepiece(n) for n in names):  # HOOK(tokenizers)
        formats.append("sentencepiece")
    if "tekken.json" in present:
        formats.append("tekken")
    if "vocab.json" in present and "merges.txt" in present and "tokenizer.json" not in present:
        formats.append("bpe vocab+merges")
    if "vocab.txt" in present and not formats:
        formats.append("wordpiece vocab.txt")
    tok_class = None
    remote_code = False
    if isinstance(tok_config, dict):
        if isinstance(tok_config.get("tokenizer_class"), str):
            tok_class = tok_config["tokenizer_class"]
        amap = tok_config.get("auto_map")
        remote_code = isinstance(amap, dict) and bool(amap.get("AutoTokenizer"))
    layout = " + ".join(formats) if formats else ("none" if "tokenizer_config.json" not in present else "config only")
    if remote_code:
        layout += " + remote code"
    files = [n for n in names if n in TOKENIZER_FILES or n.endswith(".tiktoken")
             or tokenizer_vocab_files.is_mistral_sentencepiece(n)]
    return {"layout": layout, "formats": formats, "remote_code": remote_code, "class": tok_class,
            "files": files}


def weights_layout(names: List[str]) -> Dict[str, Any]:
    for fmt, suffix in (("safetensors", ".safetensors"), ("gguf", ".gguf"), ("pytorch", ".bin"),
                        ("pytorch", ".pt"), ("pytorch", ".pth")):
        files = [n for n in names if n.endswith(suffix)]
        if files:
            index = next((n for n in names if n.endswith(suffix + ".index.json")), None)
            return {"format": fmt, "files": len(files), "index": index}
    return {"format": None, "files": 0, "index": None}


def is_model_dir(names: List[str], config: Any) -> bool:
    """A model dir: a config that names a model, or weights, or a tokenizer."""
    if isinstance(config, dict) and any(k in config for k in ("model_type", "architectures", "text_config",
                                                              "num_hidden_layers", "hidden_size")):
        return True
    present = set(names)
    if any(n.endswith(WEIGHT_SUFFIXES[:2]) for n in names) or "params.json" in present:
        return True
    if any(tokenizer_vocab_files.is_mistral_sentencepiece(n) for n in names):  # HOOK(tokenizers)
        return True
    return bool(present & {"tokenizer.json", "tokenizer_config.json", "tiktoken.model", "adapter_config.json",
                           "tekken.json", "tokenizer.model", "spiece.model"})


# --------------------------------------------------------------------------- size


def dir_size(path: str, seen: Optional[Set[Tuple[int, int]]] = None) -> Tuple[int, int, bool]:
    """(bytes, files, truncated): file sizes under ``path`` (SIZE_DEPTH levels), links followed,
    each inode counted once, so snapshot links into ``blobs/`` count their blob once."""
    seen = set() if seen is None else seen
    total, count, truncated = 0, 0, False
    stack = [(path, 0)]
    while stack:
        current, depth = stack.pop()
        try:
            with os.scandir(current) as it:
                entries = list(it)
        except OSError:
            continue
        for entry in entries:
            if count >= MAX_SIZE_FILES:
                return total, count, True
            try:
                st = os.stat(entry.path)  # follows the snapshot link to its blob
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                if depth < SIZE_DEPTH and not entry.name.startswith("."):
                    stack.append((entry.path, depth + 1))
                continue
            key = (st.st_dev, st.st_ino)
            if not stat.S_ISREG(st.st_mode) or key in seen:
                continue
            seen.add(key)
            total += st.st_size
            count += 1
    return total, count, truncated


# --------------------------------------------------------------------------- one model


def _read_json(path: str, cap: int) -> Tuple[Any, Optional[Dict[str, Any]], Optional[int]]:
    """(value, short error, size); a missing file is (None, None, None)."""
    if not os.path.lexists(path):
        return None, None, None
    try:
        size = os.path.getsize(path)
    except OSError:
        size = None
    value, err = common.read_json_capped(path, cap)
    if err is not None:
        return None, {"type": err["type"], "message": err["message"]}, size
    return value, None, size


def describe_model(path: str, names: List[str], ship_cap: int,
                   config_read: Optional[Tuple[Any, Any, Optional[int]]] = None) -> Dict[str, Any]:
    """One listing entry (without the hf-cache fields); ``config_read`` reuses a read config.json."""
    if config_read is None:
        config_read = _read_json(os.path.join(path, "config.json"), READ_CAP)
    config, config_err, config_size = config_read
    tok_config = None
    if "tokenizer_config.json" in names:
        tok_config, _tok_err, _size = _read_json(os.path.join(path, "tokenizer_config.json"), READ_CAP)
    size, files, truncated = dir_size(path)
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError, RuntimeError):
        real = None
    return {
        "path": path, "real_path": real, "source": "dir", "root": None,
        "repo_id": None, "commit": None, "refs": [], "revision": None, "aliases": [],
        "size": size, "file_count": files, "size_truncated": truncated,
        "config": config if config_size is not None and config_size <= ship_cap else None,
        "config_size": config_size, "config_error": config_err,
        "digest": config_digest(config),
        "tokenizer": tokenizer_layout(names, tok_config),
        "weights": weights_layout(names),
        "drafter": describe_drafter(config),
    }


def _names(path: str) -> Tuple[Optional[List[str]], Optional[Dict[str, Any]], bool]:
    names = []  # type: List[str]
    try:
        with os.scandir(path) as it:
            for entry in it:
                if len(names) >= MAX_NAMES:
                    return sorted(names), None, True
                names.append(entry.name)
    except OSError as exc:
        return None, _os_err(exc, path), False
    return sorted(names), None, False


# --------------------------------------------------------------------------- the walk


class Discovery:
    """Collects model entries from roots and the hub cache; one per real directory."""

    def __init__(self, max_depth: int, deadline: float, ship_cap: int, max_models: int) -> None:
        self.max_depth = max_depth
        self.deadline = deadline
        self.ship_cap = ship_cap
        self.max_models = max_models
        self.models = []  # type: List[Dict[str, Any]]
        self.by_real = {}  # type: Dict[str, Dict[str, Any]]
        self.errors = []  # type: List[Dict[str, Any]]
        self.truncated = False
        self.visited = 0

    def out_of_budget(self) -> bool:
        if time.time() > self.deadline or self.visited >= MAX_DIRS or len(self.models) >= self.max_models:
            self.truncated = True
            return True
        return False

    def add(self, path: str, names: List[str], config_read: Optional[Tuple[Any, Any, Optional[int]]] = None,
            **extra: Any) -> Optional[Dict[str, Any]]:
        real = os.path.realpath(path)
        if real in self.by_real:  # reached twice (a link, or a root inside the cache)
            self._note_alias(path)
            return None
        entry = describe_model(path, names, self.ship_cap, config_read)
        entry.update(extra)
        self.by_real[real] = entry
        self.models.append(entry)
        return entry

    # -- hub cache ----------------------------------------------------------------
    def add_cache_revision(self, repo_id: str, rev: Dict[str, Any], root: str,
                           size: Optional[int] = None) -> None:
        names, err, _trunc = _names(rev["path"])
        if names is None:
            self.errors.append(err)
            return
        refs = sorted(rev.get("refs") or [])
        entry = self.add(rev["path"], names, source="hf-cache", root=root, repo_id=repo_id,
                         commit=rev["commit"], refs=refs, revision=refs[0] if refs else rev["commit"][:12])
        if entry is not None and size is not None:
            entry["size"] = size  # the scanner's figure: blobs of this revision, each once

    def add_cache_repo(self, repo_path: str, repo_id: str, root: str) -> None:
        revisions, errors = hf_cache.list_revisions(repo_path)
        self.errors.extend(_retag(errors))
        for rev in revisions:
            if self.out_of_budget():
                return
            self.add_cache_revision(repo_id, rev, root)

    # -- plain roots ----------------------------------------------------------------
    def walk(self, root: str) -> None:
        """Depth-bounded walk; links followed, loops (a link back to an ancestor) reported."""
        stack = [(root, 0, ())]  # type: List[Tuple[str, int, Tuple[Tuple[int, int], ...]]]
        seen = set()  # type: Set[Tuple[int, int]]
        while stack:
            if self.out_of_budget():
                self.errors.append(_err("scan-truncated", "stopped walking %s: the scan reached its bound "
                                        "(time, %d dirs or %d models)" % (root, MAX_DIRS, self.max_models), root))
                return
            path, depth, ancestors = stack.pop()
            self.visited += 1
            key = self._dir_key(path)
            if key is None:
                continue
            if key in ancestors:
                self.errors.append(_err("symlink-loop", "%s leads back to %s (a symlink loop); skipped"
                                        % (path, os.path.realpath(path)), path))
                continue
            if key in seen:
                self._note_alias(path)
                continue
            seen.add(key)
            names, err, truncated = _names(path)
            if names is None:
                self.errors.append(err)
                continue
            if truncated:
                self.errors.append(_err("listing-truncated", "%s holds more than %d entries; looked at the first"
                                        % (path, MAX_NAMES), path))
            parsed = hf_cache.parse_repo_folder(os.path.basename(path.rstrip("/")))
            if parsed and parsed[0] == "model" and "snapshots" in names:
                self.add_cache_repo(path, parsed[1], root)
                continue
            self._maybe_add(path, names, root)
            if depth < self.max_depth:
                for name in reversed(names):
                    if not name.startswith(".") and name not in SKIP_DIRS:
                        child = os.path.join(path, name)
                        if _is_dir_entry(child):
                            stack.append((child, depth + 1, ancestors + (key,)))

    def _note_alias(self, path: str) -> None:
        known = self.by_real.get(os.path.realpath(path))
        if known is not None and path != known["path"] and path not in known["aliases"]:
            known["aliases"].append(path)

    def _dir_key(self, path: str) -> Optional[Tuple[int, int]]:
        try:
            st = os.stat(path)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                self.errors.append(_err("symlink-loop", "%s: a symlink loop; skipped" % path, path))
            elif exc.errno in (errno.EACCES, errno.EPERM):
                self.errors.append(_os_err(exc, path))
            return None  # dangling links and races: nothing to list
        if not stat.S_ISDIR(st.st_mode):
            return None
        return (st.st_dev, st.st_ino)

    def _maybe_add(self, path: str, names: List[str], root: str) -> None:
        config_read = _read_json(os.path.join(path, "config.json"), READ_CAP) if "config.json" in names \
            else (None, None, None)
        # A broken config.json still marks a model dir worth listing, with its error.
        if config_read[1] is not None or is_model_dir(names, config_read[0]):
            self.add(path, names, config_read, root=root)


def _is_dir_entry(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError as exc:
        # A loop must still reach the walker so that it is reported; other failures are not dirs.
        return exc.errno == errno.ELOOP


def _retag(errors: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [dict(e, probe=PROBE) for e in errors]


# --------------------------------------------------------------------------- hub cache scan


def scan_with_hub(cache: str) -> Tuple[Optional[List[Dict[str, Any]]], Optional[str], List[Dict[str, Any]]]:
    """Revisions via huggingface_hub.scan_cache_dir: (revisions or None, version, errors).
    None means "not available here": the caller reads the layout itself."""
    try:
        import huggingface_hub  # the one heavy import this probe allows
        from huggingface_hub import scan_cache_dir
    except Exception:  # not installed, or broken: the stdlib reader does the same job
        return None, None, []
    version = getattr(huggingface_hub, "__version__", None)
    try:
        info = scan_cache_dir(cache)
    except Exception as exc:
        return None, version, [_err("hf-scanner-failed", "huggingface_hub.scan_cache_dir(%s): %s: %s; read the "
                                    "cache layout directly" % (cache, type(exc).__name__, exc), cache)]
    out = []
    for repo in sorted(info.repos, key=lambda r: r.repo_id):
        if repo.repo_type != "model":
            continue
        for rev in sorted(repo.revisions, key=lambda r: r.last_modified, reverse=True):
            out.append({"repo_id": repo.repo_id, "commit": rev.commit_hash, "path": str(rev.snapshot_path),
                        "refs": sorted(rev.refs), "size": rev.size_on_disk, "mtime": rev.last_modified})
    errors = [_err("hf-cache-warning", str(w), cache) for w in list(info.warnings)[:20]]
    return out, version, errors


def scan_hf_cache(found: Discovery, cache: str, use_scanner: bool) -> Dict[str, Any]:
    info = {"path": cache, "exists": os.path.isdir(cache), "scanner": None, "scanner_version": None,
            "repos": 0}  # type: Dict[str, Any]
    if not info["exists"]:
        return info
    revisions = None
    if use_scanner:
        revisions, info["scanner_version"], errors = scan_with_hub(cache)
        found.errors.extend(errors)
    if revisions is not None:
        info["scanner"] = "huggingface_hub"
        info["repos"] = len(set(r["repo_id"] for r in revisions))
        for rev in revisions:
            if found.out_of_budget():
                break
            found.add_cache_revision(rev["repo_id"], rev, cache, size=rev["size"])
        return info
    info["scanner"] = "stdlib"
    repos, errors = hf_cache.list_repos(cache)
    found.errors.extend(_retag(errors))
    info["repos"] = len(repos)
    for repo in repos:
        if found.out_of_budget():
            break
        found.add_cache_repo(repo["path"], repo["repo_id"], cache)
    return info


# --------------------------------------------------------------------------- hashes


def _hash_candidates(names: List[str]) -> List[str]:
    return [n for n in names if n.endswith(HASHED_SUFFIXES) and not n.endswith(WEIGHT_SUFFIXES)]


def collect_hashes(model_path: str, *, json_cap: int) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    """sha256 of the small files that define a model's behaviour, and the weights by their index.

    ``files``: {name: {"sha256", "size"}} for top-level config, tokenizer, template and code
    files of at most ``json_cap`` bytes (bigger ones are listed in ``skipped``). ``weights``: the
    ``model.safetensors.index.json`` sha256 and every shard's size (by ``stat``, never read),
    or the sizes of the weight files when there is no index. Never raises.
    """
    facts = {"files": {}, "skipped": [], "weights": {"index": None, "shards": {}, "missing_shards": []},
             "truncated": False}  # type: Dict[str, Any]
    try:
        return _collect_hashes(model_path, json_cap, facts)
    except Exception as exc:  # a bug here costs this section only
        return facts, [_err("internal-error", "hashes: %s: %s" % (type(exc).__name__, exc), model_path)]


def _collect_hashes(model_path: str, cap: int, facts: Dict[str, Any]) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    names, err, _trunc = _names(model_path)
    if names is None:
        return facts, [err]
    errors = []  # type: List[Dict[str, Any]]
    candidates = _hash_candidates(names)
    if len(candidates) > MAX_HASH_FILES:
        facts["truncated"] = True
        candidates = candidates[:MAX_HASH_FILES]
    for name in candidates:
        full = os.path.join(model_path, name)
        try:
            st = os.stat(full)
        except OSError as exc:
            errors.append(_os_err(exc, full))
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        if st.st_size > cap:
            facts["skipped"].append({"name": name, "size": st.st_size, "reason": "above the %d-byte cap" % cap})
            continue
        digest, herr = common.sha256_file(full, limit=cap)
        if herr is not None:
            errors.append(dict(herr, probe=PROBE))
            continue
        facts["files"][name] = {"sha256": digest, "size": st.st_size}
    facts["weights"] = _weights(model_path, names, cap, errors)
    return facts, errors


def _weights(model_path: str, names: List[str], cap: int, errors: List[Dict[str, Any]]) -> Dict[str, Any]:
    out = {"index": None, "shards": {}, "missing_shards": []}  # type: Dict[str, Any]
    index_name = next((n for n in names if n.endswith(".safetensors.index.json")), None)
    shard_names = [n for n in names if n.endswith(".safetensors")]
    if index_name is not None:
        full = os.path.join(model_path, index_name)
        digest, herr = common.sha256_file(full, limit=cap)
        index, ierr = common.read_json_capped(full, cap)
        for problem in (herr, ierr):
            if problem is not None:
                errors.append(dict(problem, probe=PROBE))
        out["index"] = {"file": index_name, "sha256": digest,
                        "total_size": _int((index or {}).get("metadata", {}).get("total_size"))
                        if isinstance((index or {}).get("metadata"), dict) else None}
        wmap = (index or {}).get("weight_map")
        if isinstance(wmap, dict):
            shard_names = sorted(set(v for v in wmap.values() if isinstance(v, str)))
    for shard in shard_names:
        if "/" in shard or shard.startswith(".."):
            continue  # an index naming files outside the dir is not followed
        try:
            out["shards"][shard] = os.stat(os.path.join(model_path, shard)).st_size  # size only, never data
        except OSError:
            out["missing_shards"].append(shard)
    return out


# --------------------------------------------------------------------------- task


def _root_status(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError as exc:
        return common.os_error(exc, path)["type"]
    return "ok" if stat.S_ISDIR(st.st_mode) else "not-a-directory"


def discover(request: Dict[str, Any]) -> Dict[str, Any]:
    deadline = time.time() + float(request.get("deadline") or DEFAULT_DEADLINE)
    found = Discovery(int(request.get("max_depth") if request.get("max_depth") is not None else DEFAULT_MAX_DEPTH),
                      deadline, int(request.get("json_cap") or DEFAULT_SHIP_CAP),
                      int(request.get("max_models") or MAX_MODELS))
    cache = hf_cache.cache_dir(request.get("hf_cache"))
    cache_info = scan_hf_cache(found, cache, bool(request.get("use_hf_scanner", True)))
    roots = []
    for path, required in [(p, True) for p in request.get("roots") or []] + \
            [(p, False) for p in request.get("optional_roots") or []]:
        path = os.path.expanduser(str(path))
        status = _root_status(path)
        roots.append({"path": path, "status": status, "required": required})
        if status == "ok":
            found.walk(path)
        elif required:
            found.errors.append(_err(status, "root %s: %s" % (path, status), path))
    return {"models": found.models, "roots": roots, "hf_cache": cache_info, "truncated": found.truncated,
            "dirs_visited": found.visited, "errors": found.errors}


def run(request: Dict[str, Any]) -> Dict[str, Any]:
    """Task entry: mode "discover" (default) or "hashes"."""
    if request.get("mode") == "hashes":
        path = str(request.get("model_path") or "")
        hashes, errors = collect_hashes(path, json_cap=int(request.get("json_cap") or common.DEFAULT_JSON_CAP))
        return {"hashes": hashes, "errors": errors}
    return discover(request)
