"""Preflight: ``decode([id])`` for every id of the loaded tokenizer, within a time budget.

Runs on the host inside the isolated preflight tokenizer process (standard library,
Python 3.8+). A completion may contain any id; one that makes decode raise breaks
the job late.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List


def decode_sweep(tok: Any, budget: float, max_items: int) -> Dict[str, Any]:
    """``decode([id])`` for every id below len(tokenizer), within a time budget.

    A completion may contain any id; one that makes decode raise breaks the job late.
    ``{"total", "checked", "complete", "failures", "items": [{"id", "error"}], "items_total",
    "items_truncated", "seconds"}``: the first ``max_items`` failures, with their count.
    """
    total = len(tok)
    started = time.monotonic()
    failures: List[Dict[str, Any]] = []
    checked = 0
    for token_id in range(total):
        if checked % 1024 == 0 and time.monotonic() - started > budget:
            break
        try:
            tok.decode([token_id])
        except Exception as exc:  # noqa: BLE001
            failures.append({"id": token_id, "error": "%s: %s" % (type(exc).__name__, str(exc)[:200])})
        checked += 1
    return {"total": total, "checked": checked, "complete": checked == total, "failures": len(failures),
            "items": failures[:max_items], "items_total": len(failures), "items_truncated": len(failures) > max_items,
            "seconds": round(time.monotonic() - started, 3)}
