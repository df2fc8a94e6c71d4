"""Write tests/data/golden/raw/*.json: raw facts of real local probes of the fixtures.

Run once, by hand, when the raw-facts format changes on purpose:
``.venv/bin/python -m tests.golden.make_raw``. The saved files are inputs of the
profile golden test; machine paths are replaced by stable placeholders.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.fixtures.venvs import make_venv, venv_python
from tests.golden.cases import GOLDEN, build_fixture, stable


def probe_raw(model: Path, venv: Path, out: Path, *extra: str) -> dict:
    cmd = [sys.executable, "-m", "introspect.cli.main", "probe", "--model", str(model), "--venv", str(venv),
           "--no-cache", "--save-raw", str(out), "--json", *extra]
    subprocess.run(cmd, check=False, capture_output=True, timeout=300,
                   env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    return json.loads(out.read_text())


def main() -> None:
    (GOLDEN / "raw").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        full = make_venv(root / "venv_full")
        no_tiktoken = make_venv(root / "venv_no_tiktoken", exclude={"tiktoken"})
        kimi = build_fixture("kimi-k2.6", root)
        shards = build_fixture("kimi-k25-int4-8shards", root)
        cases = {
            "kimi-k2.6-loaded": (kimi, full, ()),
            "kimi-k2.6-no-tiktoken": (kimi, no_tiktoken, ()),
            "kimi-k2.6-no-remote-code": (kimi, full, ("--no-remote-code",)),
            "kimi-k25-int4-8shards": (shards, full, ("--no-tokenizer",)),
        }
        for name, (model, venv, extra) in cases.items():
            raw = probe_raw(model, venv, root / f"{name}.json", *extra)
            replacements = {str(model): f"/models/{model.name}", str(venv): "/venvs/" + venv.name,
                            str(venv_python(venv).resolve()): "/usr/bin/python3", sys.prefix: "/usr"}
            raw = stable(raw, replacements)
            raw["timings"] = {}
            (GOLDEN / "raw" / f"{name}.json").write_text(json.dumps(raw, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
