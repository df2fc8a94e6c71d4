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
from typing import Any, Callable, Dict, List, Set, Tuple, cast

from .. import confine
from ..contract import (
    DEFAULT_FILES_TIMEOUT,
    DEFAULT_JSON_CAP,
    DEFAULT_MAX_HEADER,
    MODEL_SECTIONS,
    ErrorRecord,
    ModelReply,
    error_record,
)
from ..facts.host import engines, environment, gpus
from ..facts.model import drafters, files, fingerprint, hashes, safetensors
from ..facts.tokenizer import tokenizer_files

Collector = Callable[[], Tuple[Any, List[ErrorRecord]]]


def _custom_code_imports(files_facts: Any) -> List[str]:
    names: Set[str] = set()
    if isinstance(files_facts, dict):
        for module in files_facts.get("custom_code") or []:
            if isinstance(module, dict):
                names.update(module.get("imports") or [])
    return sorted(names)


class _Section(threading.Thread):
    def __init__(self, name: str, collect: Collector) -> None:
        threading.Thread.__init__(self, name="probe-" + name, daemon=True)
        self.section = name
        self.collect = collect
        self.facts: Any = None
        self.errors: List[ErrorRecord] = []
        self.seconds = 0.0

    def run(self) -> None:
        started = time.time()
        try:
            self.facts, self.errors = self.collect()
        except Exception as exc:  # one broken collector must not cost the others
            self.errors = [error_record(type(exc).__name__, str(exc), probe=self.section)]
        self.seconds = round(time.time() - started, 4)


def run(request: Dict[str, Any]) -> ModelReply:
    """Every wanted section (default: all of contract.MODEL_SECTIONS), each bounded by the deadline."""
    path = str(request["model_path"])
    cap = int(request.get("json_cap") or DEFAULT_JSON_CAP)
    max_header = int(request.get("max_header") or DEFAULT_MAX_HEADER)
    deadline = time.time() + float(request.get("deadline") or DEFAULT_FILES_TIMEOUT)
    wanted = set(request.get("sections") or MODEL_SECTIONS)
    # Before any read (and before the shard workers fork): no file under the model dir is
    # read through a link that leads out of it.
    confine.confine(path)
    # Taken before any file is read, so a change during the probe invalidates the cache entry.
    fp = fingerprint.compute(path)
    # Forked before any section thread starts: the header workers run from the first moment.
    pending = safetensors.start_safetensors(path, max_header=max_header) if "safetensors" in wanted else None
    collectors: Dict[str, Collector] = {
        "files": lambda: files.collect_files(path, json_cap=cap),
        "tokenizer_files": lambda: tokenizer_files.collect_tokenizer_files(path, json_cap=cap),
        "safetensors": lambda: safetensors.collect_safetensors(path, max_header=max_header, pending=pending),
        "drafters": lambda: drafters.collect_drafters(path, json_cap=cap),
        # sha256 of the small files, shard names and sizes: what `introspect diff` compares.
        "hashes": lambda: hashes.collect_hashes(path, json_cap=cap),
        # Serving engines read from their sources (never imported), with what each can serve for
        # this model's class (config.json's architectures), and nvidia-smi.
        "engines": lambda: engines.collect_engines(deadline, model_path=path),
        "gpus": lambda: gpus.collect_gpus(),
    }
    out = ModelReply(errors=[], timings={}, fingerprint=fp)
    sections = [_Section(name, fn) for name, fn in collectors.items() if name in wanted]
    for section in sections:
        section.start()
    by_name = {section.section: section for section in sections}
    if "files" in by_name:
        _finish(by_name["files"], deadline, out)
    if "environment" in wanted:
        # After the files section: it checks the modules the model's own code imports.
        extra = _custom_code_imports(out.get("files"))
        env = _Section("environment", lambda: environment.collect_environment(extra))
        env.start()
        _finish(env, deadline, out)
    for section in sections:
        if section.section != "files":
            _finish(section, deadline, out)
    return out


def _finish(section: _Section, deadline: float, out: ModelReply) -> None:
    """Wait for one section until the deadline; a late one is null with a timeout error."""
    section.join(max(0.0, deadline - time.time()))
    facts = cast(Dict[str, Any], out)  # sections are set by name
    if section.is_alive():
        facts[section.section] = None
        out["errors"].append(error_record("timeout", "%s did not finish before the probe deadline" % section.section,
                                          probe=section.section))
        return
    facts[section.section] = section.facts
    out["errors"].extend(section.errors or [])
    out["timings"][section.section] = section.seconds
