"""Verdicts of `introspect preflight`: is a data-generation job ready to run?

Pure: evidence in (the reply of the remote ``preflight`` task, both parts merged),
checks out. No I/O, no transformers. Seven checks, one module each, in this order:

``tokenizer``, ``chat-template``, ``loss-masks``, ``mask-token``, ``ids``,
``endpoint``, ``disk-and-packages``.

Each is pass, warn, fail or skipped (it could not run: an earlier check failed and says why) with the evidence it judged and, when action is needed,
the exact fix (a command, a setting, a file edit). ``ready()`` is false when any
check fails; warnings never block, they name what the pipeline must do differently.
"""

from __future__ import annotations

from introspect.checks.preflight.chat_template import check_chat_template
from introspect.checks.preflight.common import CHECK_NAMES, TITLES, Check, Status, ready, skip_repeats
from introspect.checks.preflight.disk_packages import check_disk_and_packages
from introspect.checks.preflight.endpoint import check_endpoint
from introspect.checks.preflight.ids import check_ids
from introspect.checks.preflight.loss_masks import check_loss_masks
from introspect.checks.preflight.mask_token import check_mask_token
from introspect.checks.preflight.tokenizer import check_tokenizer
from introspect.remote.contract import PreflightReply


def evaluate(evidence: PreflightReply, *, min_free_gb: float, pip: str = "python3 -m pip",
             model_path: str | None = None) -> list[Check]:
    """The seven checks, in order. ``pip`` is the install command of the pipeline's venv
    (``<venv>/bin/pip``), used verbatim in fixes."""
    model = model_path or (evidence.get("model") or {}).get("path") or "<model>"
    return skip_repeats([
        check_tokenizer(evidence, pip),
        check_chat_template(evidence),
        check_loss_masks(evidence),
        check_mask_token(evidence),
        check_ids(evidence),
        check_endpoint(evidence, model),
        check_disk_and_packages(evidence, min_free_gb, pip),
    ])


__all__ = ["CHECK_NAMES", "TITLES", "Check", "Status", "evaluate", "ready"]
