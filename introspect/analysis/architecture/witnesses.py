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
from dataclasses import dataclass, field
from typing import Any

from introspect.analysis.architecture.code_settle import settle_layers_from_code
from introspect.analysis.architecture.kinds import SLIDING
from introspect.analysis.architecture.mixers import RECURRENT_KINDS
from introspect.analysis.architecture.moe import SPARSE
from introspect.analysis.architecture.summary import human
from introspect.analysis.findings import Finding, Severity, pip_fix
from introspect.analysis.tokenizer.tokenizer_limits import code_limit_finding
from introspect.documents.base import Number
from introspect.documents.profile_architecture import (
    Architecture,
    CodeLayerCounts,
    CodeWitness,
    LayerCounts,
    Layers,
    LayerSources,
    ParamCounts,
    Params,
    ParamSources,
    ParamsWhy,
    WeightsCount,
)
from introspect.remote.contract import JSONObject, RawFacts, TargetBlock, as_dict, as_list

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


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def model_code_witness(raw: RawFacts) -> CodeWitness | None:
    """What the model-code witness said (built, failed or skipped); None for raw facts gathered
    before the witness existed. The task's reply is read as it came: every value is checked."""
    options = as_dict(raw.get("options"))
    probe = raw.get("model_code_probe")
    if options.get("load_model_code") is False:
        return CodeWitness(status="skipped", reason="--no-model-code")
    if not isinstance(probe, dict):
        error = next((e for e in as_list(raw.get("errors"))
                      if isinstance(e, dict) and e.get("probe") == "model_code"), None)
        if error is None:
            return None
        cause = "timeout" if error.get("type") == "timeout" else _str(error.get("type"))
        return CodeWitness(status="failed", cause=cause, reason=_str(error.get("message")))
    if not probe.get("built") or not isinstance(probe.get("params"), dict):
        error = as_dict(probe.get("error"))
        return CodeWitness(status="failed", cause=_str(error.get("cause")), stage=_str(error.get("stage")),
                           reason=f"{error.get('type')}: {error.get('message')}" if error else "no model was built",
                           missing_packages=[str(name) for name in as_list(error.get("missing_packages"))])
    params = as_dict(probe.get("params"))
    components = {str(k): v for k, v in as_dict(params.get("components")).items() if _int(v) is not None}
    total = _int(params.get("total"))
    seconds: dict[str, Number] = {str(k): v for k, v in as_dict(probe.get("seconds")).items()
                                  if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return CodeWitness(status="built", class_=_str(probe.get("class")), built_with=_str(probe.get("built_with")),
                       remote_code=probe.get("remote_code") if isinstance(probe.get("remote_code"), bool) else None,
                       total=total - components.get("mtp", 0) if total is not None else None,
                       active=_int(params.get("active")), mtp=components.get("mtp", 0), components=components,
                       experts_per_token=_int(params.get("experts_per_token")),
                       moe_layers=_int(params.get("moe_layers")), one_expert=_int(params.get("one_expert")),
                       seconds=seconds, peak_rss_kib=_int(probe.get("peak_rss_kib")))


def apply_witnesses(arch: Architecture, raw: RawFacts) -> list[Finding]:
    """Add ``sources`` / ``why`` to the architecture's ``params`` and ``layers``; the findings. Never raises."""
    try:
        return _apply(arch, raw)
    except Exception as exc:  # malformed raw facts must not cost the rest of the profile
        return [Finding(Severity.WARNING, "witnesses-failed",
                        f"the witnesses could not be compared: {type(exc).__name__}: {exc}"[:500],
                        "re-run the probe; report the raw facts to the introspect maintainers if it persists")]


def _apply(arch: Architecture, raw: RawFacts) -> list[Finding]:
    code = model_code_witness(raw)
    findings = _status_findings(code, raw)
    params = arch.params
    findings += _settle_params(params, code)
    if "model_code" in (params.source, params.active_source):
        _resummarise(arch, params)
    findings += _settle_layers(arch.layers, arch, raw, code)
    if code is not None and code.status == "built":
        findings += settle_layers_from_code(arch, as_dict(raw.get("model_code_probe")))
    return findings


def _settle_params(params: Params, code: CodeWitness | None) -> list[Finding]:
    estimate = params.config_estimate
    config = None
    if estimate.total is not None:
        config = ParamCounts(total=estimate.total, active=estimate.active)  # components: breakdown
    stored = params.safetensors
    weights = None
    if stored is not None and stored.total:
        weights = WeightsCount(total=stored.total - stored.mtp, mtp=stored.mtp, vision=stored.vision)
    built = code if code is not None and code.status == "built" else None
    params.sources = ParamSources(config=config, model_code=code, weights=weights)
    if params.source != "safetensors" and built is not None and built.total is not None:
        params.total, params.source = built.total, "model_code"
    active_source = "config" if params.active is not None else None
    if built is not None and built.active is not None:
        params.active, active_source = built.active, "model_code"
    params.active_source = active_source
    params.why = ParamsWhy(total=WHY_TOTAL.get(str(params.source)), active=WHY_ACTIVE.get(str(active_source)))
    return _params_disagreements(
        WitnessCounts(config.total, config.active, params.breakdown or {}) if config else None,
        WitnessCounts(built.total, built.active, built.components or {}) if built else None,
        WitnessCounts(weights.total, None) if weights else None)


def _resummarise(arch: Architecture, params: Params) -> None:
    """The plain-words size line with the settled numbers (the rules' summary quoted the estimate)."""
    source = str(params.source)
    if params.active_source != source:
        source += f", active: {params.active_source}"
    arch.summary.size = (f"{arch.num_layers} layers; {human(params.total)} parameters total, "
                         f"{human(params.active)} active per token (source: {source})")


@dataclass(frozen=True)
class WitnessCounts:
    """One witness's total and active parameters, and its per-component counts where it has them."""

    total: int | None
    active: int | None
    components: dict[str, int] = field(default_factory=dict)

    def quantity(self, name: str) -> int | None:
        return self.total if name == "total" else self.active


def _params_disagreements(config: WitnessCounts | None, code: WitnessCounts | None,
                          weights: WitnessCounts | None) -> list[Finding]:
    """The totals and active counts of the config rules and of the weights that the model's code contradicts."""
    out: list[Finding] = []
    if code is None:
        return out
    for name, other in (("config", config), ("weights", weights)):
        if other is None:
            continue
        for quantity in ("total", "active"):
            a, b = other.quantity(quantity), code.quantity(quantity)
            if a is not None and b is not None and _apart(a, b):
                where = _component_gaps(other.components, code.components, max(a, b), name)
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


def _component_gaps(theirs: dict[str, int], code: dict[str, int], scale: int, name: str) -> str:
    if not theirs:
        return ""
    gaps = []
    for component in sorted(set(theirs) | set(code)):
        a, b = int(theirs.get(component) or 0), int(code.get(component) or 0)
        if component != "mtp" and abs(a - b) > COMPONENT_NOISE * scale:
            gaps.append((abs(a - b), f"{component}: {name} {human(a)}, model code {human(b)}"))
    gaps.sort(reverse=True)
    return "; they differ in " + "; ".join(text for _, text in gaps[:3]) if gaps else ""


def _status_findings(code: CodeWitness | None, raw: RawFacts) -> list[Finding]:
    """Why the code witness did not speak, when that is worth saying."""
    if code is None or code.status != "failed" or code.cause == "timeout":
        return []  # a timeout is already an error finding (probe-timeout)
    target = raw.get("target") or TargetBlock()
    if code.cause == "memory-limit":  # the supervisor killed the build: the one finding that says so
        limit = as_dict(as_dict(raw.get("resources")).get("model_code")).get("memory_limit")
        return [code_limit_finding(str(code.reason), target, limit)]
    if code.cause in QUIET_CAUSES:
        spoke = as_dict(raw.get("model_code_probe")).get("config_dict") is not None
        what = ("the config class spoke; the model was not built on the meta device" if spoke
                else "model-code witness not run")
        reason = str(code.reason).strip().split("\n")[0]  # transformers' advice paragraphs stay out
        return [Finding(Severity.INFO, "model-code-unavailable", f"{what}: {reason}", _quiet_fix(code, target))]
    fix = "# the verdicts rest on config.json and the weights; pass --no-model-code to skip this build"
    if code.cause == "link-outside":  # the build was refused, not failed: the link is what to fix
        model = str(target.get("model_path") or ".")
        fix = (f"ls -l {shlex.quote(model)}  # replace each link with the model's own file in {model}: "
               "links out of it are never followed (or pass --no-model-code to skip this build)")
    return [Finding(Severity.WARNING, "model-code-failed",
                    f"the model's code could not be built on the meta device ({code.cause}, at "
                    f"{code.stage}): {code.reason}", fix)]


def _quiet_fix(code: CodeWitness, target: TargetBlock) -> str:
    """An optional extra, not a repair: a command alone, the why after ``#`` (torch is gigabytes,
    and a serving venv is complete without it)."""
    missing = list(code.missing_packages or [])
    if missing:
        return (" ".join([pip_fix(target, missing[0]), *(shlex.quote(name) for name in missing[1:])])
                + "  # only for the model-code witness (meta-device build); the profile is complete "
                  "without it (or pass --no-model-code)")
    if code.cause == "remote-code-refused":
        return "# the model-code witness runs the model's own code: probe again and drop --no-remote-code to allow it"
    upgrade = pip_fix(target, "transformers").replace(" install ", " install --upgrade ", 1)
    return (f"{upgrade}  # only if this family is newer than the installed transformers; "
            "the profile is complete without the model-code witness (or pass --no-model-code)")


def _settle_layers(layers: Layers, arch: Architecture, raw: RawFacts, code: CodeWitness | None) -> list[Finding]:
    config = _config_layer_counts(layers, arch.num_layers)
    probe = as_dict(raw.get("model_code_probe"))
    code_layers = _code_layer_counts(probe) if code is not None and code.status == "built" else None
    layers.sources = LayerSources(config=config, model_code=code_layers if code_layers is not None else code,
                                  weights=arch.confirmed_by_weights)
    layers.why = ("per-layer kinds from the config rules" + (
        "; counts checked against the model's code" if code_layers is not None else "")
        + ("; expert and MLA layers checked against the weights" if arch.confirmed_by_weights else ""))
    if code_layers is None:
        return []
    out = []
    for key, words in (("layers", "decoder layers"), ("moe_layers", "MoE layers"),
                       ("recurrent_layers", "recurrent (non-attention) layers"), ("sliding_layers", "sliding-window layers")):
        a, b = getattr(config, key), getattr(code_layers, key)
        if a is not None and b is not None and a != b:
            out.append(Finding(Severity.WARNING, "witnesses-disagree",
                               f"{words}: the config rules say {a}, the model's code {b}",
                               "the model's code is what runs: check the layout keys the rules read "
                               "(evidence.layers)",
                               {"quantity": key, "witnesses": ["config", "model_code"], "values": [a, b]}))
    return out


def _config_layer_counts(layers: Layers, num_layers: int | None) -> LayerCounts:
    pattern, ffn = layers.pattern or [], layers.ffn
    return LayerCounts(layers=num_layers, moe_layers=sum(1 for kind in ffn if kind == SPARSE) if ffn else None,
                       recurrent_layers=sum(1 for k in pattern if any(p in RECURRENT_KINDS for p in k.split("+"))),
                       sliding_layers=sum(1 for k in pattern if k == SLIDING))


def _code_layer_counts(probe: JSONObject) -> CodeLayerCounts:
    section = as_dict(probe.get("layers"))
    runs = [r for r in as_list(section.get("runs")) if isinstance(r, dict)]
    recurrent = sum(int(r.get("count") or 0) for r in runs if "recurrent" in as_list(r.get("mixer_kinds")))
    return CodeLayerCounts(layers=_int(section.get("count")),
                           moe_layers=_int(as_dict(probe.get("params")).get("moe_layers")),
                           recurrent_layers=recurrent, sliding_layers=_code_sliding(probe, runs),
                           runs=runs, config=as_dict(probe.get("config")))


def _code_sliding(probe: JSONObject, runs: list[JSONObject]) -> int | None:
    """Sliding layers as the code sees them: the config class's layer_types, else the layers' own flags."""
    types = as_list(as_dict(probe.get("config")).get("layer_types"))
    if types:
        return sum(int(as_dict(r).get("count") or 0) for r in types if "sliding" in str(as_dict(r).get("value")))
    flagged = [r for r in runs if "is_sliding" in as_dict(r.get("attrs"))]
    if flagged:
        return sum(int(r.get("count") or 0) for r in flagged if as_dict(r.get("attrs")).get("is_sliding"))
    return None
