"""Did ``AutoTokenizer.from_pretrained(dir, trust_remote_code=...)`` itself load, in that venv?

The remote tokenizer task (introspect/remote/tasks/tokenizer.py) sets ``loaded`` also when
transformers failed and the layout's own library (tiktoken, sentencepiece, mistral-common)
loaded the files instead; it then records that library in ``source`` and transformers'
error in ``transformers_error``. A data-generation pipeline calls AutoTokenizer, so every
verdict about the pipeline (the profile's exit code, ``health``, the history) judges this.

The profile states it in two blocks of the tokenizer section (pure, from the raw result):

* ``autotokenizer``: ``ok`` (null when no load ran, with ``reason``), the exception's
  ``type``, ``cause`` (the remote classes of introspect/remote/facts/tokenizer/tokenizer_load.py),
  ``missing_packages``, ``message`` (at most :data:`MESSAGE_CAP` characters, ``message_chars``
  its whole length, ``message_truncated``) and ``fix`` (a command, or a ``# comment``);
* ``native``, only when the layout's library loaded it: ``loaded_by``, ``read`` (the files it
  read), ``partial`` (facts it gave only in part: specials defined in code, ``len``) and
  ``unknown`` (facts the library has no notion of and did not give; the section takes those
  from the files). ``read`` / ``partial`` are null for raw facts of a probe that did not record them.

A load can succeed and still be no tokenizer: AutoTokenizer builds a *stand-in* in a directory
without tokenizer files (``stand_in_reason``, in autotokenizer_verdict.py with the other pure
verdicts). The block then says ``stand_in: true`` with ``stand_in_reason``; ``ok`` stays what
AutoTokenizer did. ``health``, ``preflight`` and the
profile judge it with the same function.
"""

from __future__ import annotations

from typing import Any

from introspect.analysis.findings import Finding, Severity, pip_fix
from introspect.analysis.result import TargetSection
from introspect.analysis.tokenizer.autotokenizer_verdict import (
    NAMED,
    autotokenizer_error,
    autotokenizer_loaded,
)
from introspect.analysis.tokenizer.shapes import NativeBlock, shaped
from introspect.analysis.tokenizer.tokenizer_limits import _probe_command, load_limit_finding
from introspect.documents.profile_tokenizer import AutoTokenizer, TokenizerError
from introspect.remote.contract import TokenizerError as RawTokenizerError
from introspect.remote.contract import TokenizerProbe

# The remote side cuts a message at the same length (remote/facts/tokenizer/tokenizer_load.py MAX_MESSAGE).
MESSAGE_CAP = 2000
NOT_RUN = "no tokenizer load ran (probe --no-tokenizer), or its result did not come back"
# Facts a layout library has no notion of: a null from it is "unknown", not "none". tiktoken.Encoding
# takes a name, a split pattern, ranks and specials, nothing else
# (https://github.com/openai/tiktoken/blob/0.14.0/tiktoken/core.py#L17-L24): its named tokens are
# known only where the model's code names them; sentencepiece and mistral_common's Tekkenizer name
# bos/eos/pad/unk ids but no mask token
# (https://github.com/mistralai/mistral-common/blob/v1.13.1/src/mistral_common/tokens/tokenizers/tekken.py#L436-L454);
# none of them, nor a bare tokenizers.Tokenizer, carries the chat template (transformers reads it
# from the configs and template files).
NATIVE_UNKNOWN: dict[str, tuple[str, ...]] = {
    "tiktoken": ("bos", "eos", "pad", "unk", "mask", "chat_template"),
    "sentencepiece": ("mask", "chat_template"),
    "mistral_common": ("mask", "chat_template"),
    "tokenizers": ("chat_template",),
}
UNRECORDED = "this probe did not record which files the library read or what it gave only in part (an older introspect)"
# The stand-in test, AutoTokenizer's verdict and the vocabulary file names are in autotokenizer_verdict.py.


def error_summary(error: object) -> TokenizerError | None:
    """The section's form of a classified error (``tokenizer.error``, a template's ``sample_error``)."""
    if not isinstance(error, dict):
        return None
    return TokenizerError(type=error.get("type"), message=error.get("message"),
                          missing_packages=list(error.get("missing_packages") or []), cause=error.get("cause"))


def autotokenizer_block(probe: TokenizerProbe | None, target: TargetSection, remote_code_allowed: bool,
                        stand_in: str | None = None) -> AutoTokenizer:
    """The ``tokenizer.autotokenizer`` block (see the module docstring); ``stand_in``: the
    reason from :func:`stand_in_reason` when the tokenizer it loaded is one."""
    probe = probe if isinstance(probe, dict) else None
    ok = autotokenizer_loaded(probe)
    error = autotokenizer_error(probe) if ok is False else shaped(None, RawTokenizerError)
    message = error.get("message") if isinstance(error.get("message"), str) else None
    chars, truncated = _message_size(message, error.get("message_chars"))
    return AutoTokenizer(
        ok=ok,
        reason=NOT_RUN if ok is None else None,
        trust_remote_code=remote_code_allowed,
        class_=probe.get("class") if ok and probe else None,
        transformers_version=probe.get("transformers_version") if probe else None,
        type=error.get("type"),
        cause=error.get("cause"),
        missing_packages=_packages(error.get("missing_packages")),
        message=message if message is None or len(message) <= MESSAGE_CAP else message[: MESSAGE_CAP - 3] + "...",
        message_chars=chars,
        message_truncated=truncated,
        fix=autotokenizer_fix(error_summary(error), target, native_block(probe)) if ok is False else None,
        # Judged only where AutoTokenizer loaded something.
        stand_in=stand_in is not None if ok else None,
        stand_in_reason=stand_in,
    )


def _message_size(message: str | None, recorded: Any) -> tuple[int | None, bool]:
    """(the whole message's length, whether the block shows less of it)."""
    if message is None:
        return None, False
    if isinstance(recorded, int) and not isinstance(recorded, bool):
        return recorded, recorded > min(len(message), MESSAGE_CAP)
    if len(message) >= MESSAGE_CAP and message.endswith("..."):
        return None, True  # an older probe cut it at MESSAGE_CAP and kept no length
    return len(message), len(message) > MESSAGE_CAP


def _packages(listed: object) -> list[str]:
    """The package names of an error's ``missing_packages``."""
    return [p for p in listed if isinstance(p, str) and p] if isinstance(listed, list) else []


def autotokenizer_fix(error: TokenizerError | None, target: TargetSection, native: NativeBlock | None) -> str:
    """What makes AutoTokenizer load: a command where one exists, else a ``# comment``."""
    error = error or TokenizerError(type=None, message=None)
    packages = _packages(error.missing_packages)
    if packages:  # one command for all of them, as pip_fix spells it for this target
        return " ".join([pip_fix(target, packages[0]),
                         *(pip_fix(target, p).rsplit(" ", 1)[1] for p in packages[1:])])
    cause = error.cause
    model = target.get("model_path") or "the model directory"
    if cause in ("too-large", "memory-limit"):
        return str(load_limit_finding(error, "the tokenizer", target).fix)
    if cause == "time-limit":
        return _probe_command(target, "--timeout", "600") + "  # only if the load is slow rather than stuck"
    prose = {
        "missing-files": f"check that the tokenizer files in {model} are complete (tokenizer_config.json and the vocab file)",
        "incompatible-code": "the model's tokenizer code does not match this transformers version: "
                             "update the code files or pin transformers",
        "remote-code-refused": "allow remote code for this target (it is needed to load this tokenizer)",
        "link-outside": f"replace each link with the model's own file in {model}: links out of it are never followed",
    }.get(str(cause))
    if prose is None and native is not None:
        prose = (f"transformers raised {error.type} on these files and {native['loaded_by']} reads them: "
                 "a pipeline that calls AutoTokenizer needs them converted (e.g. to tokenizer.json) or another loader")
    if prose is None:
        prose = (f"AutoTokenizer raised {error.type}: see tokenizer.autotokenizer.message "
                 "(probe --save-raw FILE keeps its traceback)")
    return f"# {prose}"


def native_block(probe: TokenizerProbe | None) -> NativeBlock | None:
    """The ``tokenizer.native`` block; None unless the layout's own library loaded the files."""
    if not isinstance(probe, dict) or not probe.get("loaded") or not isinstance(probe.get("source"), str):
        return None
    source = probe["source"]
    read, partial = _names(probe.get("read")), _names(probe.get("partial"))
    return {
        "loaded_by": source,
        "class": probe.get("class"),
        "read": read,
        "partial": partial,
        # What the library could not say: the section takes these from the files.
        "unknown": [f for f in NATIVE_UNKNOWN.get(source, NAMED + ("chat_template",)) if probe.get(f) is None],
        "note": UNRECORDED if read is None or partial is None else None,
    }


def _names(value: Any) -> list[str] | None:
    """A recorded list of names; None when the probe did not record it."""
    if not isinstance(value, list):
        return None
    return [str(v) for v in value if isinstance(v, str)]


def unreported_failure(block: AutoTokenizer, probe: TokenizerProbe | None, where: str) -> list[Finding]:
    """The error for a load that failed without a classified error (a damaged or partial raw result)."""
    if block.ok is not False or autotokenizer_error(probe) or native_block(probe) is not None:
        return []  # a classified error has its own finding, a native load too (tokenizer_agreement.native_load)
    return [Finding(Severity.ERROR, "tokenizer-load-failed",
                    f"AutoTokenizer did not load the tokenizer in {where}, and the probe recorded no error",
                    "# probe again with --save-raw FILE and read tokenizer_probe in it")]
