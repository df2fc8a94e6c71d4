"""The Witnesses table of the human report: what the config rules, the model's code and the weights say.

Everything comes from ``architecture.params.sources`` / ``architecture.layers.sources``
(introspect.analysis.architecture.witnesses); nothing is computed here beyond formatting.
"""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from introspect.cli.render import _kv, _row, human_count
from introspect.remote.contract import as_dict


def _sizes(source: dict[str, Any]) -> str:
    active = f", {human_count(source.get('active'))} active" if source.get("active") is not None else ""
    return f"{human_count(source.get('total'))} total{active}"


def _code_row(code: dict[str, Any], layers: dict[str, Any]) -> str:
    status = code.get("status")
    if status != "built":
        cause = f" ({code.get('cause')})" if code.get("cause") else ""
        return f"{status}{cause}: {code.get('reason')}"
    origin = "the model dir's own code" if code.get("remote_code") else "transformers' built-in class"
    text = f"{_sizes(code)}; {code.get('class')} from {origin}"
    if code.get("experts_per_token"):
        text += f"; {code.get('experts_per_token')} x {human_count(code.get('one_expert'))} per expert"
    runs = layers.get("runs") or []
    if runs:
        shown = ", ".join(f"{as_dict(r).get('count')} x {as_dict(r).get('class')}"
                          f" ({as_dict(r).get('mixer')}, {as_dict(r).get('ffn')})" for r in runs[:4])
        text += f"\nlayers: {shown}" + (f", +{len(runs) - 4} runs" if len(runs) > 4 else "")
    return text


def _class_row(arch: dict[str, Any]) -> str:
    """What the config class said: which class, and whether its reading settled the layers."""
    spoke = as_dict(arch.get("config_class"))
    if not spoke:
        return "not run (no transformers in the venv, --no-model-code, or raw facts from an older probe)"
    fallback = " (transformers' own class: the model's code could not be loaded)" if spoke.get("fallback") else ""
    settled = as_dict(arch.get("layers")).get("settled_by")
    role = ("settled the layer layout config.json alone left unknown" if settled == "config_class"
            else "filled the defaults of absent keys")
    return f"{spoke.get('class')}{fallback}: {role}"


def witnesses_section(profile: dict[str, Any]) -> Table:
    arch = as_dict(profile.get("architecture"))
    params, layers = as_dict(arch.get("params")), as_dict(arch.get("layers"))
    sources, layer_sources = as_dict(params.get("sources")), as_dict(layers.get("sources"))
    table = _kv("Witnesses")
    config, code, weights = (as_dict(sources.get(k)) for k in ("config", "model_code", "weights"))
    _row(table, "config rules", escape(_sizes(config)) if config else "no estimate (sizes missing)")
    _row(table, "config class", escape(_class_row(arch)))
    _row(table, "model's code", escape(_code_row(code, as_dict(layer_sources.get("model_code"))))
         if code else "not run (raw facts from an older probe)")
    _row(table, "weights", escape(_sizes(weights)) if weights else "no safetensors headers read")
    if params.get("source"):
        why = as_dict(params.get("why"))
        _row(table, "settled", escape(f"total from {params.get('source')} ({why.get('total')}); active from "
                                      f"{params.get('active_source')} ({why.get('active')})"))
    disagree = [f for f in profile.get("findings") or [] if as_dict(f).get("code") == "witnesses-disagree"]
    _row(table, "agreement", "[yellow]" + escape(f"{len(disagree)} disagreement(s), see Findings") + "[/yellow]"
         if disagree else "no disagreement between the witnesses that spoke")
    return table
