"""The family sweep: every model_type the installed transformers registers, three ways, against the code.

Run through ``scripts/sweep_families``; what it measures, and its last figures: docs/family-sweep.md
(MARKDOWN_HEAD below). Each family's default config goes through the config rules (``rules``), the
model_code task without torch (``config-class``, the project venv) and with torch (``meta``, the
torch test venv: built on the meta device, the truth). The task runs in one driver process per
venv share (``--jobs``, scripts/sweep_driver.py) looping over its families; a driver that dies or
hangs past its alarm is replaced for the rest, that family skipped with the reason.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from introspect.analysis.architecture.code_settle import generic_kinds  # noqa: E402
from introspect.analysis.profile import build_profile  # noqa: E402
from tests.fixtures.torch_venv import torch_venv  # noqa: E402
from tests.golden.cases import config_raw  # noqa: E402

DRIVER = REPO / "scripts" / "sweep_driver.py"
SETTINGS = ("rules", "config-class", "meta")
FIELDS = ("layers.kinds", "layers.pure_attention", "layers.count", "kv_cache.bytes_per_token", "params.total")
TOLERANCE = 0.01  # the parameter total is held to 1%, as the witnesses hold the rules to the code
DEFAULT_TIMEOUT = 120
GRACE = 30  # seconds past a driver's own alarm before the sweep kills it (a hang in C code)
STARTUP = 60  # a driver's imports (torch, transformers) before its first family's alarm is set
# Per field and setting: agree, wrong (not the truth, stated as fact), estimate (a parameter total off the truth
# that the profile labels an estimate: params.source "config"), unknown (null), untested (no truth).
STATUSES = ("agree", "wrong", "estimate", "unknown", "untested")
# The meta profile's own comparison of the rules' layer layout with the code's layer runs
# (analysis/architecture/witnesses.py): a stand-in for layer kinds while the profile does not settle them.
LAYER_COUNTS = ("layers", "moe_layers", "recurrent_layers", "sliding_layers")


def all_families() -> list[str]:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    return sorted(CONFIG_MAPPING.keys())


def driver_env(root: Path) -> dict[str, str]:
    """Offline, caches inside the sweep's temp dir, one thread each (two cores, two drivers)."""
    return dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONPATH=str(REPO),
                HF_HOME=str(root / "hf"), HF_MODULES_CACHE=str(root / "hf" / "modules"),
                PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
                TRANSFORMERS_VERBOSITY="error", TOKENIZERS_PARALLELISM="false")


def _reader(stream: Any, lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _stop(proc: subprocess.Popen[str], patience: float) -> None:
    try:
        proc.wait(timeout=patience)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver leads its own session: its children too
        proc.wait()


def _tail(path: Path) -> str:
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no output"


def drive(python: Path, families: list[str], root: Path, timeout: int, tag: str) -> dict[str, dict[str, Any]]:
    """Every family through one driver process, replaced when it dies or hangs (that family skipped)."""
    rows: dict[str, dict[str, Any]] = {}
    remaining = list(families)
    while remaining:
        err = root / f"{tag}-{len(rows)}.stderr"
        with open(err, "w") as stderr:
            proc = subprocess.Popen([str(python), "-B", str(DRIVER)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=stderr, text=True, env=driver_env(root),
                                    cwd=str(root), start_new_session=True)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({"root": str(root / "models"), "families": remaining, "timeout": timeout}))
        proc.stdin.close()
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True).start()
        wait, patience = timeout + GRACE + STARTUP, 10.0
        while remaining:
            try:
                line = lines.get(timeout=wait)
                wait = timeout + GRACE
            except queue.Empty:
                line, why = None, "timeout (driver killed)"
            else:
                why = f"driver exited ({proc.wait()}): {_tail(err)}" if line is None else ""
            if line is None:
                family = remaining.pop(0)  # the one the driver was on: rows come back in order
                rows[family] = {"family": family, "skip": why, "config": None, "result": None}
                patience = 0.0
                break
            row = json.loads(line)
            rows[row["family"]] = row
            remaining.remove(row["family"])
        _stop(proc, patience)
    return rows


def run_stage(python: Path, families: list[str], root: Path, timeout: int, jobs: int,
              tag: str) -> dict[str, dict[str, Any]]:
    """The families dealt round-robin to ``jobs`` drivers (neighbours in the alphabet are often
    variants of one big family: dealing spreads them)."""
    shares = [families[i::jobs] for i in range(jobs) if families[i::jobs]]
    rows: dict[str, dict[str, Any]] = {}
    with concurrent.futures.ThreadPoolExecutor(len(shares)) as pool:
        for done in pool.map(lambda i: drive(python, shares[i], root, timeout, f"{tag}{i}"), range(len(shares))):
            rows.update(done)
    return rows


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def profile_values(profile: dict[str, Any]) -> dict[str, Any]:
    arch = _d(profile.get("architecture"))
    layers = _d(arch.get("layers"))
    kinds = layers.get("kinds") if isinstance(layers.get("kinds"), dict) and layers.get("kinds") else None
    count = arch.get("num_layers")
    if not isinstance(count, int) and kinds:
        count = sum(v for v in kinds.values() if isinstance(v, int))
    return {"layers.kinds": kinds, "layers.pure_attention": layers.get("pure_attention"), "layers.count": count,
            "kv_cache.bytes_per_token": _d(arch.get("kv_cache")).get("bytes_per_token"),
            "params.total": _d(arch.get("params")).get("total"), "params.source": _d(arch.get("params")).get("source")}


def truth_of(meta: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """Field -> true value, for the fields the meta build settles (absent: no truth)."""
    truth: dict[str, Any] = {}
    params = _d(result.get("params"))
    if isinstance(params.get("total"), int):
        # As the witness reads it (analysis/architecture/witnesses.py): MTP layers are not part of the model's total.
        truth["params.total"] = params["total"] - int(_d(params.get("components")).get("mtp") or 0)
    count = _d(result.get("layers")).get("count")
    if isinstance(count, int) and count > 0:
        truth["layers.count"] = count
    arch, values = _d(meta.get("architecture")), profile_values(meta)
    layers = _by_code(arch.get("layers"))
    settled = {"layers.kinds": layers, "layers.pure_attention": layers,
               "kv_cache.bytes_per_token": layers or _by_code(arch.get("kv_cache"))}
    truth.update({f: values[f] for f, ok in settled.items() if ok and values[f] is not None})
    return truth


def _by_code(section: Any) -> bool:
    return "model_code" in (_d(section).get("source"), _d(section).get("settled_by"))


def status(field: str, value: Any, truth: dict[str, Any], estimate: bool = False) -> str:
    if field not in truth:
        return "untested"
    if value is None:
        return "unknown"
    want = truth[field]
    if field == "params.total" and isinstance(value, (int, float)) and not isinstance(value, bool):
        close = abs(value - want) <= TOLERANCE * max(abs(value), abs(want), 1)
        return "agree" if close else "estimate" if estimate else "wrong"
    if field == "layers.kinds" and isinstance(value, dict) and isinstance(want, dict) and value != want:
        # "recurrent" (a state, mixer not named) against a named recurrent mixer: less precise, not wrong.
        return "agree" if generic_kinds(value) == generic_kinds(want) else "wrong"
    return "agree" if value == want else "wrong"


def _profile(family: str, config: dict[str, Any], probe: dict[str, Any] | None) -> dict[str, Any]:
    raw = config_raw(family, config)
    if probe is not None:
        raw["options"]["load_model_code"] = True
        raw["model_code_probe"] = probe
    return build_profile(raw)


def _meta_failure(meta: dict[str, Any] | None) -> str | None:
    if meta is None:
        return "meta: not run"
    if meta.get("skip"):
        return f"meta: {meta['skip']}"
    result = _d(meta.get("result"))
    if not result.get("built"):
        error = _d(result.get("error"))
        first = str(error.get("message") or "").strip().splitlines()[:1]
        return (f"meta build failed: {error.get('cause')} at {error.get('stage')}: "
                f"{error.get('type')}: {(first or [''])[0][:160]}")
    return None


def compare_family(family: str, cc: dict[str, Any] | None, meta: dict[str, Any] | None) -> dict[str, Any]:
    """One row: the truth, and per setting its values and each field's status (or why it was skipped)."""
    row: dict[str, Any] = {"family": family, "skip": None, "truth": {}, "settings": {},
                           "seconds": {"config-class": _d(cc).get("seconds"), "meta": _d(meta).get("seconds")}}
    config = _d(cc).get("config") or _d(meta).get("config")
    row["skip"] = f"no config: {_d(cc).get('skip') or _d(meta).get('skip')}" if not config else _meta_failure(meta)
    if row["skip"] is not None:
        row["settings"] = {name: {"skip": row["skip"]} for name in SETTINGS}
        return row
    assert meta is not None and config
    probes = {"rules": None, "config-class": _d(cc).get("result"), "meta": meta["result"]}
    profiles: dict[str, dict[str, Any]] = {}
    for name in SETTINGS:
        if name == "config-class" and (cc is None or cc.get("skip")):
            row["settings"][name] = {"skip": f"config-class: {_d(cc).get('skip') or 'not run'}"}
            continue
        try:
            profiles[name] = _profile(family, config, probes[name])
        except Exception as exc:  # noqa: BLE001 - a profile that raises is a finding of the sweep
            row["settings"][name] = {"skip": f"build_profile raised {type(exc).__name__}: {str(exc)[:160]}"}
    if "meta" not in profiles:
        for name in SETTINGS:
            row["settings"].setdefault(name, {"skip": f"no truth: {row['settings']['meta']['skip']}"})
        return row
    row["truth"] = truth_of(profiles["meta"], meta["result"])
    row["layer_counts_disagree"] = {f["quantity"]: f["values"] for f in profiles["meta"].get("findings", [])
                                    if f.get("code") == "witnesses-disagree" and f.get("quantity") in LAYER_COUNTS}
    types = _d(meta["result"].get("config")).get("layer_types")  # the config class's, runs: a check on the truth
    row["config_layer_types"] = dict(sum((Counter({str(r.get("value")): int(r.get("count") or 0)}) for r in types
                                          if isinstance(r, dict)), Counter())) if isinstance(types, list) else None
    for name, profile in profiles.items():
        values = profile_values(profile)
        row["settings"][name] = {"skip": None, "values": values,
                                 "status": {f: status(f, values[f], row["truth"], values["params.source"] == "config")
                                            for f in FIELDS}}
    return row


def verdict(setting: dict[str, Any], meta: bool) -> str:
    """A family in one setting: skipped, wrong, unknown or agreeing. In the meta setting a field the
    profile did not settle from the code counts as unknown (the build could not say)."""
    if setting.get("skip"):
        return "skipped"
    found = set(setting["status"].values())
    if "wrong" in found:
        return "wrong"
    if "unknown" in found or (meta and "untested" in found):
        return "unknown"
    return "estimate off" if "estimate" in found else "agreeing"


def sweep(families: list[str], project_python: Path, torch_python: Path, jobs: int = 2,
          timeout: int = DEFAULT_TIMEOUT, workdir: Path | None = None) -> dict[str, Any]:
    """Run both stages and compare; the whole document (rows, summary, timings)."""
    root = Path(workdir or tempfile.mkdtemp(prefix="family-sweep-"))
    (root / "models").mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    started = time.monotonic()
    cc = run_stage(project_python, families, root, timeout, jobs, "config-class")
    seconds["config-class"] = round(time.monotonic() - started, 1)
    meta = run_stage(torch_python, families, root, timeout, jobs, "meta")
    seconds["meta"] = round(time.monotonic() - started - seconds["config-class"], 1)
    rows = [compare_family(f, cc.get(f), meta.get(f)) for f in families]
    seconds["compare"] = round(time.monotonic() - started - seconds["config-class"] - seconds["meta"], 1)
    seconds["total"] = round(time.monotonic() - started, 1)
    if workdir is None:
        shutil.rmtree(root, ignore_errors=True)
    versions = next(({"transformers": r["result"]["transformers_version"], "torch": r["result"]["torch_version"]}
                     for r in meta.values() if _d(r.get("result")).get("torch_version")), {})
    return {"schema": "introspect.family-sweep/v1", "families": len(families), "jobs": jobs, "timeout": timeout,
            "versions": versions, "seconds": seconds, "summary": summarise(rows), "rows": rows}


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in SETTINGS:
        settings = [r["settings"][name] for r in rows]
        fields = {f: dict(Counter(s["status"][f] for s in settings if not s.get("skip"))) for f in FIELDS}
        out[name] = {"verdicts": dict(Counter(verdict(s, name == "meta") for s in settings)), "fields": fields,
                     "skipped": dict(Counter(_reason_kind(s["skip"]) for s in settings if s.get("skip")))}
    return out


def _reason_kind(reason: str) -> str:
    """A skip reason without its family-specific tail, for counting."""
    if "Unrecognized configuration class" in reason:
        return "meta build failed: no Auto class takes the config (a part of a model: tower, encoder)"
    return ": ".join(reason.split(": ")[:3 if reason.startswith("meta build failed: ") else 2])


def _show(value: Any, truth: Any = None) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in sorted(value.items()))
    if isinstance(value, int) and isinstance(truth, int) and truth and not isinstance(value, bool):
        return f"{value} ({(value - truth) / truth:+.1%})"
    return "null" if value is None else str(value)


def wrong_rows(rows: list[dict[str, Any]]) -> list[tuple[str, str, str, str, str]]:
    """(family, field, settings, value, truth): settings saying the same wrong value share a line."""
    out = []
    for row in rows:
        for field in FIELDS:
            said: dict[str, list[str]] = {}
            for name in SETTINGS:
                setting = row["settings"][name]
                state = None if setting.get("skip") else setting["status"][field]
                if state in ("wrong", "estimate"):
                    key = (_show(setting["values"][field], row["truth"][field]), state)
                    said.setdefault(key, []).append(name)
            for (value, state), names in said.items():
                label = field + (" (estimate)" if state == "estimate" else "")
                out.append((row["family"], label, ", ".join(names), value, _show(row["truth"][field])))
    return out


def markdown(doc: dict[str, Any], command: str) -> str:
    summary, secs = doc["summary"], doc["seconds"]
    versions = {"transformers": "?", "torch": "?", **doc["versions"]}
    out = [MARKDOWN_HEAD.format(**versions, families=doc["families"], command=command, jobs=doc["jobs"],
                                timeout=doc["timeout"], **{k.replace("-", "_"): v for k, v in secs.items()}),
           "| setting | agreeing | wrong | estimate off | unknown | skipped |", "|---|---:|---:|---:|---:|---:|"]
    for name in SETTINGS:
        v = summary[name]["verdicts"]
        out.append(f"| {name} | {v.get('agreeing', 0)} | {v.get('wrong', 0)} | {v.get('estimate off', 0)} | "
                   f"{v.get('unknown', 0)} | {v.get('skipped', 0)} |")
    out += ["", "## By field", "", "agree / wrong / estimate off (a labelled estimate, more than 1% off) / "
            "unknown (null) / untested (no truth: the meta profile "
            "did not settle the field from the code), over the families not skipped.", "",
            "| setting | " + " | ".join(FIELDS) + " |", "|---|" + "---:|" * len(FIELDS)]
    for name in SETTINGS:
        cells = [" / ".join(str(summary[name]["fields"][f].get(s, 0)) for s in STATUSES) for f in FIELDS]
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    out += ["", "## Skipped, by reason", "", "| reason | " + " | ".join(SETTINGS) + " |",
            "|---|" + "---:|" * len(SETTINGS)]
    reasons = Counter[str]()
    for name in SETTINGS:
        reasons.update(summary[name]["skipped"])
    for reason, _ in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])):
        cells = [str(summary[name]["skipped"].get(reason, 0)) for name in SETTINGS]
        out.append(f"| {reason.replace('|', '/')} | " + " | ".join(cells) + " |")
    out += ["", "## Wrong, per family", "", "| family | field | settings | value | truth |", "|---|---|---|---|---|"]
    out += [f"| {' | '.join(cells)} |" for cells in wrong_rows(doc["rows"])]
    out += ["", "## Layer counts: the rules against the code", "", LAYER_NOTE, "",
            "| family | quantity | rules | code |", "|---|---|---:|---:|"]
    out += [f"| {row['family']} | {quantity} | {_show(values[0])} | {_show(values[1])} |"
            for row in doc["rows"] for quantity, values in sorted(row.get("layer_counts_disagree", {}).items())]
    return "\n".join(out) + "\n"


LAYER_NOTE = """\
The meta profile's `witnesses-disagree` findings on layer counts (decoder, MoE, recurrent, sliding-window
layers): the config rules' layout against the layer runs of the built model, as the profile reports them."""
MARKDOWN_HEAD = """\
# Family sweep

Every `model_type` that transformers {transformers} registers ({families} families), built from its
default config (`CONFIG_MAPPING[model_type]()`, written whole as config.json), and introspect's
profile of it in three settings:

- **rules**: config.json through the config rules alone;
- **config-class**: plus the model_code task where transformers imports but torch does not;
- **meta**: plus the same task with torch {torch}, which builds the model on the meta device.

Truth is the meta build: the code's own parameter total (within 1%) and decoder-layer count, and
the meta profile's layer kinds, attention purity and KV bytes per token where that profile says
the model code settled them. A null is *unknown*, counted apart from *wrong*; in the meta
setting, a field the profile did not settle from the code also counts as unknown. A family is
*skipped* when its default config cannot be built, the meta build fails or times out
(no truth), or its setting's driver skipped it. Generated by:

    {command}

with {jobs} driver processes per venv and a {timeout} s alarm per family. Wall time on this
machine: {total} s ({config_class} s config-class stage, {meta} s meta stage, {compare} s profiles).
Every row, with its values and truth: the sweep's `--json` output. The same code on a fixed
sample of 36 families: tests/witnesses/test_family_sweep.py.

## Families
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2, help="driver processes per venv (default 2)")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT, help="seconds per family")
    parser.add_argument("--json", type=Path, help="write every row here")
    parser.add_argument("--markdown", type=Path, default=REPO / "docs" / "family-sweep.md")
    parser.add_argument("--families", help="comma-separated model_types (default: all)")
    parser.add_argument("--torch-python", type=Path, help="default: the torch test venv (built on first use)")
    args = parser.parse_args(argv)
    families = args.families.split(",") if args.families else all_families()
    if args.torch_python is None:
        args.torch_python = torch_venv() / "bin" / "python"
    doc = sweep(families, Path(sys.executable), args.torch_python, max(1, args.jobs), args.timeout)
    command = "scripts/sweep_families " + " ".join(argv if argv is not None else sys.argv[1:])
    args.markdown.write_text(markdown(doc, command.strip()), encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(*(f"{name}: {doc['summary'][name]['verdicts']}" for name in SETTINGS), sep="\n", file=sys.stderr)
    print(f"{doc['seconds']['total']} s; wrote {args.markdown}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
