"""Model-directory facts: checks, listing, raw configs, custom code, drafters.

Runs on the host under its own interpreter: standard library only, Python 3.8+.
Nothing here raises to the caller: every collector returns ``(facts, errors)``
where errors are records ``{"probe", "type", "message", "path"?}``.

``collect_files(model_path, json_cap=...)`` returns::

    {
      "model_path": "/root/models/Kimi-K2.6",      # as given
      "real_path": "/data/hf/.../snapshots/abc",   # os.path.realpath, or null
      "status": "ok" | "not-found" | "not-a-directory" | "permission-denied"
                | "not-a-model-dir" | "symlink-loop" | "os-error",
      "listing": [{"name": "config.json", "kind": "file" | "dir" | "other" | "broken",
                   "size": int | null,            # of the target for symlinks
                   "link": "../../blobs/ab12" | null,   # readlink() for symlinks
                   "resolved": "/abs/blobs/ab12" | null, # realpath for symlinks
                   "link_error": null | "dangling" | "symlink-loop" | "permission-denied" | ...}],
      "listing_total": int,         # entries in the directory (up to the scan bound)
      "listing_truncated": bool,    # more entries than were stat'ed/listed
      "total_size": int,            # sum of sizes of listed regular files (targets for links)
      "config": {...} | null,       # config.json as parsed (cap, NaN and non-objects refused)
      "generation_config": {...} | null,
      "preprocessor_config_present": bool,
      "index": {"file", "total_size", "weight_map_entries", "shards", "missing_shards"} | null,
      "auto_map_sources": {"config.json": null | "<error type>", "tokenizer_config.json": ..., ...},
      "custom_code": [{"file": "tokenization_kimi.py", "module": "tokenization_kimi",
                       "sha256": hex | null, "size": int | null,
                       "imports": ["tiktoken", "transformers"],   # top-level, non-stdlib
                       "optional_imports": ["flash_attn"],        # only inside try: blocks
                       "local_imports": [],                        # absolute imports of sibling files
                       "relative_imports": [".tool_declaration_ts"],
                       "referenced_by": ["tokenizer_config.json:auto_map.AutoTokenizer"],
                       "repo": null | "org/name",                 # "org/name--module.Class" form
                       "error": null | {"type", "message"}}],
      "custom_code_truncated": bool,
    }

``collect_drafters(model_path, json_cap=...)`` returns a list of
``{"path", "relation": "sibling" | "child", "matched": [signals], "config": {...}}``.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import os
import stat
import sys
from typing import Any, Dict, List, Optional, Tuple

from introspect.remote import common, native_config, safetensors_probe, tokenizer_vocab_files

PROBE = "files"

MAX_SCAN_NAMES = 100000   # directory entries iterated at most (names only, cheap)
MAX_LISTING = 10000       # entries stat'ed and shipped
MAX_CODE_FILES = 64       # custom code files followed (auto_map + relative imports)
MAX_AUTO_MAP_DEPTH = 3    # config nesting searched for auto_map (text_config, vision_config...)
MAX_DRAFTER_ENTRIES = 200  # candidate directories examined for drafter configs
DRAFTER_JSON_CAP = 4 * 1024 * 1024  # drafter configs are small; never read 200 x 16 MiB

# A directory counts as a model dir when it has config.json or one of these.
MODEL_MARKERS = (
    "config.json", "model.safetensors.index.json", "model.safetensors", "pytorch_model.bin",
    "pytorch_model.bin.index.json", "params.json", "tokenizer_config.json", "tokenizer.json",
    "tiktoken.model", "adapter_config.json", "consolidated.safetensors",
    # HOOK(tokenizers): tokenizer-only layouts are model dirs too (sentencepiece, Mistral tekken).
    "tokenizer.model", "spiece.model", "sentencepiece.bpe.model", "tekken.json",
)
MODEL_SUFFIXES = (".safetensors", ".gguf", ".bin", ".pt", ".tiktoken")

AUTO_MAP_FILES = ("tokenizer_config.json", "preprocessor_config.json", "processor_config.json")

# sys.stdlib_module_names is 3.10+; this is its 3.11 content (public names) plus
# modules removed since 3.8, so imports classify the same on every host Python.
_STDLIB_TEXT = """
abc aifc antigravity argparse array ast asynchat asyncio asyncore atexit audioop base64 bdb
binascii binhex bisect builtins bz2 cProfile calendar cgi cgitb chunk cmath cmd code codecs
codeop collections colorsys compileall concurrent configparser contextlib contextvars copy
copyreg crypt csv ctypes curses dataclasses datetime dbm decimal difflib dis distutils doctest
dummy_threading email encodings ensurepip enum errno faulthandler fcntl filecmp fileinput fnmatch
formatter fractions ftplib functools gc genericpath getopt getpass gettext glob graphlib grp gzip
hashlib heapq hmac html http idlelib imaplib imghdr imp importlib inspect io ipaddress itertools
json keyword lib2to3 linecache locale logging lzma macpath mailbox mailcap marshal math mimetypes
mmap modulefinder msilib msvcrt multiprocessing netrc nis nntplib nt ntpath nturl2path numbers
opcode operator optparse os ossaudiodev parser pathlib pdb pickle pickletools pipes pkgutil
platform plistlib poplib posix posixpath pprint profile pstats pty pwd py_compile pyclbr pydoc
pydoc_data pyexpat queue quopri random re readline reprlib resource rlcompleter runpy sched
secrets select selectors shelve shlex shutil signal site smtpd smtplib sndhdr socket
socketserver spwd sqlite3 sre_compile sre_constants sre_parse ssl stat statistics string
stringprep struct subprocess sunau symbol symtable sys sysconfig syslog tabnanny tarfile
telnetlib tempfile termios textwrap this threading time timeit tkinter token tokenize tomllib
trace traceback tracemalloc tty turtle turtledemo types typing unicodedata unittest urllib uu
uuid venv warnings wave weakref webbrowser winreg winsound wsgiref xdrlib xml xmlrpc zipapp
zipfile zipimport zlib zoneinfo
__future__ _thread _io _abc _ast _collections_abc _weakref _operator _functools _warnings
_struct _string _json _pickle _dummy_thread
"""
STDLIB_MODULES = frozenset(_STDLIB_TEXT.split())


def is_stdlib(name: str) -> bool:
    """True for a top-level module name of the standard library (any Python 3.8+)."""
    if name in STDLIB_MODULES or name in sys.builtin_module_names:
        return True
    names = getattr(sys, "stdlib_module_names", None)  # 3.10+
    return bool(names) and name in names


def _err(kind: str, message: str, path: Optional[str] = None) -> Dict[str, Any]:
    return common.error(kind, message, path, probe=PROBE)

def _tag(rec: Dict[str, Any]) -> Dict[str, Any]:
    return common.tag(rec, PROBE)

def _short(rec: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The {type, message} form kept inside facts."""
    if rec is None:
        return None
    return {"type": rec.get("type"), "message": rec.get("message")}


# --------------------------------------------------------------------------- checks


def check_model_dir(model_path: str) -> Tuple[str, Optional[Dict[str, Any]]]:
    """Status of the model path: "ok" or the error type, with its error record."""
    try:
        st = os.stat(model_path)
    except OSError as exc:
        return _status_from(common.os_error(exc, model_path))
    except (ValueError, TypeError) as exc:  # embedded NUL, not a str
        return "not-found", _err("not-found", "%r: %s" % (model_path, exc), str(model_path))
    if not stat.S_ISDIR(st.st_mode):
        return "not-a-directory", _err(
            "not-a-directory", "%s is not a directory (a model path names the model's folder)" % model_path,
            model_path)
    if not os.access(model_path, os.R_OK | os.X_OK):
        return "permission-denied", _err(
            "permission-denied", "%s: no permission to list this directory" % model_path, model_path)
    return "ok", None


def _status_from(rec: Dict[str, Any]) -> Tuple[str, Dict[str, Any]]:
    return rec["type"], _tag(rec)


def looks_like_model_dir(path: str, names: List[str]) -> bool:
    present = set(names)
    if any(marker in present for marker in MODEL_MARKERS):
        return True
    if any(name.endswith(MODEL_SUFFIXES) or tokenizer_vocab_files.is_mistral_sentencepiece(name) for name in names):
        return True
    # The name scan may have stopped early in a huge directory: ask for the markers directly.
    return any(os.path.lexists(os.path.join(path, marker)) for marker in MODEL_MARKERS)


# --------------------------------------------------------------------------- listing


def scan_names(path: str, limit: Optional[int] = None) -> Tuple[List[str], bool, Optional[Dict[str, Any]]]:
    """Entry names of a directory (sorted), whether the scan stopped at ``limit``, and an error."""
    limit = MAX_SCAN_NAMES if limit is None else limit
    names = []  # type: List[str]
    truncated = False
    try:
        with os.scandir(path) as it:
            for entry in it:
                if len(names) >= limit:
                    truncated = True
                    break
                names.append(entry.name)
    except OSError as exc:
        return sorted(names), truncated, _tag(common.os_error(exc, path))
    return sorted(names), truncated, None


def describe_entry(dir_path: str, name: str) -> Dict[str, Any]:
    """One listing row. Symlinks report their target's kind and size (HF cache blobs)."""
    full = os.path.join(dir_path, name)
    row = {"name": name, "kind": "other", "size": None, "link": None, "resolved": None,
           "link_error": None}  # type: Dict[str, Any]
    try:
        lst = os.lstat(full)
    except OSError as exc:
        row["kind"] = "broken"
        row["link_error"] = common.os_error(exc, full)["type"]
        return row
    target_st = lst
    if stat.S_ISLNK(lst.st_mode):
        with contextlib.suppress(OSError):
            row["link"] = os.readlink(full)
        with contextlib.suppress(OSError, ValueError, RuntimeError):  # RuntimeError: loops, old Pythons
            row["resolved"] = os.path.realpath(full)
        try:
            target_st = os.stat(full)
        except OSError as exc:
            kind = common.os_error(exc, full)["type"]
            row["kind"] = "broken"
            row["link_error"] = "dangling" if kind == "not-found" else kind
            return row
    if stat.S_ISDIR(target_st.st_mode):
        row["kind"] = "dir"
    elif stat.S_ISREG(target_st.st_mode):
        row["kind"] = "file"
        row["size"] = target_st.st_size
    return row


def list_dir(model_path: str, names: List[str]) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """Listing rows for the first MAX_LISTING names, plus errors for broken links."""
    rows = []
    errors = []
    for name in names[:MAX_LISTING]:
        row = describe_entry(model_path, name)
        rows.append(row)
        if row["link_error"]:
            full = os.path.join(model_path, name)
            kind = "dangling-symlink" if row["link_error"] == "dangling" else row["link_error"]
            what = "points nowhere" if row["link_error"] == "dangling" else "cannot be followed (%s)" % kind
            errors.append(_err(kind, "%s -> %s %s" % (full, row["link"], what), full))
    return rows, errors


# --------------------------------------------------------------------------- configs


def read_config(path: str, cap: int, optional: bool) -> Tuple[Optional[Dict[str, Any]], List[Dict[str, Any]]]:
    """A JSON object file; a missing optional file is not an error."""
    if optional and not os.path.lexists(path):
        return None, []
    value, err = common.read_json_capped(path, cap)
    if err is not None:
        return None, [_tag(err)]
    # 1e400 parses as inf (parse_constant never sees it): keep the reply valid JSON.
    return common.json_safe(value), []


# --------------------------------------------------------------------------- custom code


def parse_class_reference(ref: Any) -> Optional[Tuple[Optional[str], str]]:
    """``"[repo--]module.Class"`` -> (repo, module), or None when it is not a usable reference."""
    if not isinstance(ref, str) or not ref.strip():
        return None
    ref = ref.strip()
    repo = None
    if "--" in ref:
        repo, ref = ref.split("--", 1)
    if "." not in ref:
        return None
    module = ref.rsplit(".", 1)[0]
    # Only identifier components: a reference must never name a path outside the model dir.
    if not all(part.isidentifier() for part in module.split(".")):
        return None
    return repo or None, module


def auto_map_references(value: Any, label: str, depth: int = 0) -> List[Tuple[str, str]]:
    """(label, class reference) for every auto_map entry in a config, nested configs included."""
    out = []  # type: List[Tuple[str, str]]
    if not isinstance(value, dict) or depth > MAX_AUTO_MAP_DEPTH:
        return out
    amap = value.get("auto_map")
    if isinstance(amap, dict):
        prefix = label + "auto_map"
        for key in sorted(amap, key=str):
            refs = amap[key]
            if not isinstance(refs, (list, tuple)):
                refs = [refs]
            for ref in refs:
                if isinstance(ref, str):
                    out.append(("%s.%s" % (prefix, key), ref))
    for key in sorted(value, key=str):
        sub = value[key]
        if key != "auto_map" and isinstance(sub, dict):
            out.extend(auto_map_references(sub, "%s%s." % (label, key), depth + 1))
    return out


def _module_file(module: str) -> str:
    return "/".join(module.split(".")) + ".py"


def scan_imports(source: bytes) -> Dict[str, Any]:
    """Imports of one Python source: never raises; syntax errors come back in "error"."""
    result = {"imports": [], "optional_imports": [], "relative": [], "error": None}  # type: Dict[str, Any]
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        result["error"] = {"type": "syntax-error", "message": "line %s: %s" % (exc.lineno, exc.msg)}
        return result
    except (ValueError, RecursionError, MemoryError, TypeError) as exc:
        result["error"] = {"type": "unparsable", "message": "%s: %s" % (type(exc).__name__, exc)}
        return result
    required = set()
    optional = set()
    relative = []  # type: List[Tuple[int, int, Optional[str], List[str]]]
    _walk_imports(tree, False, required, optional, relative)
    result["imports"] = sorted(required)
    result["optional_imports"] = sorted(optional - required)
    relative.sort(key=lambda item: item[0])  # source order (the walk is a stack)
    result["relative"] = [item[1:] for item in relative]
    return result


def _walk_imports(node: Any, in_try: bool, required: set, optional: set, relative: list) -> None:
    # Iterative, so deeply nested code cannot hit the recursion limit. Imports inside
    # a try body are optional: transformers' check_imports skips them too.
    stack = [(node, in_try)]
    while stack:
        current, guarded = stack.pop()
        if isinstance(current, ast.Import):
            for alias in current.names:
                (optional if guarded else required).add(alias.name.split(".")[0])
        elif isinstance(current, ast.ImportFrom):
            if current.level:
                relative.append((current.lineno, current.level, current.module, [a.name for a in current.names]))
            elif current.module:
                (optional if guarded else required).add(current.module.split(".")[0])
        if isinstance(current, ast.Try):
            for child in current.body:
                stack.append((child, True))
            for child in list(current.handlers) + list(current.orelse) + list(current.finalbody):
                stack.append((child, guarded))
            continue
        for child in ast.iter_child_nodes(current):
            stack.append((child, guarded))


def _resolve_relative(root: str, rel_file: str, level: int, module: Optional[str],
                      names: List[str]) -> List[Tuple[str, Optional[str]]]:
    """(written form, file relative to root or None) for one relative import."""
    base = os.path.dirname(rel_file)
    for _ in range(level - 1):
        if not base:
            return []  # climbs above the model dir: not followed
        base = os.path.dirname(base)
    dots = "." * level
    out = []
    if module:
        if not all(part.isidentifier() for part in module.split(".")):
            return []
        stem = os.path.join(base, *module.split("."))
        if os.path.isdir(os.path.join(root, stem)):
            init = os.path.join(stem, "__init__.py")
            # A namespace package has no __init__.py: nothing to hash, nothing missing.
            out.append((dots + module, init if os.path.isfile(os.path.join(root, init)) else None))
        else:
            out.append((dots + module, stem + ".py"))  # followed even when absent: reported missing
        return out
    for name in names:
        if not name.isidentifier():
            continue
        candidate = os.path.join(base, name + ".py")
        if os.path.isfile(os.path.join(root, candidate)):
            out.append((dots + name, candidate))
        elif os.path.isfile(os.path.join(root, base, name, "__init__.py")):
            out.append((dots + name, os.path.join(base, name, "__init__.py")))
    if not out and os.path.isfile(os.path.join(root, base, "__init__.py")):
        out.append((dots, os.path.join(base, "__init__.py")))
    return out


def _read_code(path: str, cap: int) -> Tuple[Optional[bytes], Optional[Dict[str, Any]]]:
    try:
        size = os.path.getsize(path)
        if size > cap:
            return None, common.error("too-large", "%s is %d bytes, above the %d-byte cap" % (path, size, cap), path)
        with open(path, "rb") as fh:
            return fh.read(cap + 1), None
    except OSError as exc:
        return None, common.os_error(exc, path)


def describe_code_file(root: str, rel_file: str, local_modules: set, cap: int) -> Tuple[Dict[str, Any], list]:
    """One custom_code entry (without referenced_by) and the relative imports to follow."""
    entry = {"file": rel_file, "module": rel_file[:-3].replace("/", ".") if rel_file.endswith(".py") else rel_file,
             "sha256": None, "size": None, "imports": [], "optional_imports": [], "local_imports": [],
             "relative_imports": [], "referenced_by": [], "repo": None, "error": None}  # type: Dict[str, Any]
    full = os.path.join(root, rel_file)
    data, err = _read_code(full, cap)
    if err is not None:
        entry["error"] = _short(err)
        if err["type"] == "not-found":  # distinct from a missing model path (exit 2)
            entry["error"]["type"] = "missing-custom-code"
        return entry, []
    entry["size"] = len(data)
    # Hash the same bytes that were parsed, so the pin matches what was analysed.
    entry["sha256"] = hashlib.sha256(data).hexdigest()
    scanned = scan_imports(data)
    entry["error"] = scanned["error"]
    entry["imports"] = [n for n in scanned["imports"] if not is_stdlib(n) and n not in local_modules]
    entry["optional_imports"] = [n for n in scanned["optional_imports"]
                                 if not is_stdlib(n) and n not in local_modules]
    entry["local_imports"] = sorted(n for n in set(scanned["imports"]) | set(scanned["optional_imports"])
                                    if n in local_modules)
    follow = []
    for level, module, names in scanned["relative"]:
        for written, target in _resolve_relative(root, rel_file, level, module, names):
            if written not in entry["relative_imports"]:
                entry["relative_imports"].append(written)
            if target is not None:
                follow.append(os.path.normpath(target))
    return entry, follow


def collect_custom_code(root: str, refs: List[Tuple[str, str]], local_modules: set,
                        cap: int) -> Tuple[List[Dict[str, Any]], bool, List[Dict[str, Any]]]:
    """Every auto_map module and, transitively, its relative imports."""
    entries = {}  # type: Dict[str, Dict[str, Any]]
    errors = []  # type: List[Dict[str, Any]]
    queue = []  # type: List[Tuple[str, str, Optional[str]]]  # (file, referrer, repo)
    for label, ref in refs:
        parsed = parse_class_reference(ref)
        if parsed is not None:
            queue.append((_module_file(parsed[1]), label, parsed[0]))
    truncated = False
    while queue:
        rel_file, referrer, repo = queue.pop(0)
        if rel_file in entries:
            _add_referrer(entries[rel_file], referrer)
            continue
        if len(entries) >= MAX_CODE_FILES:
            truncated = True
            break
        full = os.path.join(root, rel_file)
        if repo and not os.path.lexists(full):
            entries[rel_file] = _missing_entry(rel_file, referrer, repo)
            errors.append(_err("remote-repo", "custom code %s (from %s) comes from hub repo %s, not from the "
                               "model dir; offline loading needs it cached" % (rel_file, referrer, repo), full))
            continue
        entry, follow = describe_code_file(root, rel_file, local_modules, cap)
        entry["repo"] = repo
        _add_referrer(entry, referrer)
        entries[rel_file] = entry
        if entry["error"] is not None:
            errors.append(_err(entry["error"]["type"], "custom code %s (from %s): %s"
                               % (rel_file, referrer, entry["error"]["message"]), full))
        for target in follow:
            queue.append((target, rel_file, None))
    return [entries[k] for k in sorted(entries)], truncated, errors


def _missing_entry(rel_file: str, referrer: str, repo: str) -> Dict[str, Any]:
    # "org/name--module.Class": transformers fetches this code from another hub repo.
    return {"file": rel_file, "module": rel_file[:-3].replace("/", "."), "sha256": None, "size": None,
            "imports": [], "optional_imports": [], "local_imports": [], "relative_imports": [],
            "referenced_by": [referrer], "repo": repo,
            "error": {"type": "remote-repo", "message": "code comes from hub repo %s, not from the model dir" % repo}}


def _add_referrer(entry: Dict[str, Any], referrer: str) -> None:
    if referrer not in entry["referenced_by"]:
        entry["referenced_by"].append(referrer)


# --------------------------------------------------------------------------- collect_files


def _empty_facts(model_path: str) -> Dict[str, Any]:
    return {"model_path": model_path, "real_path": None, "status": "ok", "listing": [],
            "listing_total": 0, "listing_truncated": False, "total_size": 0, "config": None,
            "generation_config": None, "preprocessor_config_present": False, "index": None,
            "auto_map_sources": {}, "custom_code": [], "custom_code_truncated": False}


def collect_files(model_path: str, *, json_cap: int = common.DEFAULT_JSON_CAP) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    """Facts about the model directory. Never raises."""
    facts = _empty_facts(model_path)
    try:
        return _collect_files(model_path, json_cap, facts)
    except Exception as exc:  # a bug here must cost this section only, not the run
        return facts, [_err("internal-error", "files probe: %s: %s" % (type(exc).__name__, exc), str(model_path))]


def _collect_files(model_path: str, json_cap: int, facts: Dict[str, Any]) -> Tuple[Dict[str, Any], list]:
    status, err = check_model_dir(model_path)
    facts["status"] = status
    if err is not None:
        return facts, [err]
    errors = []  # type: List[Dict[str, Any]]
    facts["real_path"] = os.path.realpath(model_path)
    names, truncated, err = scan_names(model_path)
    if err is not None:
        facts["status"] = err["type"]
        return facts, [err]
    rows, link_errors = list_dir(model_path, names)
    errors.extend(link_errors)
    facts["listing"] = rows
    facts["listing_total"] = len(names)
    facts["listing_truncated"] = truncated or len(names) > MAX_LISTING
    facts["total_size"] = sum(r["size"] for r in rows if r["kind"] == "file" and r["size"] is not None)
    if not looks_like_model_dir(model_path, names):
        facts["status"] = "not-a-model-dir"
        errors.append(_err("not-a-model-dir", "%s has no config.json, weights or tokenizer files: "
                           "not a model directory" % model_path, model_path))
        return facts, errors
    _collect_configs(model_path, names, json_cap, facts, errors)
    return facts, errors


def _collect_configs(model_path: str, names: List[str], json_cap: int, facts: Dict[str, Any],
                     errors: List[Dict[str, Any]]) -> None:
    join = os.path.join
    config, errs = read_config(join(model_path, "config.json"), json_cap, optional=True)
    facts["config"] = config
    errors.extend(errs)
    if config is None and not errs:
        config = _native_config(model_path, json_cap, facts, errors)
    if config is None and not errs and facts.get("config_source") is None:
        errors.append(_err("missing-config", "%s has no config.json: the architecture cannot be read"
                           % model_path, join(model_path, "config.json")))
    gen, errs = read_config(join(model_path, "generation_config.json"), json_cap, optional=True)
    facts["generation_config"] = gen
    errors.extend(errs)
    facts["preprocessor_config_present"] = os.path.lexists(join(model_path, "preprocessor_config.json"))

    # The safetensors probe owns the index and reports its errors; here only the summary.
    facts["index"], _err_unused = safetensors_probe.summarize_index(model_path)

    refs = auto_map_references(config, "config.json:") if config else []
    sources = {"config.json": None if config is not None else "absent-or-invalid"}  # type: Dict[str, Any]
    for fname in AUTO_MAP_FILES:
        if not os.path.lexists(join(model_path, fname)):
            continue
        value, err = common.read_json_capped(join(model_path, fname), json_cap)
        sources[fname] = None if err is None else err["type"]
        # tokenizer_config.json belongs to the tokenizer_files probe, which reports its errors.
        if err is not None and fname != "tokenizer_config.json":
            errors.append(_tag(err))
        if value is not None:
            refs.extend(auto_map_references(value, fname + ":"))
    facts["auto_map_sources"] = sources
    local_modules = set(n[:-3] for n in names if n.endswith(".py") and n[:-3].isidentifier())
    code, truncated, errs = collect_custom_code(model_path, refs, local_modules, json_cap)
    facts["custom_code"] = code
    facts["custom_code_truncated"] = truncated
    errors.extend(errs)


def _native_config(model_path: str, json_cap: int, facts: Dict[str, Any],
                   errors: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """HOOK(tokenizers): Mistral/Meta params.json, mapped to HF keys (remote/native_config.py)."""
    path = os.path.join(model_path, "params.json")
    if not os.path.lexists(path):
        return None
    params, err = common.read_json_capped(path, json_cap)
    if err is not None:
        errors.append(_tag(err))
        facts["config_source"] = "params.json"
        return None
    config = native_config.to_hf_config(params)
    if config is not None:
        facts["config"] = config
        facts["config_source"] = "params.json"
        facts["native_params"] = params
    return config


# --------------------------------------------------------------------------- drafters

_DRAFTER_WORDS = ("eagle", "dflash", "mtp", "medusa", "nextn", "draft")


def drafter_signals(config: Any) -> List[str]:
    """Why a config looks like a speculative-decoding drafter (empty when it does not)."""
    if not isinstance(config, dict):
        return []
    found = []
    for key in ("draft_vocab_size", "eagle_config", "dflash_config", "target_layer_ids"):
        if key in config:
            found.append(key)
    for nested in ("dflash_config", "eagle_config"):
        sub = config.get(nested)
        if isinstance(sub, dict) and "target_layer_ids" in sub and "target_layer_ids" not in found:
            found.append("%s.target_layer_ids" % nested)
    if "block_size" in config and "mask_token_id" in config:
        found.append("block_size+mask_token_id")
    archs = config.get("architectures")
    if isinstance(archs, list):
        for arch in archs:
            if isinstance(arch, str) and any(w in arch.lower() for w in _DRAFTER_WORDS):
                found.append("architectures:%s" % arch)
    mtype = config.get("model_type")
    if isinstance(mtype, str) and any(w in mtype.lower() for w in _DRAFTER_WORDS):
        found.append("model_type:%s" % mtype)
    return found


def _drafter_candidates(model_path: str) -> Tuple[List[Tuple[str, str]], bool, List[Dict[str, Any]]]:
    """(directory, relation) pairs to examine, likeliest first, bounded."""
    model_real = os.path.realpath(model_path)
    parent = os.path.dirname(os.path.abspath(model_path.rstrip("/") or "/"))
    pairs = []  # type: List[Tuple[str, str]]
    errors = []
    for base, relation in ((model_path, "child"), (parent, "sibling")):
        names, _trunc, err = scan_names(base)
        if err is not None:
            if relation == "child":
                errors.append(err)
            continue
        for name in names:
            full = os.path.join(base, name)
            if relation == "sibling" and os.path.realpath(full) == model_real:
                continue
            pairs.append((full, relation))
    model_name = os.path.basename(model_real).lower()

    def rank(pair: Tuple[str, str]) -> Tuple[int, str]:
        name = os.path.basename(pair[0]).lower()
        hinted = any(w in name for w in _DRAFTER_WORDS) or (model_name and model_name in name)
        return (0 if hinted else 1, pair[0])

    pairs.sort(key=rank)
    truncated = len(pairs) > MAX_DRAFTER_ENTRIES
    return pairs[:MAX_DRAFTER_ENTRIES], truncated, errors


def collect_drafters(model_path: str, *, json_cap: int = common.DEFAULT_JSON_CAP) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """Drafter configs in sub-directories of the model dir and in its sibling directories."""
    try:
        return _collect_drafters(model_path, json_cap)
    except Exception as exc:
        return [], [_err("internal-error", "drafter scan: %s: %s" % (type(exc).__name__, exc), str(model_path))]


def _collect_drafters(model_path: str, json_cap: int) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    _status, err = check_model_dir(model_path)
    if err is not None:
        return [], []  # collect_files reports the model path itself
    cap = min(json_cap, DRAFTER_JSON_CAP)
    pairs, truncated, errors = _drafter_candidates(model_path)
    found = []
    for path, relation in pairs:
        cfg_path = os.path.join(path, "config.json")
        if not os.path.isdir(path) or not os.path.isfile(cfg_path):
            continue
        # Other models' broken configs beside ours are not our errors: skipped quietly.
        config, err = common.read_json_capped(cfg_path, cap)
        signals = drafter_signals(config) if err is None else []
        if signals:
            found.append({"path": path, "relation": relation, "matched": signals,
                          "config": common.json_safe(config)})
    if truncated:
        errors.append(_err("scan-truncated", "more than %d directories beside %s: the drafter scan looked at "
                           "the first %d" % (MAX_DRAFTER_ENTRIES, model_path, MAX_DRAFTER_ENTRIES), model_path))
    return found, errors
