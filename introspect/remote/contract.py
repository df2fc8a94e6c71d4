"""The wire contract, written down once: protocol, frames, shapes, shared tables, defaults.

Both sides import this module: the controller (``introspect.*``) and the remote
side, which ships it with the other remote modules. It therefore stays standard
library only and Python 3.8 compatible (``typing`` spellings, no ``|`` unions at
run time). Defaults live here and nowhere else.
"""

from __future__ import annotations

import posixpath
from typing import Any, Dict, List, Optional, TypedDict

PROTOCOL = 1
BEGIN = b"\n<<<INTROSPECT:BEGIN>>>\n"
END = b"\n<<<INTROSPECT:END>>>\n"
RAW_SCHEMA = "introspect.raw/v1"

# Caps and default timeouts, shared by the CLI flags and the remote readers.
DEFAULT_JSON_CAP = 16 * 1024 * 1024  # bytes; bigger JSON files are refused, not read
DEFAULT_MAX_HEADER = 100 * 1024 * 1024  # bytes of one safetensors header
DEFAULT_FILES_TIMEOUT = 60.0  # seconds for the stdlib file probes
DEFAULT_TOKENIZER_TIMEOUT = 120.0  # seconds for the isolated tokenizer load

# Keys under which wrapper configs (VLMs, omni models) keep the text model's config.
WRAPPER_TEXT_CONFIG_KEYS = ("text_config", "llm_config", "language_config", "language_model_config",
                            "thinker_config", "text_model")

# Import name -> the distribution pip installs, where the two differ (or where the
# import name alone is ambiguous). The one table every ``fix:`` line is written from.
MODULE_DISTRIBUTIONS = {
    "google.protobuf": "protobuf", "google": "protobuf", "yaml": "pyyaml", "PIL": "pillow",
    "cv2": "opencv-python", "sklearn": "scikit-learn", "skimage": "scikit-image", "bs4": "beautifulsoup4",
    "attr": "attrs", "dateutil": "python-dateutil", "Crypto": "pycryptodome", "OpenSSL": "pyopenssl",
    "magic": "python-magic", "dotenv": "python-dotenv", "jwt": "pyjwt", "serial": "pyserial", "zmq": "pyzmq",
    "git": "gitpython", "fitz": "pymupdf", "docx": "python-docx", "flash_attn": "flash-attn",
    "vllm_flash_attn": "vllm-flash-attn", "mistral_common": "mistral-common",
    "compressed_tensors": "compressed-tensors", "qwen_vl_utils": "qwen-vl-utils", "jinja": "jinja2",
    "Jinja2": "jinja2", "SentencePiece": "sentencepiece",
}


def distribution_for(module: str) -> str:
    """The pip distribution that provides ``module`` (a dotted import name)."""
    top = module.split(".")[0]
    return MODULE_DISTRIBUTIONS.get(module) or MODULE_DISTRIBUTIONS.get(top) or top


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
    """One error, the shape every task reports: {probe?, type, message, path?, hint?, stage?}."""

    probe: str
    type: str
    message: str
    path: str
    hint: Optional[str]
    stage: Optional[str]


def error_record(kind: str, message: str, path: Optional[str] = None,
                 probe: Optional[str] = None) -> ErrorRecord:
    """The one error-record builder."""
    out = ErrorRecord(type=kind, message=message)
    if path is not None:
        out["path"] = path
    if probe is not None:
        out["probe"] = probe
    return out


class TargetBlock(TypedDict, total=False):
    """The ``target`` block of raw facts and profiles: where, under which interpreter, what."""

    scheme: str
    host: Optional[str]
    port: Optional[int]
    user: Optional[str]
    python: str
    venv: Optional[str]
    model_path: str


class RawFacts(TypedDict, total=False):
    """``introspect.raw/v1``: what ``probe --save-raw`` writes and ``introspect profile`` reads.

    Sections are filled by the remote tasks (``files`` ... ``fingerprint`` by the model
    task, ``tokenizer_probe`` by the isolated tokenizer task); the rest by the controller.
    """

    schema: str
    target: TargetBlock
    errors: List[ErrorRecord]
    fatal: Optional[Dict[str, Any]]
    options: Dict[str, Any]
    python: Dict[str, Any]
    files: Dict[str, Any]
    tokenizer_files: Dict[str, Any]
    safetensors: Optional[Dict[str, Any]]
    drafters: Optional[List[Dict[str, Any]]]
    environment: Dict[str, Any]
    hashes: Optional[Dict[str, Any]]
    fingerprint: Optional[Dict[str, Any]]
    tokenizer_probe: Optional[Dict[str, Any]]
    timings: Dict[str, Any]
    cache: Optional[Dict[str, Any]]
    resolved: Optional[Dict[str, Any]]
