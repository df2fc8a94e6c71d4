"""The Witnesses table of the human report: what the config rules, the model's code and the weights say.

Everything comes from ``architecture.params.sources`` / ``architecture.layers.sources``
(introspect.analysis.architecture.witnesses); nothing is computed here beyond formatting.
"""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from introspect.cli.render import _kv, _row, human_count
from introspect.documents.profile import ProfileDocument
from introspect.documents.profile_architecture import Architecture, CodeLayerCounts, CodeWitness
from introspect.remote.contract import as_dict


def _sizes(total: int | None, active: int | None = None) -> str:
    shown = f", {human_count(active)} active" if active is not None else ""
    return f"{human_count(total)} total{shown}"


def _code_row(code: CodeWitness, layers: CodeLayerCounts | CodeWitness | None) -> str:
    status = code.status
    if status != "built":
        cause = f" ({code.cause})" if code.cause else ""
        return f"{status}{cause}: {code.reason}"
    origin = "the model dir's own code" if code.remote_code else "transformers' built-in class"
    text = f"{_sizes(code.total, code.active)}; {code.class_} from {origin}"
    if code.experts_per_token:
        text += f"; {code.experts_per_token} x {human_count(code.one_expert)} per expert"
    runs = layers.runs if isinstance(layers, CodeLayerCounts) else []  # as the remote task described them
    if runs:
        shown = ", ".join(f"{as_dict(r).get('count')} x {as_dict(r).get('class')}"
                          f" ({as_dict(r).get('mixer')}, {as_dict(r).get('ffn')})" for r in runs[:4])
        text += f"\nlayers: {shown}" + (f", +{len(runs) - 4} runs" if len(runs) > 4 else "")
    return text


def _class_row(arch: Architecture) -> str:
    """What the config class said: which class, and whether its reading settled the layers."""
    spoke = arch.config_class
    if spoke is None:
        return "not run (no transformers in the venv, --no-model-code, or raw facts from an older probe)"
    fallback = " (transformers' own class: the model's code could not be loaded)" if spoke.fallback else ""
    role = ("settled the layer layout config.json alone left unknown" if arch.layers.settled_by == "config_class"
            else "filled the defaults of absent keys")
    return f"{spoke.class_}{fallback}: {role}"


def witnesses_section(profile: ProfileDocument) -> Table:
    arch = profile.architecture
    params, sources, layer_sources = arch.params, arch.params.sources, arch.layers.sources
    table = _kv("Witnesses")
    config, code, weights = (sources.config, sources.model_code, sources.weights) if sources else (None, None, None)
    _row(table, "config rules", escape(_sizes(config.total, config.active)) if config else "no estimate (sizes missing)")
    _row(table, "config class", escape(_class_row(arch)))
    _row(table, "model's code", escape(_code_row(code, layer_sources.model_code if layer_sources else None))
         if code else "not run (raw facts from an older probe)")
    _row(table, "weights", escape(_sizes(weights.total)) if weights else "no safetensors headers read")
    if params.source:
        why_total, why_active = (params.why.total, params.why.active) if params.why else (None, None)
        _row(table, "settled", escape(f"total from {params.source} ({why_total}); active from "
                                      f"{params.active_source} ({why_active})"))
    disagree = [f for f in profile.findings if f.code == "witnesses-disagree"]
    _row(table, "agreement", "[yellow]" + escape(f"{len(disagree)} disagreement(s), see Findings") + "[/yellow]"
         if disagree else "no disagreement between the witnesses that spoke")
    return table
