"""Three witnesses of a model's size and layers, and their agreement. Pure: no I/O.

- ``config``: the family rules applied to config.json (:mod:`introspect.analysis.architecture.params`,
  :mod:`introspect.analysis.architecture.layers`): always there, an estimate.
- ``model_code``: the model built from its own code on the meta device on the host
  (remote task ``model_code``): exact counts by component, the layer classes.
- ``weights``: the safetensors headers (:mod:`introspect.analysis.architecture.safetensors_count`,
  :mod:`introspect.analysis.architecture.weights_check`): what is stored.

``params`` and ``layers`` of the architecture section get ``sources`` (every witness
that spoke, or why one did not) and the value the verdict settled on with ``why``.
Witnesses more than :data:`TOLERANCE` apart are a warning that names both values and
the components where they differ. The config-versus-weights total already has its
own finding (``params-mismatch``), so it is not repeated here.
"""

from __future__ import annotations

import shlex
from typing import Any

from introspect.analysis.architecture.code_settle import settle_layers_from_code
from introspect.analysis.architecture.kinds import SLIDING
from introspect.analysis.architecture.mixers import RECURRENT_KINDS
from introspect.analysis.architecture.moe import SPARSE
from introspect.analysis.architecture.summary import human
from introspect.analysis.findings import Finding, Severity, pip_fix
from introspect.analysis.tokenizer.tokenizer_limits import code_limit_finding
from introspect.remote.contract import as_dict, as_list

TOLERANCE = 0.01  # the config estimate is held to 1% of the stored count (realconfigs README)
# Components differing by less than this share of the total are noise (norms, biases).
COMPONENT_NOISE = 0.001
WITNESS_WORDS = {"config": "the config rules", "model_code": "the model's code", "weights": "the weights"}
WHY_TOTAL = {
    "weights": "the safetensors headers count every stored tensor (quantization-aware)",
    "model_code": "the model's own code, built on the meta device, counts every parameter exactly",
    "config": "estimated from config.json by the family's rules (no weights headers, no model code)",
}
WHY_ACTIVE = {
    "model_code": "from the built model's structure: experts per token x one routed expert + everything else",
    "config": "estimated from config.json by the family's rules",
}
# Causes of a failed build that say "this witness cannot speak here" rather than "something is wrong".
QUIET_CAUSES = {"missing-package", "remote-code-refused", "unknown-architecture"}


def model_code_witness(raw: dict[str, Any]) -> dict[str, Any] | None:
    """What the model-code witness said: ``{status: built|failed|skipped, ...}``; None for raw facts
    gathered before the witness existed."""
    options = as_dict(raw.get("options"))
    probe = raw.get("model_code_probe")
    if options.get("load_model_code") is False:
        return {"status": "skipped", "reason": "--no-model-code"}
    if not isinstance(probe, dict):
        error = next((e for e in as_list(raw.get("errors"))
                      if isinstance(e, dict) and e.get("probe") == "model_code"), None)
        if error is None:
            return None
        return {"status": "failed", "cause": "timeout" if error.get("type") == "timeout" else error.get("type"),
                "reason": error.get("message")}
    if not probe.get("built") or not isinstance(probe.get("params"), dict):
        error = as_dict(probe.get("error"))
        return {"status": "failed", "cause": error.get("cause"), "stage": error.get("stage"),
                "reason": f"{error.get('type')}: {error.get('message')}" if error else "no model was built",
                "missing_packages": list(error.get("missing_packages") or [])}
    params = as_dict(probe.get("params"))
    components = {k: v for k, v in as_dict(params.get("components")).items() if isinstance(v, int)}
    total = params.get("total") if isinstance(params.get("total"), int) else None
    return {"status": "built", "class": probe.get("class"), "built_with": probe.get("built_with"),
            "remote_code": probe.get("remote_code"),
            "total": total - components.get("mtp", 0) if total is not None else None,
            "active": params.get("active"), "mtp": components.get("mtp", 0), "components": components,
            "experts_per_token": params.get("experts_per_token"), "moe_layers": params.get("moe_layers"),
            "one_expert": params.get("one_expert"), "seconds": as_dict(probe.get("seconds")),
            "peak_rss_kib": probe.get("peak_rss_kib")}


def apply_witnesses(arch: dict[str, Any], raw: dict[str, Any]) -> list[Finding]:
    """Add ``sources`` / ``why`` to ``arch["params"]`` and ``arch["layers"]``; the findings. Never raises."""
    try:
        return _apply(arch, raw)
    except Exception as exc:  # malformed raw facts must not cost the rest of the profile
        return [Finding(Severity.WARNING, "witnesses-failed",
                        f"the witnesses could not be compared: {type(exc).__name__}: {exc}"[:500],
                        "re-run the probe; report the raw facts to the introspect maintainers if it persists")]


def _apply(arch: dict[str, Any], raw: dict[str, Any]) -> list[Finding]:
    code = model_code_witness(raw)
    findings = _status_findings(code, raw)
    params = arch.get("params")
    if isinstance(params, dict):
        findings += _settle_params(params, code)
        if "model_code" in (params.get("source"), params.get("active_source")):
            _resummarise(arch, params)
    layers = arch.get("layers")
    if isinstance(layers, dict):
        findings += _settle_layers(layers, arch, raw, code)
        if code is not None and code.get("status") == "built":
            findings += settle_layers_from_code(arch, as_dict(raw.get("model_code_probe")))
    return findings


def _settle_params(params: dict[str, Any], code: dict[str, Any] | None) -> list[Finding]:
    estimate = as_dict(params.get("config_estimate"))
    config = None
    if estimate.get("total") is not None:
        config = {"total": estimate.get("total"), "active": estimate.get("active")}  # components: breakdown
    stored = as_dict(params.get("safetensors"))
    weights = None
    if stored.get("total"):
        weights = {"total": stored["total"] - (stored.get("mtp") or 0), "mtp": stored.get("mtp"),
                   "vision": stored.get("vision")}
    built = code if code is not None and code.get("status") == "built" else None
    params["sources"] = {"config": config, "model_code": code, "weights": weights}
    if params.get("source") != "safetensors" and built is not None and built.get("total") is not None:
        params["total"], params["source"] = built["total"], "model_code"
    active_source = "config" if params.get("active") is not None else None
    if built is not None and built.get("active") is not None:
        params["active"], active_source = built["active"], "model_code"
    params["active_source"] = active_source
    params["why"] = {"total": WHY_TOTAL.get(str(params.get("source"))),
                     "active": WHY_ACTIVE.get(str(active_source))}
    with_components = dict(config, components=as_dict(params.get("breakdown"))) if config else None
    return _params_disagreements(with_components, built, weights)


def _resummarise(arch: dict[str, Any], params: dict[str, Any]) -> None:
    """The plain-words size line with the settled numbers (the rules' summary quoted the estimate)."""
    summary = arch.get("summary")
    if not isinstance(summary, dict):
        return
    source = str(params.get("source"))
    if params.get("active_source") != source:
        source += f", active: {params.get('active_source')}"
    summary["size"] = (f"{arch.get('num_layers')} layers; {human(params.get('total'))} parameters total, "
                       f"{human(params.get('active'))} active per token (source: {source})")


def _params_disagreements(config: dict[str, Any] | None, code: dict[str, Any] | None,
                          weights: dict[str, Any] | None) -> list[Finding]:
    out: list[Finding] = []
    if code is None:
        return out
    for name, other in (("config", config), ("weights", weights)):
        if other is None:
            continue
        for quantity in ("total", "active"):
            a, b = other.get(quantity), code.get(quantity)
            if isinstance(a, int) and isinstance(b, int) and _apart(a, b):
                where = _component_gaps(as_dict(other.get("components")), as_dict(code.get("components")),
                                        max(a, b), name)
                out.append(Finding(
                    Severity.WARNING, "witnesses-disagree",
                    f"{quantity} parameters: {WITNESS_WORDS[name]} say {human(a)} ({a}), the model's code "
                    f"{human(b)} ({b}){where}",
                    "the model's code is exact for what it builds: check the config keys the rules read "
                    "(evidence.params), or that config.json belongs to this code and these weights",
                    {"quantity": quantity, "witnesses": [name, "model_code"], "values": [a, b]}))
    return out


def _apart(a: int, b: int) -> bool:
    return abs(a - b) > TOLERANCE * max(abs(a), abs(b), 1)


def _component_gaps(theirs: dict[str, Any], code: dict[str, Any], scale: int, name: str) -> str:
    if not theirs:
        return ""
    gaps = []
    for component in sorted(set(theirs) | set(code)):
        a, b = int(theirs.get(component) or 0), int(code.get(component) or 0)
        if component != "mtp" and abs(a - b) > COMPONENT_NOISE * scale:
            gaps.append((abs(a - b), f"{component}: {name} {human(a)}, model code {human(b)}"))
    gaps.sort(reverse=True)
    return "; they differ in " + "; ".join(text for _, text in gaps[:3]) if gaps else ""


def _status_findings(code: dict[str, Any] | None, raw: dict[str, Any]) -> list[Finding]:
    """Why the code witness did not speak, when that is worth saying."""
    if code is None or code.get("status") != "failed" or code.get("cause") == "timeout":
        return []  # a timeout is already an error finding (probe-timeout)
    target = as_dict(raw.get("target"))
    if code.get("cause") == "memory-limit":  # the supervisor killed the build: the one finding that says so
        limit = as_dict(as_dict(raw.get("resources")).get("model_code")).get("memory_limit")
        return [code_limit_finding(str(code.get("reason")), dict(target), limit)]
    if code.get("cause") in QUIET_CAUSES:
        spoke = as_dict(raw.get("model_code_probe")).get("config_dict") is not None
        what = ("the config class spoke; the model was not built on the meta device" if spoke
                else "model-code witness not run")
        reason = str(code.get("reason")).strip().split("\n")[0]  # transformers' advice paragraphs stay out
        return [Finding(Severity.INFO, "model-code-unavailable", f"{what}: {reason}", _quiet_fix(code, target))]
    fix = "# the verdicts rest on config.json and the weights; pass --no-model-code to skip this build"
    if code.get("cause") == "link-outside":  # the build was refused, not failed: the link is what to fix
        model = str(target.get("model_path") or ".")
        fix = (f"ls -l {shlex.quote(model)}  # replace each link with the model's own file in {model}: "
               "links out of it are never followed (or pass --no-model-code to skip this build)")
    return [Finding(Severity.WARNING, "model-code-failed",
                    f"the model's code could not be built on the meta device ({code.get('cause')}, at "
                    f"{code.get('stage')}): {code.get('reason')}", fix)]


def _quiet_fix(code: dict[str, Any], target: dict[str, Any]) -> str:
    """An optional extra, not a repair: a command alone, the why after ``#`` (torch is gigabytes,
    and a serving venv is complete without it)."""
    missing = [str(name) for name in code.get("missing_packages") or []]
    if missing:
        return (" ".join([pip_fix(target, missing[0]), *(shlex.quote(name) for name in missing[1:])])
                + "  # only for the model-code witness (meta-device build); the profile is complete "
                  "without it (or pass --no-model-code)")
    if code.get("cause") == "remote-code-refused":
        return "# the model-code witness runs the model's own code: probe again and drop --no-remote-code to allow it"
    upgrade = pip_fix(target, "transformers").replace(" install ", " install --upgrade ", 1)
    return (f"{upgrade}  # only if this family is newer than the installed transformers; "
            "the profile is complete without the model-code witness (or pass --no-model-code)")


def _settle_layers(layers: dict[str, Any], arch: dict[str, Any], raw: dict[str, Any],
                   code: dict[str, Any] | None) -> list[Finding]:
    config = _config_layer_counts(layers, arch)
    probe = as_dict(raw.get("model_code_probe"))
    code_layers = _code_layer_counts(probe) if code is not None and code.get("status") == "built" else None
    layers["sources"] = {"config": config, "model_code": code_layers if code_layers is not None else code,
                         "weights": arch.get("confirmed_by_weights")}
    layers["why"] = ("per-layer kinds from the config rules" + (
        "; counts checked against the model's code" if code_layers is not None else "")
        + ("; expert and MLA layers checked against the weights" if arch.get("confirmed_by_weights") else ""))
    if code_layers is None:
        return []
    out = []
    for key, words in (("layers", "decoder layers"), ("moe_layers", "MoE layers"),
                       ("recurrent_layers", "recurrent (non-attention) layers"), ("sliding_layers", "sliding-window layers")):
        a, b = config.get(key), code_layers.get(key)
        if isinstance(a, int) and isinstance(b, int) and a != b:
            out.append(Finding(Severity.WARNING, "witnesses-disagree",
                               f"{words}: the config rules say {a}, the model's code {b}",
                               "the model's code is what runs: check the layout keys the rules read "
                               "(evidence.layers)",
                               {"quantity": key, "witnesses": ["config", "model_code"], "values": [a, b]}))
    return out


def _config_layer_counts(layers: dict[str, Any], arch: dict[str, Any]) -> dict[str, Any]:
    pattern = [k for k in as_list(layers.get("pattern")) if isinstance(k, str)]
    ffn = as_list(layers.get("ffn"))
    return {"layers": arch.get("num_layers"),
            "moe_layers": sum(1 for kind in ffn if kind == SPARSE) if ffn else None,
            "recurrent_layers": sum(1 for k in pattern if any(p in RECURRENT_KINDS for p in k.split("+"))),
            "sliding_layers": sum(1 for k in pattern if k == SLIDING)}


def _code_layer_counts(probe: dict[str, Any]) -> dict[str, Any]:
    section = as_dict(probe.get("layers"))
    runs = [r for r in as_list(section.get("runs")) if isinstance(r, dict)]
    recurrent = sum(int(r.get("count") or 0) for r in runs if "recurrent" in as_list(r.get("mixer_kinds")))
    return {"layers": section.get("count"), "moe_layers": as_dict(probe.get("params")).get("moe_layers"),
            "recurrent_layers": recurrent, "sliding_layers": _code_sliding(probe, runs),
            "runs": runs, "config": as_dict(probe.get("config"))}


def _code_sliding(probe: dict[str, Any], runs: list[dict[str, Any]]) -> int | None:
    """Sliding layers as the code sees them: the config class's layer_types, else the layers' own flags."""
    types = as_list(as_dict(probe.get("config")).get("layer_types"))
    if types:
        return sum(int(as_dict(r).get("count") or 0) for r in types if "sliding" in str(as_dict(r).get("value")))
    flagged = [r for r in runs if "is_sliding" in as_dict(r.get("attrs"))]
    if flagged:
        return sum(int(r.get("count") or 0) for r in flagged if as_dict(r.get("attrs")).get("is_sliding"))
    return None
