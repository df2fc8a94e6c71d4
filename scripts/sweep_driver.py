"""Run inside one venv: every family on stdin through the model_code task, in ONE process.

Started by scripts/sweep_families.py, once per venv (and per ``--jobs`` share): the project
venv (transformers without torch: the config-class setting) and the torch test venv (the
meta-device build). Importing torch and transformers once and then looping is what makes
the sweep of several hundred families affordable on two cores.

Input (stdin, JSON): ``{"root": dir, "families": [model_type], "timeout": s}``.
Output: one JSON line per family on the original stdout, in input order::

    {"family", "skip": null | reason, "config": the default config as written | null,
     "result": <the model_code task's result> | null, "seconds": float}

``skip`` is ``"timeout"`` when the family ran past ``timeout`` seconds, or the exception type
and the first line of its message when its default config cannot be built or written.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from introspect.remote.tasks.model_code import run


class FamilyTimeout(KeyboardInterrupt):
    """Raised by the alarm. A KeyboardInterrupt, because the model_code task catches every other
    BaseException into a classified error; this one it lets through, so a slow family ends as a
    timeout rather than as a build failure."""


def _alarm(_signum: int, _frame: Any) -> None:
    raise FamilyTimeout()


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__


def write_config(family: str, folder: Path) -> dict[str, Any]:
    """The family's default config as config.json (every key, not only those differing from the
    class defaults: the config rules read config.json alone)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    config = CONFIG_MAPPING[family]()
    text = config.to_json_string(use_diff=False)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(text, encoding="utf-8")
    data = json.loads(text)
    return data if isinstance(data, dict) else {}


def one_family(family: str, root: Path, timeout: int) -> dict[str, Any]:
    started = time.monotonic()
    row: dict[str, Any] = {"family": family, "skip": None, "config": None, "result": None}
    signal.alarm(timeout)
    try:
        folder = root / family
        try:
            config = write_config(family, folder)
        except FamilyTimeout:
            raise
        except BaseException as exc:  # noqa: BLE001 - any failure of a default config is a skip reason
            row["skip"] = first_line(exc)
            return row
        row["config"] = config
        row["result"] = run({"model_path": str(folder), "trust_remote_code": False})
    except FamilyTimeout:
        row.update(skip="timeout", config=None, result=None)
    finally:
        signal.alarm(0)
        row["seconds"] = round(time.monotonic() - started, 3)
    return row


def main() -> None:
    job = json.loads(sys.stdin.read())
    # Model code may print: keep the JSON lines on a private copy of stdout, the rest to stderr.
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    signal.signal(signal.SIGALRM, _alarm)
    root = Path(job["root"])
    for family in job["families"]:
        row = one_family(family, root, int(job["timeout"]))
        out.write(json.dumps(row) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
