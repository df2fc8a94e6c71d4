"""Witness 2a: the config rules run on the config as its class builds it, not only on the file. Pure.

transformers' config classes derive what config.json leaves out (every per-layer list their
``__init__`` computes, ``head_dim``, windows) and fill the defaults of absent keys
(``tie_word_embeddings``: True for Gemma, Mamba ...). The remote ``model_code`` task ships the
class's ``to_dict()`` (:mod:`introspect.remote.facts.model.model_code_config`); the same rules read
it. config.json read alone stays the answer where the rules understood it (the family rows were
written against the files, and a class may rename keys in ``to_dict``: transformers'
DeepseekV4Config does); where the file alone left the layer layout or the layer count unknown,
the class's reading settles them. A layout the two readings state differently is a finding
naming both values.
"""

from __future__ import annotations

from collections.abc import Callable

from introspect.analysis.architecture.layout_unknown import UNKNOWN_CODES
from introspect.analysis.findings import Finding, Severity
from introspect.documents.profile_architecture import Architecture, ConfigClass
from introspect.remote.contract import JSONObject, RawFacts, as_dict

Section = tuple[Architecture, list[Finding]]
# A verdict's value, as compared and quoted: a count, a flag, a name, or layer kinds with their counts.
Verdict = int | bool | str | dict[str, int] | None
# Verdicts compared between the file and the class: (words, reader).
COMPARED: tuple[tuple[str, Callable[[Architecture], Verdict]], ...] = (
    ("decoder layers", lambda a: a.num_layers),
    ("layer kinds", lambda a: a.layers.kinds),
    ("pure attention", lambda a: a.layers.pure_attention),
    ("attention type", lambda a: a.attention.type),
    ("KV cache bytes per token", lambda a: a.kv_cache.bytes_per_token if a.kv_cache is not None else None),
)


def class_config(raw: RawFacts) -> JSONObject | None:
    """The config class's ``to_dict()`` from the model-code task, when it ran far enough: config
    values as the host's class holds them."""
    probe = raw.get("model_code_probe")
    data = probe.get("config_dict") if isinstance(probe, dict) else None
    return data if isinstance(data, dict) and data else None


def with_class_defaults(config: JSONObject, derived: JSONObject) -> JSONObject:
    """config.json with the scalars its class filled in for absent keys (``tie_word_embeddings``, ``head_dim``,
    biases), sub-configs likewise. Lists the class derives are left out: the file's layout keys stay
    the rules' input, and a derived layout only settles where the file's was not understood."""
    out = dict(config)
    for key, value in derived.items():
        if key not in config and (value is None or isinstance(value, (bool, int, float, str))):
            out[key] = value
        elif isinstance(value, dict) and isinstance(config.get(key), dict):
            out[key] = with_class_defaults(config[key], value)
    return out


def settle_with_class(file_section: Section, class_section: Section, raw: RawFacts) -> Section:
    """The file's reading (with the class's defaults), or the class's own where the file left the layout or the
    layer count unknown; either way, the layouts the two readings state differently as findings."""
    file_arch, file_findings = file_section
    arch, findings = class_section
    if any(f.code == "analysis-failed" for f in findings):
        return file_section
    settles = (file_arch.layers.understood is False or file_arch.num_layers is None) \
        and arch.layers.understood is not False and arch.num_layers is not None
    if settles:
        # The file's "not stated" findings yield to the class's reading, which re-states what still holds.
        out = [f for f in file_findings if f.code not in UNKNOWN_CODES]
        out += [f for f in findings if f.key not in {g.key for g in out}]
        arch.layers.settled_by = "config_class"
    else:
        arch, out = file_arch, list(file_findings)
    for words, read in COMPARED:
        said, derived = read(file_arch), read(class_section[0])
        if said is not None and derived is not None and said != derived:
            out.append(Finding(
                Severity.WARNING, "witnesses-disagree",
                f"{words}: config.json read alone gives {_text(said)}, the config class "
                f"({_class_name(raw)}) {_text(derived)}",
                "# the class is what the model code reads" + (": its reading was used" if settles else
                                                               "; check the keys in evidence.layers"),
                {"quantity": words, "witnesses": ["config", "config_class"], "values": [said, derived]}))
    fallback = as_dict(as_dict(raw.get("model_code_probe")).get("config_fallback")) or None
    arch.config_class = ConfigClass(class_=_class_name(raw), fallback=fallback)
    return arch, out + _fallback_finding(raw)


def _text(value: Verdict) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{count} {kind}" for kind, count in sorted(value.items()))
    return str(value)


def _class_name(raw: RawFacts) -> str:
    return str(as_dict(as_dict(raw.get("model_code_probe")).get("config")).get("class") or "its class")


def _fallback_finding(raw: RawFacts) -> list[Finding]:
    fallback = as_dict(as_dict(raw.get("model_code_probe")).get("config_fallback"))
    if not fallback:
        return []
    return [Finding(
        Severity.WARNING, "config-class-native",
        f"the model's own config code could not be loaded ({fallback.get('reason')}); the installed "
        f"transformers' {fallback.get('class')} for model_type {fallback.get('model_type')!r} read it instead",
        "# copy the auto_map code files named in config.json into the model directory to use the model's own")]
