"""Raw tokenizer facts from the files of a model directory (no tokenizer library).

Runs on the host: standard library only, Python 3.8+. These facts feed the local
fallback (``introspect.analysis.tokenizer``) when the tokenizer cannot be loaded, so
they must be complete enough to rebuild vocab size, special tokens and template
without transformers. Nothing here raises: each unreadable file becomes one error
record ``{"probe": "tokenizer_files", "type", "message", "path"}`` and the rest stands.

Layout of the facts (absent file -> null / empty list, never an error)::

    {
      "tokenizer_config": {...} | null,     # raw tokenizer_config.json, minus "chat_template"
                                            # (moved to chat_templates, it can be 10s of KB)
      "special_tokens_map": {...} | null,   # raw special_tokens_map.json
      "chat_templates": [                   # every template found, files first
        {"source": "chat_template.jinja" | "additional_chat_templates/x.jinja"
                   | "tokenizer_config.json" | "chat_template.json",
         "name": "default" | <name>, "text": str, "sha256": str, "chars": int}
      ],
      "tokenizer_json": null | {            # tokenizer.json summarised, never shipped
        "file", "size", "sha256", "model_type", "vocab_size", "max_vocab_id", "merges",
        "added_tokens": [{"id", "content", "special"}],
        "normalizer", "pre_tokenizer", "decoder": type names (Sequence -> "Sequence[A,B]"),
        "post_processor": null | {"type", "single", "bos": {token, id} | null, "eos": ...},
        "vocab_lookup": {token: id}},      # the configs' named tokens found in the model vocab
      "tiktoken": [{"file", "size", "sha256", "entries", "distinct_tokens", "distinct_ranks",
                    "min_rank", "max_rank", "dense", "gaps", "duplicate_tokens",
                    "duplicate_ranks", "single_bytes", "malformed_lines",
                    "malformed_examples": [{"line", "reason"}]}],
      "sentencepiece": [{"file", "size", "sha256", ...}],  # sentencepiece_model.summarize_model
      "tekken": null | {...},               # tekken.summarize_tekken, plus file, size, sha256
      "vocab_choice": null | {"kind", "file", "reason", "candidates"},  # tokenizer_vocab_files.choose
      "remote_code": null | {               # the auto_map tokenizer class
        "auto_map": <raw AutoTokenizer value>, "auto_map_source": "tokenizer_config.json" | "config.json",
        "slow": null | {"ref", "module", "class", "file", "exists", "size", "sha256"},
        "fast": null | {...same...},
        "num_reserved_special_tokens": int | null,  # as declared in the code
        "reserved_extra": int,                     # "+ N" after it in range(...) (Kimi-Linear: 2)
        "reserved_declared_in": file | null,
        "placeholder": "<|reserved_token_{id}|>" | null,  # f-string naming unnamed reserved ids
        "static": {...}},                   # static_specials.scan_specials: what the code declares
    }
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

from . import static_specials, tokenizer_vocab_files
from .common import (
    DEFAULT_JSON_CAP,
    error,
    os_error,
    read_json_capped,
    read_text_capped,
    sha256_file,
    sha256_text,
    tag,
)

PROBE = "tokenizer_files"

TIKTOKEN_CAP = 256 * 1024 * 1024  # a real tiktoken file is 2-4 MB; streamed, not held
MAX_MALFORMED_EXAMPLES = 5

_TIKTOKEN_LINE_RE = re.compile(rb"^[A-Za-z0-9+/=]+ [0-9]+\r?$")


TOKENIZER_JSON_CAP = 64 * 1024 * 1024


def collect_tokenizer_files(model_path: str, *, json_cap: int = DEFAULT_JSON_CAP) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    """Every tokenizer fact the raw files of ``model_path`` give; see the module docstring."""
    facts = {
        "tokenizer_config": None,
        "special_tokens_map": None,
        "chat_templates": [],
        "tokenizer_json": None,
        "tiktoken": [],
        "sentencepiece": [],
        "tekken": None,
        "remote_code": None,
        "vocab_choice": None,
    }  # type: Dict[str, Any]
    errors = []  # type: List[Dict[str, Any]]
    steps = (
        ("tokenizer_config.json", lambda: _tokenizer_config(model_path, json_cap, facts, errors)),
        ("special_tokens_map.json", lambda: _special_tokens_map(model_path, json_cap, facts, errors)),
        ("chat_template", lambda: _template_files(model_path, json_cap, facts, errors)),
        # tokenizer.json is summarised here, never shipped: real ones reach 33 MB (Gemma-3),
        # so it gets a larger cap than the JSON that travels.
        ("tokenizer.json", lambda: _tokenizer_json(model_path, max(json_cap, TOKENIZER_JSON_CAP), facts, errors)),
        ("tiktoken", lambda: _vocab_files(model_path, facts, errors)),
        ("remote_code", lambda: _remote_code(model_path, json_cap, facts, errors)),
        # HOOK(tokenizers): which vocab file the fallback reads, and why (tokenizer_vocab_files).
        ("vocab_choice", lambda: facts.update(vocab_choice=tokenizer_vocab_files.choose(facts, _class_vocab_files(facts)))),
    )
    for name, step in steps:
        try:
            step()
        except Exception as exc:  # a bug in one step must not cost the other facts
            errors.append(_err("internal-error", "%s: %s: %s" % (name, type(exc).__name__, exc), model_path))
    return facts, errors


# ---------------------------------------------------------------- small helpers


def _err(kind: str, message: str, path: Optional[str] = None) -> Dict[str, Any]:
    return error(kind, message, path, probe=PROBE)

def _tag(record: Dict[str, Any]) -> Dict[str, Any]:
    return tag(record, PROBE)

def _present(path: str) -> bool:
    # lexists: a dangling link or a symlink loop is a present-but-broken file to report.
    return os.path.lexists(path)


def _read_json(path: str, cap: int, errors: List[Dict[str, Any]], want_object: bool = True) -> Any:
    if not _present(path):
        return None
    value, err = read_json_capped(path, cap, want_object=want_object)
    if err is not None:
        errors.append(_tag(err))
        return None
    return value


def _template_entry(source: str, name: str, text: str) -> Dict[str, Any]:
    return {"source": source, "name": name, "text": text, "sha256": sha256_text(text), "chars": len(text)}


# ---------------------------------------------------------------- JSON configs


def _tokenizer_config(path: str, cap: int, facts: Dict[str, Any], errors: List[Dict[str, Any]]) -> None:
    config = _read_json(os.path.join(path, "tokenizer_config.json"), cap, errors)
    if config is None:
        return
    inline = config.pop("chat_template", None)
    facts["tokenizer_config"] = config
    facts["chat_templates"].extend(_inline_templates(inline, "tokenizer_config.json"))


def _inline_templates(value: Any, source: str) -> List[Dict[str, Any]]:
    """A chat_template value: a string, or a list of {"name", "template"} (named templates)."""
    if isinstance(value, str):
        return [_template_entry(source, "default", value)]
    out = []
    if isinstance(value, list):
        for item in value:
            if isinstance(item, dict) and isinstance(item.get("template"), str):
                out.append(_template_entry(source, str(item.get("name") or "default"), item["template"]))
    return out


def _special_tokens_map(path: str, cap: int, facts: Dict[str, Any], errors: List[Dict[str, Any]]) -> None:
    facts["special_tokens_map"] = _read_json(os.path.join(path, "special_tokens_map.json"), cap, errors)


def _template_files(path: str, cap: int, facts: Dict[str, Any], errors: List[Dict[str, Any]]) -> None:
    """chat_template.jinja, additional_chat_templates/*.jinja, chat_template.json.

    transformers reads the .jinja files before tokenizer_config.json's inline template;
    chat_template.json belongs to processors, kept for when nothing else exists.
    """
    found = []
    jinja = os.path.join(path, "chat_template.jinja")
    if _present(jinja):
        text, err = read_text_capped(jinja, cap)
        if err is not None:
            errors.append(_tag(err))
        else:
            found.append(_template_entry("chat_template.jinja", "default", text))
    extra_dir = os.path.join(path, "additional_chat_templates")
    if os.path.isdir(extra_dir):
        for name in sorted(os.listdir(extra_dir)):
            if not name.endswith(".jinja"):
                continue
            text, err = read_text_capped(os.path.join(extra_dir, name), cap)
            if err is not None:
                errors.append(_tag(err))
            else:
                found.append(_template_entry("additional_chat_templates/" + name, name[: -len(".jinja")], text))
    as_json = _read_json(os.path.join(path, "chat_template.json"), cap, errors)
    if as_json is not None:
        found.extend(_inline_templates(as_json.get("chat_template"), "chat_template.json"))
    # Files first: that is the order of precedence transformers applies.
    facts["chat_templates"] = found + facts["chat_templates"]


# ---------------------------------------------------------------- tokenizer.json


def _tokenizer_json(path: str, cap: int, facts: Dict[str, Any], errors: List[Dict[str, Any]]) -> None:
    file = os.path.join(path, "tokenizer.json")
    if not _present(file):
        return
    text, err = read_text_capped(file, cap)
    if err is not None:
        errors.append(_tag(err))
        return
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        errors.append(_err("malformed-json", "%s: %s" % (file, exc), file))
        return
    if not isinstance(doc, dict):
        errors.append(_err("malformed-json", "%s holds a JSON %s, expected an object" % (file, type(doc).__name__), file))
        return
    summary = summarize_tokenizer_json(doc, _named_token_strings(facts))
    summary.update({"file": "tokenizer.json", "size": len(text.encode("utf-8")), "sha256": sha256_text(text)})
    facts["tokenizer_json"] = summary


def _named_token_strings(facts: Dict[str, Any]) -> List[str]:
    """bos/eos/... strings the configs name, to look up in the vocab while we hold it."""
    out = []  # type: List[str]
    for source in (facts.get("tokenizer_config"), facts.get("special_tokens_map")):
        if not isinstance(source, dict):
            continue
        for key, value in source.items():
            if key.endswith("_token") and isinstance(value, dict):
                value = value.get("content")
            if key.endswith("_token") and isinstance(value, str) and value not in out:
                out.append(value)
    return out


def summarize_tokenizer_json(doc: Dict[str, Any], wanted: Iterable[str] = ()) -> Dict[str, Any]:
    """The facts of a parsed tokenizer.json that the profile needs (pure, never raises on shape).

    ``wanted``: token strings to resolve against the model vocab (``vocab_lookup``), so
    a bos/eos that is a plain vocab entry, not an added token, still gets its id.
    """
    model = doc.get("model") if isinstance(doc.get("model"), dict) else {}
    vocab = model.get("vocab")
    vocab_size = None  # type: Optional[int]
    max_id = None  # type: Optional[int]
    if isinstance(vocab, dict):  # BPE, WordPiece, WordLevel: token -> id
        ids = [v for v in vocab.values() if isinstance(v, int)]
        vocab_size, max_id = len(vocab), (max(ids) if ids else None)
    elif isinstance(vocab, list):  # Unigram: [[piece, score], ...], id = index
        vocab_size, max_id = len(vocab), (len(vocab) - 1 if vocab else None)
    merges = model.get("merges")
    lookup = {}  # type: Dict[str, int]
    for token in wanted:
        if isinstance(vocab, dict) and isinstance(vocab.get(token), int):
            lookup[token] = vocab[token]
        elif isinstance(vocab, list):
            index = next((i for i, p in enumerate(vocab) if isinstance(p, list) and p and p[0] == token), None)
            if index is not None:
                lookup[token] = index
    return {
        "model_type": model.get("type"),
        "vocab_size": vocab_size,
        "max_vocab_id": max_id,
        "merges": len(merges) if isinstance(merges, list) else None,
        "added_tokens": _added_tokens(doc.get("added_tokens")),
        "normalizer": _component_type(doc.get("normalizer"), "normalizers"),
        "pre_tokenizer": _component_type(doc.get("pre_tokenizer"), "pretokenizers"),
        "decoder": _component_type(doc.get("decoder"), "decoders"),
        "post_processor": _post_processor(doc.get("post_processor"), doc.get("added_tokens")),
        "vocab_lookup": lookup,
    }


def _added_tokens(value: Any) -> List[Dict[str, Any]]:
    out = []
    for item in value if isinstance(value, list) else []:
        if isinstance(item, dict) and isinstance(item.get("id"), int):
            out.append({"id": item["id"], "content": item.get("content"), "special": bool(item.get("special"))})
    return out


def _component_type(value: Any, children_key: str) -> Optional[str]:
    if not isinstance(value, dict):
        return None
    kind = str(value.get("type"))
    children = value.get(children_key) or value.get("processors")
    if kind == "Sequence" and isinstance(children, list):
        return "Sequence[%s]" % ",".join(str(c.get("type")) for c in children if isinstance(c, dict))
    return kind


def _post_processor(value: Any, added: Any) -> Optional[Dict[str, Any]]:
    """bos/eos the post-processor adds around a single sequence (TemplateProcessing, Roberta, Bert)."""
    if not isinstance(value, dict):
        return None
    if value.get("type") == "Sequence":
        for child in value.get("processors") or []:
            found = _post_processor(child, added)
            if found is not None and found["type"] != "ByteLevel":
                return found
        return {"type": "Sequence", "single": None, "bos": None, "eos": None}
    kind = value.get("type")
    ids = {t.get("content"): t.get("id") for t in (added if isinstance(added, list) else []) if isinstance(t, dict)}
    if kind == "TemplateProcessing":
        return _template_processing(value, ids)
    if kind in ("RobertaProcessing", "BertProcessing"):
        cls, sep = value.get("cls"), value.get("sep")
        return {
            "type": kind,
            "single": "%s $A %s" % (_pair_token(cls), _pair_token(sep)),
            "bos": _pair(cls),
            "eos": _pair(sep),
        }
    return {"type": kind, "single": None, "bos": None, "eos": None}


def _pair_token(value: Any) -> Optional[str]:
    return value[0] if isinstance(value, list) and value else None


def _pair(value: Any) -> Optional[Dict[str, Any]]:
    if isinstance(value, list) and len(value) == 2:
        return {"token": value[0], "id": value[1]}
    return None


def _template_processing(value: Dict[str, Any], ids: Dict[Any, Any]) -> Dict[str, Any]:
    specials = value.get("special_tokens") if isinstance(value.get("special_tokens"), dict) else {}
    parts = []  # type: List[str]
    before, after = [], []  # type: List[str], List[str]
    seen_sequence = False
    for piece in value.get("single") or []:
        if not isinstance(piece, dict):
            continue
        if "Sequence" in piece:
            parts.append("$" + str((piece["Sequence"] or {}).get("id", "A")))
            seen_sequence = True
        elif "SpecialToken" in piece:
            token = (piece["SpecialToken"] or {}).get("id")
            parts.append(str(token))
            (after if seen_sequence else before).append(token)
    return {
        "type": "TemplateProcessing",
        "single": " ".join(parts),
        "bos": _special_ref(before[0], specials, ids) if before else None,
        "eos": _special_ref(after[-1], specials, ids) if after else None,
    }


def _special_ref(token: Any, specials: Dict[str, Any], ids: Dict[Any, Any]) -> Dict[str, Any]:
    entry = specials.get(token) if isinstance(specials.get(token), dict) else {}
    entry_ids = entry.get("ids")
    token_id = entry_ids[0] if isinstance(entry_ids, list) and entry_ids else ids.get(token)
    return {"token": token, "id": token_id}


# ---------------------------------------------------------------- tiktoken / sentencepiece


def _vocab_files(path: str, facts: Dict[str, Any], errors: List[Dict[str, Any]]) -> None:
    if not os.path.isdir(path):
        return  # a missing or wrong model path is the files probe's to report, once
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        errors.append(_tag(os_error(exc, path)))
        return
    # HOOK(tokenizers): every vocab layout (tiktoken, sentencepiece ModelProto, tekken) lives
    # in tokenizer_vocab_files; here only its facts are merged in.
    found, errs = tokenizer_vocab_files.collect(path, names, _named_token_strings(facts),
                                                summarize_tiktoken_file, _looks_like_tiktoken)
    facts.update(found)
    errors.extend(_tag(e) for e in errs)


def _add(into: List[Dict[str, Any]], result: Tuple[Optional[Dict[str, Any]], Optional[Dict[str, Any]]], errors: List[Dict[str, Any]]) -> None:
    value, err = result
    if err is not None:
        errors.append(_tag(err))
    if value is not None:
        into.append(value)


def _looks_like_tiktoken(file: str) -> bool:
    try:
        with open(file, "rb") as fh:
            first = fh.readline(512)
    except OSError:
        return False
    return bool(_TIKTOKEN_LINE_RE.match(first))


def summarize_tiktoken_file(file: str) -> Tuple[Optional[Dict[str, Any]], Optional[Dict[str, Any]]]:
    """Stream a tiktoken BPE file once: hash and rank statistics."""
    try:
        size = os.path.getsize(file)
        if size > TIKTOKEN_CAP:
            return None, error("too-large", "%s is %d bytes, above the %d-byte cap" % (file, size, TIKTOKEN_CAP), file)
        digest = hashlib.sha256()
        with open(file, "rb") as fh:
            summary = summarize_tiktoken_lines(_hashed(fh, digest))
    except OSError as exc:
        return None, os_error(exc, file)
    summary.update({"file": os.path.basename(file), "size": size, "sha256": digest.hexdigest()})
    return summary, None


def _hashed(lines: Iterable[bytes], digest: Any) -> Iterable[bytes]:
    for line in lines:
        digest.update(line)
        yield line


def summarize_tiktoken_lines(lines: Iterable[bytes]) -> Dict[str, Any]:
    """Rank statistics of tiktoken lines ``b"<base64 token> <rank>"`` (pure; never raises).

    A line is malformed where ``tiktoken.load.load_tiktoken_bpe`` would refuse it (not
    two fields, bad base64, rank not an integer) or where the rank is negative.
    ``distinct_tokens`` is what tiktoken's loader ends with (a dict keyed by token), so
    it is the number of base ids a class like Kimi's counts its reserved ids from.
    """
    tokens = set()  # type: set
    ranks = set()  # type: set
    entries = single = malformed = 0
    examples = []  # type: List[Dict[str, Any]]
    lo = hi = None  # type: Optional[int]
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line:
            continue
        token, rank, reason = _parse_tiktoken_line(line)
        if reason is not None:
            malformed += 1
            if len(examples) < MAX_MALFORMED_EXAMPLES:
                examples.append({"line": number, "reason": reason})
            continue
        entries += 1
        tokens.add(token)
        ranks.add(rank)
        single += len(token) == 1
        lo = rank if lo is None or rank < lo else lo
        hi = rank if hi is None or rank > hi else hi
    dense = entries > 0 and lo == 0 and hi == entries - 1 and len(ranks) == entries
    return {
        "entries": entries,
        "distinct_tokens": len(tokens),
        "distinct_ranks": len(ranks),
        "min_rank": lo,
        "max_rank": hi,
        "dense": dense,
        "gaps": (hi + 1 - len(ranks)) if hi is not None else 0,
        "duplicate_tokens": entries - len(tokens),
        "duplicate_ranks": entries - len(ranks),
        "single_bytes": single,
        "malformed_lines": malformed,
        "malformed_examples": examples,
    }


def _parse_tiktoken_line(line: bytes) -> Tuple[bytes, int, Optional[str]]:
    fields = line.split()
    if len(fields) != 2:
        return b"", 0, "expected 2 fields, found %d" % len(fields)
    try:
        token = base64.b64decode(fields[0])
    except (binascii.Error, ValueError):
        return b"", 0, "token is not base64"
    try:
        rank = int(fields[1])
    except ValueError:
        return b"", 0, "rank is not an integer"
    if rank < 0:
        return b"", 0, "negative rank"
    return token, rank, None


# ---------------------------------------------------------------- remote code


def _remote_code(path: str, cap: int, facts: Dict[str, Any], errors: List[Dict[str, Any]]) -> None:
    auto_map, source = _auto_map(path, cap, facts)
    if auto_map is None:
        return
    slow_ref, fast_ref = _split_auto_map(auto_map)
    info = {
        "auto_map": auto_map,
        "auto_map_source": source,
        "slow": _module_info(path, slow_ref),
        "fast": _module_info(path, fast_ref),
        "num_reserved_special_tokens": None,
        "reserved_extra": 0,
        "reserved_declared_in": None,
        "placeholder": None,
    }  # type: Dict[str, Any]
    for entry in (info["slow"], info["fast"]):
        if entry is not None and entry["exists"] and info["num_reserved_special_tokens"] is None:
            _static_specials(path, entry, cap, info, errors)
    facts["remote_code"] = info


def _auto_map(path: str, cap: int, facts: Dict[str, Any]) -> Tuple[Any, Optional[str]]:
    config = facts.get("tokenizer_config") or {}
    value = (config.get("auto_map") or {}).get("AutoTokenizer") if isinstance(config.get("auto_map"), dict) else None
    if value:
        return value, "tokenizer_config.json"
    # Some repos declare the tokenizer class only in config.json. Its read errors are
    # the files probe's to report, not repeated here.
    model_config, _ = read_json_capped(os.path.join(path, "config.json"), cap)
    auto = (model_config or {}).get("auto_map")
    if isinstance(auto, dict) and auto.get("AutoTokenizer"):
        return auto["AutoTokenizer"], "config.json"
    return None, None


def _split_auto_map(value: Any) -> Tuple[Optional[str], Optional[str]]:
    if isinstance(value, str):
        return value, None
    if isinstance(value, (list, tuple)):
        slow = value[0] if len(value) > 0 and isinstance(value[0], str) else None
        fast = value[1] if len(value) > 1 and isinstance(value[1], str) else None
        return slow, fast
    return None, None


def _module_info(path: str, ref: Optional[str]) -> Optional[Dict[str, Any]]:
    """"repo--pkg.module.Class" -> the module file inside the model dir (if it is one)."""
    if not ref:
        return None
    local = ref.split("--")[-1]  # "moonshotai/Kimi-K2--tokenization_kimi.X" names a hub repo
    module, _, cls = local.rpartition(".")
    parts = module.split(".") if module else []
    if not parts or not all(re.match(r"^[A-Za-z_]\w*$", p) for p in parts):
        return {"ref": ref, "module": module or None, "class": cls, "file": None, "exists": False, "size": None, "sha256": None}
    rel = "/".join(parts) + ".py"
    file = os.path.join(path, rel)
    info = {"ref": ref, "module": module, "class": cls, "file": rel, "exists": os.path.isfile(file), "size": None, "sha256": None}
    if info["exists"]:
        info["size"] = os.path.getsize(file)
        info["sha256"], _ = sha256_file(file)
    return info


def _class_vocab_files(facts: Dict[str, Any]) -> List[str]:
    static = (facts.get("remote_code") or {}).get("static") or {}
    return [v for v in (static.get("vocab_files") or {}).values() if isinstance(v, str)]


def _static_specials(path: str, entry: Dict[str, Any], cap: int, info: Dict[str, Any],
                     errors: List[Dict[str, Any]]) -> None:
    """HOOK(tokenizers): the class's declared specials, read by the AST (static_specials)."""
    found, errs = static_specials.scan_specials(path, entry["file"], entry.get("class"), cap)
    errors.extend(_tag(e) for e in errs)
    info["static"] = found
    reserved = found.get("reserved") or {}
    if isinstance(reserved.get("count"), int):
        info["num_reserved_special_tokens"] = reserved["count"]
        info["reserved_extra"] = reserved.get("extra") or 0
        info["reserved_declared_in"] = reserved.get("resolved_in") or reserved.get("declared_in")
    placeholder = found.get("placeholder") or {}
    if placeholder.get("mode") == "id":
        info["placeholder"] = placeholder.get("template")
