"""Remote task "model": every file-based fact about one model directory.

Standard library only, Python 3.8+. The collectors run concurrently in one
interpreter (config and tokenizer files, every safetensors header, drafter
dirs); the environment collector follows the files one because it checks the
modules the model's own code imports. A collector that fails or runs past the
deadline becomes an error record; the others' facts still come back.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List, Tuple

from introspect.remote import common

Collector = Callable[[], Tuple[Any, List[Dict[str, Any]]]]


def _custom_code_imports(files: Any) -> List[str]:
    names = set()
    if isinstance(files, dict):
        for module in files.get("custom_code") or []:
            if isinstance(module, dict):
                names.update(module.get("imports") or [])
    return sorted(names)


class _Section(threading.Thread):
    def __init__(self, name: str, collect: Collector) -> None:
        threading.Thread.__init__(self, name="probe-" + name, daemon=True)
        self.section = name
        self.collect = collect
        self.facts = None  # type: Any
        self.errors = []  # type: List[Dict[str, Any]]
        self.seconds = 0.0

    def run(self) -> None:
        started = time.time()
        try:
            self.facts, self.errors = self.collect()
        except Exception as exc:  # one broken collector must not cost the others
            self.errors = [{"probe": self.section, "type": type(exc).__name__, "message": str(exc)}]
        self.seconds = round(time.time() - started, 4)


def run(request: Dict[str, Any]) -> Dict[str, Any]:
    from introspect.remote import (
        discover_probe,
        engine_facts,
        env_probe,
        files_probe,
        fingerprint,
        gpu_facts,
        safetensors_probe,
        tokenizer_files,
    )

    path = str(request["model_path"])
    cap = int(request.get("json_cap") or common.DEFAULT_JSON_CAP)
    max_header = int(request.get("max_header") or 100 * 1024 * 1024)
    deadline = time.time() + float(request.get("deadline") or 60)
    wanted = set(request.get("sections") or ["files", "tokenizer_files", "safetensors", "drafters",
                                             "environment", "hashes", "engines", "gpus"])

    collectors = {
        "files": lambda: files_probe.collect_files(path, json_cap=cap),
        "tokenizer_files": lambda: tokenizer_files.collect_tokenizer_files(path, json_cap=cap),
        "safetensors": lambda: safetensors_probe.collect_safetensors(path, max_header=max_header),
        "drafters": lambda: files_probe.collect_drafters(path, json_cap=cap),
        # sha256 of the small files, shard names and sizes: what `introspect diff` compares.
        "hashes": lambda: discover_probe.collect_hashes(path, json_cap=cap),
        # Serving engines read from their sources (never imported) and nvidia-smi.
        "engines": lambda: engine_facts.collect_engines(deadline),
        "gpus": gpu_facts.collect_gpus,
    }
    # Taken before any file is read, so a change during the probe invalidates the cache entry.
    stamp = fingerprint.compute(path)
    sections = [_Section(name, fn) for name, fn in collectors.items() if name in wanted]
    for section in sections:
        section.start()

    out = {"errors": [], "timings": {}, "fingerprint": stamp}  # type: Dict[str, Any]

    def finish(section: _Section) -> None:
        section.join(max(0.0, deadline - time.time()))
        if section.is_alive():
            out[section.section] = None
            out["errors"].append({"probe": section.section, "type": "timeout",
                                  "message": "%s did not finish before the probe deadline" % section.section})
            return
        out[section.section] = section.facts
        out["errors"].extend(section.errors or [])
        out["timings"][section.section] = section.seconds

    by_name = {section.section: section for section in sections}
    if "files" in by_name:
        finish(by_name["files"])
    if "environment" in wanted:
        extra = _custom_code_imports(out.get("files"))
        env = _Section("environment", lambda: env_probe.collect_environment(extra))
        env.start()
        finish(env)
    for section in sections:
        if section.section != "files":
            finish(section)
    return out
