"""Run inside the torch test venv: build every model dir on stdin on the meta device, in one process.

Input (stdin, JSON): ``{"cases": [{"name", "dir", "trust_remote_code"}]}``. Output: one JSON
line per case, ``{"name", "result", "state_dict_total"}``: the model_code task's result, and the
parameter count of the same meta model taken another way (every distinct floating tensor of
``state_dict``), which the task's own walk must equal exactly.
"""

from __future__ import annotations

import json
import sys

from introspect.remote.tasks.model_code import build_and_count


def state_dict_total(model: object) -> int:
    tensors = {id(t): t for t in model.state_dict(keep_vars=True).values()}  # type: ignore[attr-defined]
    return sum(int(t.numel()) for t in tensors.values() if t.is_floating_point())


def main() -> None:
    job = json.loads(sys.stdin.read())
    for case in job["cases"]:
        result, model = build_and_count({"model_path": case["dir"], "trust_remote_code": case["trust_remote_code"]})
        total = state_dict_total(model) if model is not None else None
        print(json.dumps({"name": case["name"], "result": result, "state_dict_total": total}), flush=True)
        del model  # no gc.collect(): a full collection per case costs more than the meta model holds


if __name__ == "__main__":
    main()
