"""Remote task "gpus": the host's nvidia-smi facts alone, for ``introspect gpus`` (no model needed).

Runs on the host under its own interpreter: standard library only, Python 3.8+. The facts
are the probe's own (:func:`introspect.remote.facts.host.gpus.collect_gpus`: name, memory total
and used, driver, CUDA, PCI bus id, compute capability, ``topo -m``); a host without
nvidia-smi answers ``{"available": false, "reason": "nvidia-smi is not on PATH"}``, and a
failing one the same with its ``error``: facts of the host, never a failure of the task.

Request: ``{}``. Result: collect_gpus()'s facts plus ``"errors": []``.
"""

from __future__ import annotations

from typing import Any, Dict

from ..facts.host.gpus import collect_gpus


def run(request: Dict[str, Any]) -> Dict[str, Any]:
    facts, errors = collect_gpus()
    out = dict(facts)
    out["errors"] = list(errors)
    return out
