"""One model directory at a glance, for ``introspect models``: config digest, tokenizer, weights, size.

Runs on the host: standard library only, Python 3.8+. Pure readers of one
directory (bounded: a few small files, stat of at most MAX_SIZE_FILES files);
nothing here raises.
"""

from __future__ import annotations

import os
import stat
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

from ... import confine
from ...contract import WRAPPER_TEXT_CONFIG_KEYS
from ...readers import read_json_capped
from ...sections import ShortError
from ..tokenizer.tokenizer_vocab_files import is_mistral_sentencepiece
from .drafters import describe_drafter

READ_CAP = 4 * 1024 * 1024        # configs and tokenizer_config.json read at most this big
MAX_SIZE_FILES = 50000            # files stat'ed for one model's size
SIZE_DEPTH = 2                    # sub-directory levels summed into a model's size
WEIGHT_SUFFIXES = (".safetensors", ".gguf", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".onnx")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "tiktoken.model",
                   "tekken.json", "spiece.model", "sentencepiece.bpe.model",
                   "special_tokens_map.json", "vocab.json", "merges.txt", "vocab.txt", "added_tokens.json",
                   "chat_template.jinja", "chat_template.json")
CONFIG_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")

ConfigRead = Tuple[Any, Optional[ShortError], Optional[int]]  # (value, short error, size)


def _int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _first_int(configs: List[Dict[str, Any]], keys: Tuple[str, ...]) -> Optional[int]:
    for cfg in configs:
        for key in keys:
            if _int(cfg.get(key)) is not None:
                return cfg[key]
    return None


def config_digest(config: Any) -> Dict[str, Any]:
    """The few config facts a listing shows, read from the wrapper's text config or the top level."""
    if not isinstance(config, dict):
        return {}
    text = next((config[k] for k in WRAPPER_TEXT_CONFIG_KEYS if isinstance(config.get(k), dict)), None)
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


def tokenizer_layout(names: List[str], tok_config: Any) -> Dict[str, Any]:
    """Which tokenizer files a model dir ships, in words: "tiktoken + remote code", "tokenizer.json"..."""
    present = set(names)
    formats = []
    if "tiktoken.model" in present or any(n.endswith(".tiktoken") for n in names):
        formats.append("tiktoken")
    if "tokenizer.json" in present:
        formats.append("tokenizer.json")
    if "tokenizer.model" in present or "spiece.model" in present or any(
            is_mistral_sentencepiece(n) for n in names):
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
    files = [n for n in names if n in TOKENIZER_FILES or n.endswith(".tiktoken") or is_mistral_sentencepiece(n)]
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
    if any(is_mistral_sentencepiece(n) for n in names):
        return True
    return bool(present & {"tokenizer.json", "tokenizer_config.json", "tiktoken.model", "adapter_config.json",
                           "tekken.json", "tokenizer.model", "spiece.model"})


# --------------------------------------------------------------------------- size


def walk_entries(path: str) -> Iterator[Tuple[int, "os.DirEntry[str]", Optional[os.stat_result]]]:
    """(depth, entry, stat) of every entry under ``path``, SIZE_DEPTH levels deep (hidden dirs not
    entered), links followed, so a snapshot link yields its blob's stat. ``stat`` is None for a
    link out of the model dir (:func:`confine.allowed_root`: its target is not even stat'ed) and
    for an entry that cannot be stat'ed. The one walk behind the size and the times of a model."""
    root = confine.allowed_root(path)
    stack = [(path, 0)]
    while stack:
        current, depth = stack.pop()
        try:
            with os.scandir(current) as it:
                entries = list(it)
        except OSError:
            continue
        for entry in entries:
            st = None  # type: Optional[os.stat_result]
            try:
                if not entry.is_symlink() or confine.within(os.path.realpath(entry.path), root):
                    st = os.stat(entry.path)
            except OSError:
                st = None
            if st is not None and stat.S_ISDIR(st.st_mode) and depth < SIZE_DEPTH \
                    and not entry.name.startswith("."):
                stack.append((entry.path, depth + 1))
            yield depth, entry, st


def dir_size(path: str, seen: Optional[Set[Tuple[int, int]]] = None) -> Tuple[int, int, bool]:
    """(bytes, files, truncated): file sizes under ``path`` (:func:`walk_entries`), each inode
    counted once, so snapshot links into ``blobs/`` count their blob once."""
    seen = set() if seen is None else seen
    total, count = 0, 0
    for _depth, _entry, st in walk_entries(path):
        if count >= MAX_SIZE_FILES:
            return total, count, True
        if st is None or not stat.S_ISREG(st.st_mode):
            continue
        key = (st.st_dev, st.st_ino)
        if key in seen:
            continue
        seen.add(key)
        total += st.st_size
        count += 1
    return total, count, False


def read_json(path: str, cap: int) -> ConfigRead:
    """(value, short error, size); a missing file is (None, None, None). A file that links out of
    its model dir is not read (its config would be shipped): the error says so."""
    if not os.path.lexists(path):
        return None, None, None
    confine.confine(os.path.dirname(path))
    try:
        size = os.path.getsize(path)
    except OSError:
        size = None
    value, err = read_json_capped(path, cap)
    if err is not None:
        return None, ShortError(type=err["type"], message=err["message"]), (
            None if err["type"] == "link-outside" else size)
    return value, None, size


def describe_model(path: str, names: List[str], ship_cap: int,
                   config_read: Optional[ConfigRead] = None) -> Dict[str, Any]:
    """One listing entry (without the hf-cache fields); ``config_read`` reuses a read config.json."""
    if config_read is None:
        config_read = read_json(os.path.join(path, "config.json"), READ_CAP)
    config, config_err, config_size = config_read
    tok_config = None
    if "tokenizer_config.json" in names:
        tok_config, _tok_err, _size = read_json(os.path.join(path, "tokenizer_config.json"), READ_CAP)
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

