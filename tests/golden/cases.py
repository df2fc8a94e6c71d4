"""The golden cases: what goes in, and how volatile fields are made stable.

Two layers are pinned, so that moving code cannot change what users see:

- ``profile``: saved raw facts in ``tests/data/golden/raw/`` go through the pure
  aggregator; the profile JSON must equal ``tests/data/golden/profiles/`` byte for byte.
- ``remote``: the stdlib model task run on this machine over the fixtures; its facts,
  with paths replaced by placeholders and machine-dependent fields dropped, must equal
  ``tests/data/golden/remote/``.

Regenerate (only when a change of output is intended, and say so in the commit):
``INTROSPECT_REGEN_GOLDEN=1 scripts/test tests/golden``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.fixtures.kimi_model import build_kimi_model
from tests.fixtures.shards import write_kimi_k25_int4_checkpoint

DATA = Path(__file__).resolve().parents[1] / "data"
GOLDEN = DATA / "golden"
RAW_SCHEMA = "introspect.raw/v1"

# Fields whose values depend on the machine or the moment, not on the code under test.
VOLATILE_KEYS = {"timings", "mtime", "mtime_ns", "seconds", "load_seconds", "elapsed", "pid", "pgid"}


def config_raw(name: str, config: Any) -> dict[str, Any]:
    """Raw facts of a directory holding only ``config.json``: the aggregator's view of a config."""
    path = f"/models/{name}"
    return {"schema": RAW_SCHEMA, "target": {"scheme": "ssh", "host": "gpu1", "port": 22, "user": "root",
                                             "python": "/venv/bin/python", "venv": "/venv",
                                             "model_path": path},
            "errors": [], "timings": {}, "fatal": None, "tokenizer_probe": None,
            "options": {"remote_code": True, "load_tokenizer": False},
            "files": {"model_path": path, "real_path": path, "status": "ok",
                      "listing": [{"name": "config.json", "size": 1000}], "total_size": 1000,
                      "config": config, "custom_code": []}}


def config_cases() -> dict[str, dict[str, Any]]:
    """Every family case and real config in tests/data, as raw facts."""
    cases: dict[str, dict[str, Any]] = {}
    for path in sorted((DATA / "families").glob("*.json")):
        cases[f"family-{path.stem}"] = config_raw(path.stem, json.loads(path.read_text())["config"])
    for folder in sorted((DATA / "realconfigs").iterdir()):
        if (folder / "config.json").is_file():
            cases[f"real-{folder.name}"] = config_raw(folder.name, json.loads((folder / "config.json").read_text()))
    return cases


def build_fixture(name: str, root: Path) -> Path:
    """The model fixtures whose remote facts are pinned."""
    if name == "kimi-k2.6":
        return build_kimi_model(root / "Kimi-K2.6")
    if name == "kimi-k2-instruct":
        return build_kimi_model(root / "Kimi-K2-Instruct", variant="k2-instruct")
    if name == "kimi-k25-int4-8shards":
        model = root / "Kimi-K2.5-INT4"
        write_kimi_k25_int4_checkpoint(model, shards=8)
        return model
    raise KeyError(name)


FIXTURES = ("kimi-k2.6", "kimi-k2-instruct", "kimi-k25-int4-8shards")


def stable(value: Any, replacements: dict[str, str]) -> Any:
    """``value`` with volatile keys dropped and machine paths replaced by placeholders."""
    if isinstance(value, dict):
        return {k: stable(v, replacements) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [stable(v, replacements) for v in value]
    if isinstance(value, str):
        for old, new in replacements.items():
            value = value.replace(old, new)
        return value
    return value


def remote_facts_stable(facts: dict[str, Any], model: Path) -> dict[str, Any]:
    """The model task's facts minus what depends on this machine's interpreter and packages."""
    facts = dict(facts)
    facts.pop("environment", None)  # package versions and paths of whichever venv ran it
    facts.pop("fingerprint", None)  # sizes and mtimes, by design
    facts.pop("engines", None)  # the serving engines installed for whichever interpreter ran it
    facts.pop("gpus", None)  # this machine's nvidia-smi, or its absence
    return stable(facts, {str(model): "<MODEL>", sys.prefix: "<PREFIX>"})


def dumps(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True) + "\n"
