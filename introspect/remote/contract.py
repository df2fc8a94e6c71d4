"""The wire contract, written down once: protocol, frames, shared tables, defaults, error records.

Both sides import this module: the controller (``introspect.*``) and the remote
side, which ships it with the other remote modules. It therefore stays standard
library only and Python 3.8 compatible (``typing`` spellings, no ``|`` unions at
run time). Defaults live here and nowhere else. The shapes of every task's
request and reply are in :mod:`introspect.remote.wire`, those of the raw-facts
sections in :mod:`introspect.remote.sections`; both are re-exported here, imported
on first use (see ``__getattr__`` below).
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Any, Dict, List, Optional, TypedDict, cast

PROTOCOL = 1
BEGIN = b"\n<<<INTROSPECT:BEGIN>>>\n"
END = b"\n<<<INTROSPECT:END>>>\n"
RAW_SCHEMA = "introspect.raw/v1"

# Caps and default timeouts, shared by the CLI flags and the remote readers.
DEFAULT_JSON_CAP = 16 * 1024 * 1024  # bytes; bigger JSON files are refused, not read
DEFAULT_MAX_HEADER = 100 * 1024 * 1024  # bytes of one safetensors header
DEFAULT_FILES_TIMEOUT = 60.0  # seconds for the stdlib file probes
DEFAULT_TOKENIZER_TIMEOUT = 120.0  # seconds for the isolated tokenizer load
DEFAULT_MODEL_CODE_TIMEOUT = 180.0  # seconds for the isolated meta-device build of the model's code
# Address space of an isolated task (0: none). An import of transformers takes ~0.2 GiB of it,
# one of a CUDA build of torch several GiB (its libraries are mapped); a real tokenizer load
# stays under 2 GiB. See remote/limits.py for what it bounds and which task runs without it.
DEFAULT_MEMORY_LIMIT = 16 * 1024 * 1024 * 1024
# Files that are summarised on the host and never shipped get caps of their own:
# tokenizer.json reaches 33 MB (Gemma-3), the index of a 1T checkpoint ~25 MB.
TOKENIZER_JSON_CAP = 64 * 1024 * 1024
INDEX_CAP = 256 * 1024 * 1024
TIKTOKEN_CAP = 256 * 1024 * 1024  # a real tiktoken file is 2-4 MB; streamed, not held
DRAFTER_JSON_CAP = 4 * 1024 * 1024  # drafter configs are small; never read 200 x 16 MiB
# `introspect models`: the walk of the host's model roots.
DEFAULT_DISCOVER_DEPTH = 4
DEFAULT_DISCOVER_DEADLINE = 60.0  # seconds
DEFAULT_DISCOVER_SHIP_CAP = 256 * 1024  # raw config.json shipped back when at most this big
DEFAULT_DISCOVER_MAX_MODELS = 2000
# `introspect preflight`.
DEFAULT_ENDPOINT_TIMEOUT = 30.0  # seconds per HTTP request to the serving endpoint
DEFAULT_DECODE_BUDGET = 20.0  # seconds for decoding every id once
DEFAULT_PIPELINE_PACKAGES = ("transformers", "jinja2")
# `introspect health`. The health task is self-contained (it runs alone as a script),
# so it keeps a copy of this value; tests/health checks that the two agree.
DEFAULT_IMPORT_TIMEOUT = 60.0  # seconds per import, in a fresh interpreter

# The sections of the model task, in the order they are reported (fingerprint comes with each reply).
MODEL_SECTIONS = ("files", "tokenizer_files", "safetensors", "drafters", "environment", "hashes", "engines", "gpus")

# Keys under which wrapper configs (VLMs, omni models) keep the text model's config.
WRAPPER_TEXT_CONFIG_KEYS = ("text_config", "llm_config", "language_config", "language_model_config",
                            "thinker_config", "text_model")

# Import name -> the distribution pip installs, for the modules model code commonly
# imports; rows where the two names are the same say that the name is known to be
# right (``distribution_source: "static-map"`` in the environment facts). The one
# table every ``fix:`` line is written from.
MODULE_DISTRIBUTIONS = {
    "google.protobuf": "protobuf", "google": "protobuf", "yaml": "pyyaml", "PIL": "pillow",
    "cv2": "opencv-python", "sklearn": "scikit-learn", "skimage": "scikit-image", "bs4": "beautifulsoup4",
    "attr": "attrs", "dateutil": "python-dateutil", "Crypto": "pycryptodome", "OpenSSL": "pyopenssl",
    "magic": "python-magic", "dotenv": "python-dotenv", "jwt": "pyjwt", "serial": "pyserial", "zmq": "pyzmq",
    "git": "gitpython", "fitz": "pymupdf", "docx": "python-docx", "flash_attn": "flash-attn",
    "vllm_flash_attn": "vllm-flash-attn", "mistral_common": "mistral-common",
    "compressed_tensors": "compressed-tensors", "qwen_vl_utils": "qwen-vl-utils", "jinja": "jinja2",
    "Jinja2": "jinja2", "SentencePiece": "sentencepiece",
    # Same name on both sides.
    "jinja2": "jinja2", "sentencepiece": "sentencepiece", "tiktoken": "tiktoken", "blobfile": "blobfile",
    "einops": "einops", "timm": "timm", "torchvision": "torchvision", "huggingface_hub": "huggingface_hub",
    "safetensors": "safetensors", "tokenizers": "tokenizers", "transformers": "transformers", "torch": "torch",
    "numpy": "numpy", "regex": "regex", "accelerate": "accelerate", "tqdm": "tqdm", "requests": "requests",
    "decord": "decord", "av": "av", "librosa": "librosa", "soundfile": "soundfile", "pydantic": "pydantic",
    "tensorflow": "tensorflow", "jax": "jax", "triton": "triton", "xformers": "xformers",
    "deepspeed": "deepspeed", "peft": "peft", "bitsandbytes": "bitsandbytes",
}
# Distribution -> the module to look for, where the distribution's name does not import.
DISTRIBUTION_MODULES = {"protobuf": "google.protobuf", "pyyaml": "yaml", "pillow": "PIL"}
# Distribution -> its name as PyPI spells it, where that is not all lower case. pip
# does not care; the environment facts report this spelling.
DISTRIBUTION_SPELLING = {"pyyaml": "PyYAML", "pillow": "Pillow", "jinja2": "Jinja2", "pyopenssl": "pyOpenSSL",
                         "pyjwt": "PyJWT", "gitpython": "GitPython", "pymupdf": "PyMuPDF"}


def distribution_for(module: str) -> str:
    """The pip distribution that provides ``module`` (a dotted import name)."""
    top = module.split(".")[0]
    return MODULE_DISTRIBUTIONS.get(module) or MODULE_DISTRIBUTIONS.get(top) or top


def spelled(distribution: str) -> str:
    """A distribution's name as PyPI spells it (``pyyaml`` -> ``PyYAML``)."""
    return DISTRIBUTION_SPELLING.get(distribution, distribution)


def module_for(distribution: str) -> str:
    """The module whose presence shows ``distribution`` is installed."""
    return DISTRIBUTION_MODULES.get(distribution, distribution)


# A JSON object that comes from outside, unparsed: a config.json's or tokenizer_config.json's
# contents, a remote code's kwargs. The one spelling of that boundary; a shape of our own is a
# TypedDict (sections.py, wire.py) or a document model, never this.
JSONObject = Dict[str, Any]


def as_dict(value: Any) -> Dict[str, Any]:
    """``value`` when it is a dict, else ``{}``: raw facts may be malformed or missing."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> List[Any]:
    """``value`` when it is a list, else ``[]``."""
    return value if isinstance(value, list) else []


def venv_python(venv: str) -> str:
    """The interpreter of a venv on a POSIX host: ``<venv>/bin/python``."""
    return posixpath.join(venv.rstrip("/") or "/", "bin", "python")


def interpreter(python: Optional[str], venv: Optional[str]) -> str:
    """The interpreter to run: ``<venv>/bin/python`` wins over ``--python``; default python3."""
    if venv:
        return venv_python(venv)
    return python or "python3"


class ErrorRecord(TypedDict, total=False):
    """One error, the shape every task reports: {probe?, type, message, path?, hint?, stage?}.

    ``traceback`` (last lines) comes with a task that crashed.
    """

    probe: str
    type: str
    message: str
    path: str
    hint: Optional[str]
    stage: Optional[str]
    traceback: List[str]


def error_record(kind: str, message: str, path: Optional[str] = None,
                 probe: Optional[str] = None) -> ErrorRecord:
    """The one error-record builder."""
    out = ErrorRecord(type=kind, message=message)
    if path is not None:
        out["path"] = path
    if probe is not None:
        out["probe"] = probe
    return out


def tag(record: ErrorRecord, probe: str) -> ErrorRecord:
    """A copy of an error record (e.g. from a shared reader) naming the probe that reports it."""
    out = cast(ErrorRecord, dict(record))
    out["probe"] = probe
    return out


class TargetBlock(TypedDict, total=False):
    """The ``target`` block of raw facts and profiles: where, under which interpreter, what."""

    scheme: str
    host: Optional[str]
    port: Optional[int]
    user: Optional[str]
    container: Optional[str]  # docker/podman/lxc/kubectl/pct targets only
    python: str
    venv: Optional[str]
    model_path: str


# The shapes (the TypedDicts of sections.py, wire.py and wire_preflight.py), re-exported so that
# both sides name them from one place, are imported on their first use (PEP 562 module
# __getattr__, https://peps.python.org/pep-0562/), not with this module: a task that names none of
# them at run time (health) runs without them, and transport/shipping.py does not ship them to it
# (it reads which names each module takes from here). A new shape is added to its module's
# __all__ only.
SHAPE_MODULES = ("sections", "wire", "wire_preflight")

if TYPE_CHECKING:
    from .sections import *  # noqa: F403
    from .wire import *  # noqa: F403
    from .wire_preflight import *  # noqa: F403


def __getattr__(name: str) -> Any:
    if name.startswith("__"):  # the import system's own probes (__path__ on every `from contract import`)
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    from . import sections, wire, wire_preflight

    for shapes in (sections, wire, wire_preflight):
        if name in shapes.__all__:
            value = getattr(shapes, name)
            globals()[name] = value  # looked up here once
            return value
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


__all__ = [
    "PROTOCOL", "BEGIN", "END", "RAW_SCHEMA", "DEFAULT_JSON_CAP", "DEFAULT_MAX_HEADER", "DEFAULT_FILES_TIMEOUT",
    "DEFAULT_TOKENIZER_TIMEOUT", "DEFAULT_MODEL_CODE_TIMEOUT", "DEFAULT_MEMORY_LIMIT", "TOKENIZER_JSON_CAP", "INDEX_CAP", "TIKTOKEN_CAP", "DRAFTER_JSON_CAP",
    "DEFAULT_DISCOVER_DEPTH", "DEFAULT_DISCOVER_DEADLINE", "DEFAULT_DISCOVER_SHIP_CAP",
    "DEFAULT_DISCOVER_MAX_MODELS", "DEFAULT_ENDPOINT_TIMEOUT", "DEFAULT_DECODE_BUDGET",
    "DEFAULT_PIPELINE_PACKAGES", "DEFAULT_IMPORT_TIMEOUT", "MODEL_SECTIONS", "WRAPPER_TEXT_CONFIG_KEYS", "MODULE_DISTRIBUTIONS",
    "DISTRIBUTION_MODULES", "DISTRIBUTION_SPELLING", "distribution_for", "spelled", "module_for", "as_dict",
    "as_list", "JSONObject", "venv_python", "interpreter", "ErrorRecord", "error_record", "tag", "TargetBlock", "SHAPE_MODULES",
]
