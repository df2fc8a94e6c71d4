"""The model page: the five answers with their witnesses, the layer map, the parameter breakdown,
the tokenizer card and the findings of one profile (``introspect.profile/v1``).

Nothing here computes a fact: every figure is the profile's, and what the profile leaves null
is shown as unknown with the reason it gives.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from introspect.analysis.result import target_where
from introspect.cli.render import FIVE_QUESTIONS
from introspect.remote.contract import as_dict
from introspect.report import layer_map as maps
from introspect.report import params as param_view

SEVERITIES = ("error", "warning", "info")
WITNESSES_SHOWN = 6  # config keys listed under an answer; the rest are counted


@dataclass
class Answer:
    question: str
    words: str | None  # None: the profile has no answer to this question
    witnesses: list[str]  # "config key = value", as read
    more: int  # witnesses not listed


@dataclass
class Token:
    name: str
    token: str | None
    id: int | None


@dataclass
class Template:
    present: bool
    source: str | None
    sha256: str | None
    sample: str | None  # the render of the fixed conversation, as the profile holds it
    sample_error: str | None  # why it did not render


@dataclass
class Finding:
    severity: str
    code: str
    message: str
    fix: str | None


@dataclass
class TokenizerCard:
    verdict: str
    ok: bool | None
    rows: list[tuple[str, str]]
    ids: list[Token]
    specials: list[Token]
    specials_total: int
    template: Template
    mask_note: str


@dataclass
class ModelPage:
    id: str
    title: str
    where: str
    facts: list[tuple[str, str]]
    answers: list[Answer]
    confidence: str | None
    layers: maps.LayerMap
    layer_svg: Markup | None
    params: param_view.Params
    params_svg: Markup | None
    tokenizer: TokenizerCard
    findings: dict[str, list[Finding]]
    kind: str = field(default="model", init=False)


def model_page(profile: dict[str, Any], page_id: str, label: str) -> ModelPage:
    arch = as_dict(profile.get("architecture"))
    target = as_dict(profile.get("target"))
    name = str(arch.get("model_type") or "unknown model type")
    layers = maps.layer_map(arch)
    drawn = maps.draw(layers, f"layer map of {name}: one cell per decoder layer")
    params = param_view.params_of(arch)
    bar = param_view.draw(params, f"parameters of {name} by component")
    return ModelPage(page_id, f"{name} ({label})", f"{target_where(target)}:{target.get('model_path')}",
                     _facts(profile), _answers(arch), _confidence(arch), layers, drawn.markup() if drawn else None,
                     params, bar.markup() if bar else None, tokenizer_card(as_dict(profile.get("tokenizer"))),
                     _findings(profile))


def _answers(arch: dict[str, Any]) -> list[Answer]:
    summary, evidence = as_dict(arch.get("summary")), as_dict(arch.get("evidence"))
    out = []
    for question, key, group in FIVE_QUESTIONS:
        pairs = [f"{k} = {_value(v)}" for k, v in as_dict(evidence.get(group)).items()]
        words = summary.get(key)
        out.append(Answer(question, str(words) if words else None, pairs[:WITNESSES_SHOWN],
                          max(0, len(pairs) - WITNESSES_SHOWN)))
    return out


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _confidence(arch: dict[str, Any]) -> str | None:
    confidence = as_dict(arch.get("confidence"))
    if confidence.get("level"):
        return f"{confidence['level']}: {confidence.get('reason')}"
    return as_dict(arch.get("summary")).get("confidence")


def _facts(profile: dict[str, Any]) -> list[tuple[str, str]]:
    arch, files = as_dict(profile.get("architecture")), as_dict(profile.get("files"))
    quant = as_dict(arch.get("quantization"))
    kv = as_dict(arch.get("kv_cache"))
    rows = [("model type", str(arch.get("model_type") or "unknown")),
            ("architectures", ", ".join(map(str, arch.get("architectures") or [])) or "not stated"),
            ("decoder layers", str(arch.get("num_layers") if arch.get("num_layers") is not None else "unknown")),
            ("hidden size", _known(arch.get("hidden_size"))), ("vocabulary", _known(arch.get("vocab_size"))),
            ("max context", _known(arch.get("max_context"))), ("dtype", _known(arch.get("dtype"))),
            ("quantization", " ".join(str(quant[k]) for k in ("method", "bits", "format") if quant.get(k))
             if quant else "none declared")]
    if kv.get("bytes_per_token") is not None:
        rows.append(("KV cache", f"{kv['bytes_per_token']:,} bytes per token ({kv.get('dtype') or 'dtype assumed'})"
                     + (f", {kv['state_bytes_per_sequence']:,} bytes of state per sequence"
                        if kv.get("state_bytes_per_sequence") else "")))
    else:
        rows.append(("KV cache", "unknown: " + str(kv.get("why") or "the profile states no cache geometry")))
    if files.get("status") not in (None, "ok"):
        rows.append(("model dir", str(files.get("status"))))
    return rows


def _known(value: Any) -> str:
    return "unknown" if value is None else (f"{value:,}" if isinstance(value, int) else str(value))


def tokenizer_card(tok: dict[str, Any]) -> TokenizerCard:
    auto = as_dict(tok.get("autotokenizer"))
    ok = auto.get("ok") if isinstance(auto.get("ok"), bool) else None
    if ok and auto.get("stand_in"):
        verdict, ok = f"stand-in: {auto.get('class')} made up from model_type ({auto.get('stand_in_reason')})", False
    elif ok:
        verdict = f"AutoTokenizer loads it ({auto.get('class')}, transformers {auto.get('transformers_version')})"
    elif ok is False:
        verdict = f"AutoTokenizer fails: {auto.get('type')}: {auto.get('cause') or auto.get('message')}"
    else:
        verdict = f"not judged: {auto.get('reason') or 'no tokenizer load ran'}"
    rows = [("class", str(tok.get("class") or tok.get("declared_class") or "not stated")),
            ("loaded by", str(tok.get("source")) if tok.get("loaded") else "nothing: facts from the files"),
            ("vocab size", _known(tok.get("vocab_size"))), ("len(tokenizer)", _known(tok.get("len")))]
    ids = [Token(name, as_dict(tok.get(name)).get("token"), as_dict(tok.get(name)).get("id"))
           for name in ("bos", "eos", "pad", "unk", "mask")]
    specials = [Token("special", as_dict(s).get("token"), as_dict(s).get("id")) for s in tok.get("special_tokens") or []]
    total = tok.get("special_tokens_total")
    return TokenizerCard(verdict, ok, rows, ids, specials, total if isinstance(total, int) else len(specials),
                         *_template(as_dict(tok.get("chat_template"))))


def _template(template: dict[str, Any]) -> tuple[Template, str]:
    error = as_dict(template.get("sample_error"))
    sample = template.get("sample")
    found = Template(template.get("present") is True, _opt(template.get("source")), _opt(template.get("sha256")),
                     sample if isinstance(sample, str) else None,
                     f"{error.get('type')}: {error.get('message')}" if error else None)
    return found, _mask_note(found)


def _opt(value: Any) -> str | None:
    return None if value is None else str(value)


def _mask_note(template: Template) -> str:
    """The profile renders a sample but locates no assistant-mask spans in it: say where they are checked."""
    if not template.present:
        return "no chat template: nothing to mask"
    return ("this profile holds no assistant-mask spans (the sample is shown as rendered); "
            "introspect preflight checks that assistant-only loss masks can be built from this template")


def _findings(profile: dict[str, Any]) -> dict[str, list[Finding]]:
    grouped: dict[str, list[Finding]] = {severity: [] for severity in SEVERITIES}
    for item in map(as_dict, profile.get("findings") or []):
        severity = str(item.get("severity"))
        grouped.setdefault(severity, []).append(Finding(severity, str(item.get("code")), str(item.get("message")),
                                                        _opt(item.get("fix"))))
    return grouped


__all__ = ["Answer", "ModelPage", "TokenizerCard", "model_page", "tokenizer_card"]
