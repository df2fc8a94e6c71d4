"""Findings of the probe's own limits on the tokenizer (memory, time, file size) and on the model-code
build (resident memory), and of damaged tiktoken files: each names the limit or the line, never a bare
MemoryError or a vocab of 10**4000."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from introspect.analysis.findings import Finding, Severity
from introspect.analysis.result import TargetSection
from introspect.analysis.tokenizer.shapes import shaped
from introspect.documents.profile_tokenizer import TokenizerError
from introspect.remote.contract import TiktokenSummary, TokenizerFilesFacts, as_dict

LIMIT_CAUSES = ("memory-limit", "time-limit", "too-large")
# The largest tiktoken rank (remote/facts/tokenizer/tiktoken.py MAX_RANK): a saved raw file from an older
# probe may still carry a larger one, which is no vocab size.
MAX_RANK = 2 ** 31 - 1


def plausible_rank(value: Any) -> int | None:
    """A tiktoken rank usable as a vocab bound, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_RANK else None


def _probe_command(target: Mapping[str, object], *extra: str) -> str:
    """``introspect probe --host H --model M EXTRA``: the run again, with ``extra``."""
    words = ["introspect", "probe"]
    if target.get("host") and target.get("scheme") not in (None, "local"):
        words += ["--host", str(target["host"])]
    words += ["--model", str(target.get("model_path") or "MODEL_DIR"), *extra]
    return " ".join(shlex.quote(w) for w in words)


def preflight_command(target: Mapping[str, object]) -> str:
    """``introspect preflight --host H --model M --venv V``: the check of every id, on the same host."""
    words = ["introspect", "preflight"]
    if target.get("host") and target.get("scheme") not in (None, "local"):
        words += ["--host", str(target["host"])]
    words += ["--model", str(target.get("model_path") or "MODEL_DIR")]
    if target.get("venv"):
        words += ["--venv", str(target["venv"])]
    elif target.get("python"):
        words += ["--python", str(target["python"])]
    return " ".join(shlex.quote(w) for w in words)


def load_limit_finding(error: TokenizerError, who: str, target: TargetSection) -> Finding:
    """The tokenizer load stopped by one of the probe's limits (error cause in LIMIT_CAUSES)."""
    cause, message = error.cause, str(error.message or "")
    if cause == "too-large":
        return Finding(Severity.ERROR, "tokenizer-file-too-large", f"{who} was not loaded: {message}",
                       f"ls -l {shlex.quote(str(target.get('model_path') or '.'))}  # no real tokenizer file is "
                       "that large: re-download it; if it truly is, raise the cap with --max-json-bytes")
    if cause == "time-limit":
        return Finding(Severity.ERROR, "tokenizer-time-limit", f"{who} did not load: {message}", None)
    return Finding(Severity.ERROR, "tokenizer-memory-limit", f"{who} did not load: {message}",
                   _probe_command(target, "--memory-limit", "32GiB") +
                   "  # only if this tokenizer really needs that much memory")


def code_limit_finding(reason: str, target: Mapping[str, object], limit: Any) -> Finding:
    """The model-code build killed past its memory limit (resident memory, watched by the supervisor).

    ``target``: the profile's target section or the raw facts' target block (read like ``pip_fix``)."""
    current = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else 0
    larger = max(64, 2 * -(-current // (1 << 30)))  # GiB: at least double what it was
    return Finding(
        Severity.ERROR, "model-code-memory-limit",
        f"the model-code witness was stopped: {reason}; the verdicts rest on config.json and the weights "
        "(a model built on the meta device holds no weights: its code allocates real memory)",
        _probe_command(target, "--memory-limit", f"{larger}GiB") +
        "  # only if the host has that much free; or pass --no-model-code to skip this build")


def sample_limit_finding(error: TokenizerError, who: str) -> Finding:
    """The chat template's render stopped by its memory or time budget."""
    return Finding(
        # An error, not a warning: a server renders the template on every request.
        Severity.ERROR, "chat-template-runaway",
        f"the chat template of {who} did not render the sample conversation: {error.message} "
        "(the template grows a string or a list, or loops, without end); the rest of the profile stands",
        "# fix the chat template (chat_template.jinja, or chat_template in tokenizer_config.json) "
        "before serving this model: every request would render it")


def tiktoken_findings(files: TokenizerFilesFacts) -> list[Finding]:
    """One finding per tiktoken file with lines tiktoken's loader would refuse."""
    out = []
    for item in files.get("tiktoken") or []:
        entry = shaped(item, TiktokenSummary)
        count = entry.get("malformed_lines")
        bad: int = count if isinstance(count, int) else 0
        examples = [as_dict(e) for e in entry.get("malformed_examples") or []][:3]
        shown = "; ".join(f"line {e.get('line')}: {e.get('reason')}" for e in examples)
        top = entry.get("max_rank")
        if top is not None and plausible_rank(top) is None:  # raw facts of an older probe
            bad, shown = max(bad, 1), f"a rank above the largest rank {MAX_RANK}"
        if bad <= 0:
            continue
        out.append(Finding(
            Severity.ERROR, "tiktoken-invalid",
            f"{entry.get('file')} has {bad} line(s) tiktoken cannot load ({shown}); tiktoken refuses the file, "
            "and its ranks are counted without those lines",
            "# re-download the file from the model's repository: every line must be '<base64 token> <rank>'"))
    return out

