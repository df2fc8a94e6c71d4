"""The model's own Python code: auto_map class references, and what each file imports.

Runs on the host: standard library only, Python 3.8+. The one parser of class
references (``"[repo--]module.Class"``) and of imports (an AST walk: absolute,
guarded by ``try``, and relative), used by the files section, the tokenizer files'
remote-code facts and preflight's package check. Nothing here raises.
"""

from __future__ import annotations

import ast
import hashlib
import os
import sys
from typing import Any, Dict, List, NamedTuple, Optional, Set, Tuple, Union

from ... import confine
from ...contract import CustomCodeEntry, ErrorRecord, error_record
from ...readers import open_regular, os_error
from ...sections import ShortError

PROBE = "files"
MAX_CODE_FILES = 64       # custom code files followed (auto_map + relative imports)
MAX_AUTO_MAP_DEPTH = 3    # config nesting searched for auto_map (text_config, vision_config...)

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

Relative = Tuple[int, Optional[str], List[str]]  # (level, module, imported names)


class ClassReference(NamedTuple):
    repo: Optional[str]  # "org/name" when the code comes from another hub repo
    module: str  # dotted, relative to the model dir
    name: str  # the class


def is_stdlib(name: str) -> bool:
    """True for a top-level module name of the standard library (any Python 3.8+)."""
    if name in STDLIB_MODULES or name in sys.builtin_module_names:
        return True
    names = getattr(sys, "stdlib_module_names", None)  # 3.10+
    return names is not None and name in names


def _err(kind: str, message: str, path: Optional[str] = None) -> ErrorRecord:
    return error_record(kind, message, path, probe=PROBE)


# --------------------------------------------------------------------------- class references


def class_reference(ref: Any) -> Optional[ClassReference]:
    """``"[repo--]module.Class"``, parsed; None when it is not a usable reference.

    One ``--`` separates the repo, as transformers' get_class_from_dynamic_module
    splits it (https://github.com/huggingface/transformers/blob/main/src/transformers/dynamic_module_utils.py);
    a reference with more is one transformers cannot load either.
    """
    if not isinstance(ref, str) or not ref.strip():
        return None
    ref = ref.strip()
    repo = None
    if "--" in ref:
        repo, ref = ref.split("--", 1)
    if "." not in ref:
        return None
    module, name = ref.rsplit(".", 1)
    # Only identifier components: a reference must never name a path outside the model dir.
    if not all(part.isidentifier() for part in module.split(".")):
        return None
    return ClassReference(repo or None, module, name)


def parse_class_reference(ref: Any) -> Optional[Tuple[Optional[str], str]]:
    """``"[repo--]module.Class"`` -> (repo, module), or None when it is not a usable reference."""
    parsed = class_reference(ref)
    return None if parsed is None else (parsed.repo, parsed.module)


def module_file(module: str) -> str:
    """The file of a dotted module, relative to the model dir."""
    return "/".join(module.split(".")) + ".py"


def auto_map_references(value: Any, label: str, depth: int = 0) -> List[Tuple[str, str]]:
    """(label, class reference) for every auto_map entry in a config, nested configs included."""
    out: List[Tuple[str, str]] = []
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


# --------------------------------------------------------------------------- imports


def scan_imports(source: Union[bytes, str]) -> Dict[str, Any]:
    """Imports of one Python source: never raises; syntax errors come back in "error".

    ``{"imports": [top-level names], "optional_imports": [only inside try:],
       "relative": [(level, module, names)] in source order, "error": null | {type, message}}``
    """
    result: Dict[str, Any] = {"imports": [], "optional_imports": [], "relative": [], "error": None}
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        result["error"] = {"type": "syntax-error", "message": "line %s: %s" % (exc.lineno, exc.msg)}
        return result
    except (ValueError, RecursionError, MemoryError, TypeError) as exc:
        result["error"] = {"type": "unparsable", "message": "%s: %s" % (type(exc).__name__, exc)}
        return result
    required: Set[str] = set()
    optional: Set[str] = set()
    relative: List[Tuple[int, int, Optional[str], List[str]]] = []
    _walk_imports(tree, required, optional, relative)
    result["imports"] = sorted(required)
    result["optional_imports"] = sorted(optional - required)
    relative.sort(key=lambda item: item[0])  # source order (the walk is a stack)
    result["relative"] = [item[1:] for item in relative]
    return result


def _walk_imports(tree: ast.AST, required: Set[str], optional: Set[str],
                  relative: List[Tuple[int, int, Optional[str], List[str]]]) -> None:
    # Iterative, so deeply nested code cannot hit the recursion limit. Imports inside
    # a try body are optional: transformers' check_imports skips them too.
    stack: List[Tuple[ast.AST, bool]] = [(tree, False)]
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
            for other in list(current.handlers) + list(current.orelse) + list(current.finalbody):
                stack.append((other, guarded))
            continue
        for node in ast.iter_child_nodes(current):
            stack.append((node, guarded))


def resolve_relative(root: str, rel_file: str, level: int, module: Optional[str],
                     names: List[str]) -> List[Tuple[str, Optional[str]]]:
    """(written form, file relative to root or None) for one relative import."""
    base = os.path.dirname(rel_file)
    for _ in range(level - 1):
        if not base:
            return []  # climbs above the model dir: not followed
        base = os.path.dirname(base)
    dots = "." * level
    out: List[Tuple[str, Optional[str]]] = []
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


def relative_import_files(root: str, rel_file: str, source: Union[bytes, str]) -> List[str]:
    """Files (relative to root, normalised) that one source's relative imports name, in order."""
    follow: List[str] = []
    for level, module, names in scan_imports(source)["relative"]:
        for _written, target in resolve_relative(root, rel_file, level, module, names):
            if target is not None:
                follow.append(os.path.normpath(target))
    return follow


# --------------------------------------------------------------------------- files


def _read_code(path: str, cap: int) -> Tuple[Optional[bytes], Optional[ErrorRecord]]:
    try:
        confine.check(path)  # before the size: a link out's target is not even sized
        size = os.path.getsize(path)
        if size > cap:
            return None, error_record("too-large", "%s is %d bytes, above the %d-byte cap" % (path, size, cap),
                                      path)
        with open_regular(path) as fh:
            return fh.read(cap + 1), None
    except OSError as exc:
        return None, os_error(exc, path)


def _entry(rel_file: str, repo: Optional[str] = None) -> CustomCodeEntry:
    module = rel_file[:-3].replace("/", ".") if rel_file.endswith(".py") else rel_file
    return CustomCodeEntry(file=rel_file, module=module, sha256=None, size=None, imports=[], optional_imports=[],
                           local_imports=[], relative_imports=[], referenced_by=[], repo=repo, error=None)


def describe_code_file(root: str, rel_file: str, local_modules: Set[str],
                       cap: int) -> Tuple[CustomCodeEntry, List[str]]:
    """One custom_code entry (without referenced_by) and the relative imports to follow."""
    entry = _entry(rel_file)
    data, err = _read_code(os.path.join(root, rel_file), cap)
    if data is None:
        short = ShortError(type=str((err or {}).get("type")), message=str((err or {}).get("message")))
        if short["type"] == "not-found":  # distinct from a missing model path (exit 2)
            short["type"] = "missing-custom-code"
        entry["error"] = short
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
        for written, target in resolve_relative(root, rel_file, level, module, names):
            if written not in entry["relative_imports"]:
                entry["relative_imports"].append(written)
            if target is not None:
                follow.append(os.path.normpath(target))
    return entry, follow


def collect_custom_code(root: str, refs: List[Tuple[str, str]], local_modules: Set[str],
                        cap: int) -> Tuple[List[CustomCodeEntry], bool, List[ErrorRecord]]:
    """Every auto_map module and, transitively, its relative imports."""
    entries: Dict[str, CustomCodeEntry] = {}
    errors: List[ErrorRecord] = []
    queue: List[Tuple[str, str, Optional[str]]] = []  # (file, referrer, repo)
    for label, ref in refs:
        parsed = class_reference(ref)
        if parsed is not None:
            queue.append((module_file(parsed.module), label, parsed.repo))
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
            entries[rel_file] = _remote_entry(rel_file, referrer, repo)
            errors.append(_err("remote-repo", "custom code %s (from %s) comes from hub repo %s, not from the "
                               "model dir; offline loading needs it cached" % (rel_file, referrer, repo), full))
            continue
        entry, follow = describe_code_file(root, rel_file, local_modules, cap)
        entry["repo"] = repo
        _add_referrer(entry, referrer)
        entries[rel_file] = entry
        problem = entry["error"]
        if problem is not None:
            errors.append(_err(problem["type"], "custom code %s (from %s): %s"
                               % (rel_file, referrer, problem["message"]), full))
        for target in follow:
            queue.append((target, rel_file, None))
    return [entries[k] for k in sorted(entries)], truncated, errors


def _remote_entry(rel_file: str, referrer: str, repo: str) -> CustomCodeEntry:
    # "org/name--module.Class": transformers fetches this code from another hub repo.
    entry = _entry(rel_file, repo)
    entry["referenced_by"] = [referrer]
    entry["error"] = ShortError(type="remote-repo",
                                message="code comes from hub repo %s, not from the model dir" % repo)
    return entry


def _add_referrer(entry: CustomCodeEntry, referrer: str) -> None:
    if referrer not in entry["referenced_by"]:
        entry["referenced_by"].append(referrer)


def local_module_names(names: List[str]) -> Set[str]:
    """Modules importable by absolute name from the model dir (its top-level ``*.py``)."""
    return set(n[:-3] for n in names if n.endswith(".py") and n[:-3].isidentifier())


def written_parts(ref: str) -> Tuple[Optional[str], str]:
    """(module, class) as a reference is written, usable or not: for reporting, never for following."""
    module, _, name = ref.split("--", 1)[-1].rpartition(".")
    return module or None, name


def referenced_class(ref: str) -> str:
    """The class a reference names, whether or not its module is usable."""
    parsed = class_reference(ref)
    return parsed.name if parsed is not None else written_parts(ref)[1]
