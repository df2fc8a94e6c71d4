"""Section ``environment``: interpreter and venv facts, without importing any third-party package.

Runs on the host under the target interpreter: standard library only, Python 3.8+.
Package versions come from ``importlib.metadata`` and module availability from
``importlib.util.find_spec`` on top-level names, so a broken or slow package
(torch, a half-installed sglang) cannot hang or crash this probe.

``collect_environment(extra_modules)`` returns::

    {
      "python_version": "3.11.7", "python_version_info": [3, 11, 7, "final", 0],
      "python_executable": "/root/venv/bin/python",     # sys.executable
      "prefix": "/root/venv", "base_prefix": "/usr", "in_venv": true,
      "implementation": "CPython", "platform": "Linux-6.8.0-x86_64-with-glibc2.35",
      "machine": "x86_64",
      "packages": {"transformers": "4.57.1", "tiktoken": null, ...},   # null: not installed
      "modules": {"tiktoken": {"available": false, "distribution": "tiktoken",
                               "distribution_source": "static-map"}},
      "missing_modules": ["tiktoken"],
      "env_vars": {"HF_HOME": "/data/hf", "HF_TOKEN": "<redacted>", ...},  # only those set
    }

``distribution`` is the installed distribution that provides an available module
(from the installed metadata; null for stdlib or unpackaged modules), or for a
missing module the name to ``pip install`` (contract's table of import name ->
distribution, else the module name itself); ``distribution_source`` says which:
"installed", "static-map", "module-name" or null.

Redaction is by name, without exceptions: any variable whose name contains
token, secret, password, passwd, passphrase, key, access, credential, auth, signature
or cookie shows "<redacted>" (so TIKTOKEN_CACHE_DIR and TOKENIZERS_PARALLELISM are
redacted too); every other value goes through the shared patterns of ``..redaction``
(a URL's userinfo up to its last ``@``, whatever characters the password holds, and
secret query parameters such as ``?token=``), so the secret never leaves the host.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import sys
from typing import Any, Dict, List, Optional, Set, Tuple

from ...contract import (
    MODULE_DISTRIBUTIONS,
    EnvironmentFacts,
    ErrorRecord,
    ModuleEntry,
    distribution_for,
    error_record,
    spelled,
)
from ...redaction import REDACTED, is_secret_name, redact_text

PROBE = "environment"

PACKAGES = ("transformers", "tokenizers", "tiktoken", "jinja2", "sentencepiece", "protobuf", "torch",
            "safetensors", "huggingface_hub", "sglang", "vllm")

# Variables worth showing: exact names and prefixes. Anything set that matches.
ENV_NAMES = ("PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV",
             "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR",
             "XDG_CACHE_HOME", "HOME", "TMPDIR", "LANG", "LC_ALL")
ENV_PREFIXES = ("HF_", "HUGGING", "TRANSFORMERS_", "TIKTOKEN_", "CUDA_", "SGLANG_", "VLLM_",
                "TORCH_", "NCCL_", "PYTORCH_", "TOKENIZERS_", "SAFETENSORS_")
MAX_ENV_VALUE = 4096
__all__ = ["REDACTED", "collect_environment", "is_secret_name", "redact_value", "relevant_env"]


def _err(kind: str, message: str) -> ErrorRecord:
    return error_record(kind, message, probe=PROBE)


def _metadata():
    try:
        import importlib.metadata as md  # 3.8+
        return md
    except ImportError:  # pragma: no cover - only pre-3.8, which the runner refuses
        return None


def package_version(name: str) -> Optional[str]:
    """Installed version of a distribution, or None. Reads metadata only, imports nothing."""
    md = _metadata()
    if md is None:
        return None
    try:
        return md.version(name)
    except Exception:  # PackageNotFoundError, or broken metadata of a half-installed package
        return None


def installed_distributions(wanted: Optional[Set[str]] = None) -> Dict[str, List[str]]:
    """Top-level import name -> distribution names, from installed metadata (only the names in
    ``wanted`` when given).

    The mapping of ``importlib.metadata.packages_distributions`` (3.10+;
    https://github.com/python/cpython/blob/v3.11.7/Lib/importlib/metadata/__init__.py#L1062):
    each distribution's top_level.txt, else the first part of each path in its RECORD. Built
    here from the files' text, for every Python: the stdlib's version makes a pathlib object of
    every RECORD line of every distribution (a second of CPU in a venv with torch and an engine,
    on every probe), where a string split of the lines gives the same names.
    """
    md = _metadata()
    if md is None:
        return {}
    out: Dict[str, List[str]] = {}
    try:
        dists = list(md.distributions())
    except Exception:
        return out
    for dist in dists:
        try:
            tops = _top_level_names(dist)
            if wanted is not None:
                tops = [top for top in tops if top in wanted]
            name = dist.metadata["Name"] if tops else None
        except Exception:
            continue
        for top in tops:
            out.setdefault(top, [])
            if name and name not in out[top]:
                out[top].append(name)
    return out


def _top_level_names(dist: Any) -> List[str]:
    text = dist.read_text("top_level.txt")
    if text:
        return [line.strip() for line in text.splitlines() if line.strip()]
    names = set()
    for line in (dist.read_text("RECORD") or dist.read_text("installed-files.txt") or "").splitlines():
        # RECORD rows are CSV "path,hash,size"; a path with a comma is quoted (PEP 376).
        path = line.rsplit(",", 2)[0].strip('"') if line.count(",") >= 2 else line
        # Python files only, as the stdlib infers it (a __pycache__/ or .dist-info/ path names
        # no module): the first directory, or a top-level module's stem.
        parts = path.replace("\\", "/").split("/")
        if parts[-1].endswith(".py") and parts[0] not in ("..", ""):
            names.add(parts[0] if len(parts) > 1 else parts[0][:-3])
    return sorted(n for n in names if n.isidentifier())


def module_available(name: str) -> Tuple[bool, Optional[str]]:
    """Whether a top-level module can be imported, without importing it (and an error text)."""
    if not isinstance(name, str) or not name.isidentifier():
        return False, "not a top-level module name: %r" % (name,)
    try:
        return importlib.util.find_spec(name) is not None, None
    except Exception as exc:  # a broken finder or a module shadowing in sys.modules
        return False, "%s: %s" % (type(exc).__name__, exc)


def describe_modules(names: List[str]) -> Tuple[Dict[str, ModuleEntry], List[str], List[ErrorRecord]]:
    """Per module: importable here, and which distribution provides it (or would)."""
    modules: Dict[str, ModuleEntry] = {}
    missing = []
    errors = []
    installed = None  # built lazily, for these names only: walking every RECORD costs time
    wanted = set(n for n in names if isinstance(n, str))
    for name in sorted(set(n for n in names if isinstance(n, str))):
        available, problem = module_available(name)
        entry = ModuleEntry(available=available, distribution=None, distribution_source=None)
        if problem is not None:
            entry["error"] = problem
            errors.append(_err("module-check-failed", "%s: %s" % (name, problem)))
        if available:
            if installed is None:
                installed = installed_distributions(wanted)
            dists = installed.get(name) or []
            if dists:
                entry["distribution"], entry["distribution_source"] = dists[0], "installed"
        if not available:  # name what to pip install
            entry["distribution"] = spelled(distribution_for(name))
            entry["distribution_source"] = "static-map" if name in MODULE_DISTRIBUTIONS else "module-name"
        if not available:
            missing.append(name)
        modules[name] = entry
    return modules, missing, errors


def redact_value(value: str) -> str:
    # user:password@ inside URLs (HF_ENDPOINT, proxies) and ?token= are secrets whatever the
    # name. Masked before the cap, so a cut cannot leave half a secret unmatched.
    value = redact_text(value)
    if len(value) > MAX_ENV_VALUE:
        value = value[:MAX_ENV_VALUE] + "...(truncated)"
    return value


def relevant_env(environ: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The set, relevant variables; secrets by name replaced with <redacted>."""
    env = os.environ if environ is None else environ
    out = {}
    for name in sorted(env):
        upper = name.upper()
        if upper not in ENV_NAMES and not upper.startswith(ENV_PREFIXES):
            continue
        out[name] = REDACTED if is_secret_name(name) else redact_value(str(env[name]))
    return out


def _platform_facts() -> Dict[str, Any]:
    facts: Dict[str, Any] = {"implementation": None, "platform": None, "machine": None}
    try:
        facts["implementation"] = platform.python_implementation()
        facts["machine"] = platform.machine()
        facts["platform"] = platform.platform()
    except Exception:
        pass
    return facts


def collect_environment(extra_modules: List[str]) -> Tuple[EnvironmentFacts, List[ErrorRecord]]:
    """Facts about this interpreter and its packages. Never raises."""
    errors: List[ErrorRecord] = []
    vi = sys.version_info
    facts: EnvironmentFacts = {
        "python_version": "%d.%d.%d" % (vi[0], vi[1], vi[2]),
        "python_version_info": [vi[0], vi[1], vi[2], vi[3], vi[4]],
        "python_executable": sys.executable,
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
        # virtualenv < 20 sets sys.real_prefix instead of base_prefix.
        "in_venv": sys.prefix != getattr(sys, "base_prefix", sys.prefix) or hasattr(sys, "real_prefix"),
        "packages": {}, "modules": {}, "missing_modules": [], "env_vars": {},
    }
    found = _platform_facts()
    facts["implementation"], facts["platform"], facts["machine"] = (
        found["implementation"], found["platform"], found["machine"])
    try:
        facts["packages"] = dict((name, package_version(name)) for name in PACKAGES)
        modules, missing, errs = describe_modules(list(extra_modules or []))
        facts["modules"], facts["missing_modules"] = modules, missing
        errors.extend(errs)
    except Exception as exc:
        errors.append(_err("internal-error", "environment probe: %s: %s" % (type(exc).__name__, exc)))
    try:
        facts["env_vars"] = relevant_env()
    except Exception as exc:
        errors.append(_err("internal-error", "environment variables: %s: %s" % (type(exc).__name__, exc)))
    return facts, errors
