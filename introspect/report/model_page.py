"""The model page: the five answers with their witnesses, the layer map, the parameter breakdown,
the tokenizer card and the findings of one profile (``introspect.profile/v1``).

Nothing here computes a fact: every figure is the profile's, and what the profile leaves null
is shown as unknown with the reason it gives.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from markupsafe import Markup

from introspect.analysis.result import target_where
from introspect.cli.render import FIVE_QUESTIONS
from introspect.documents.profile import Finding as ProfileFinding
from introspect.documents.profile import ProfileDocument
from introspect.documents.profile_architecture import Architecture
from introspect.documents.profile_tokenizer import AutoTokenizer, ChatTemplate, Tokenizer
from introspect.remote.contract import JSONObject
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


def model_page(profile: ProfileDocument, page_id: str, label: str) -> ModelPage:
    arch, target = profile.architecture, profile.target
    name = arch.model_type or "unknown model type"
    layers = maps.layer_map(arch)
    drawn = maps.draw(layers, f"layer map of {name}: one cell per decoder layer")
    params = param_view.params_of(arch)
    bar = param_view.draw(params, f"parameters of {name} by component")
    return ModelPage(page_id, f"{name} ({label})", f"{target_where(target.to_dict())}:{target.model_path}",
                     _facts(profile), _answers(arch), _confidence(arch), layers, drawn.markup() if drawn else None,
                     params, bar.markup() if bar else None, tokenizer_card(profile.tokenizer),
                     _findings(profile.findings))


def _answers(arch: Architecture) -> list[Answer]:
    out = []
    for question, key, group in FIVE_QUESTIONS:
        evidence: JSONObject | None = getattr(arch.evidence, group)  # config keys and values, as read
        pairs = [f"{k} = {_value(v)}" for k, v in (evidence or {}).items()]
        words = getattr(arch.summary, key)
        out.append(Answer(question, str(words) if words else None, pairs[:WITNESSES_SHOWN],
                          max(0, len(pairs) - WITNESSES_SHOWN)))
    return out


def _value(value: object) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _confidence(arch: Architecture) -> str | None:
    if arch.confidence is not None and arch.confidence.level:
        return f"{arch.confidence.level}: {arch.confidence.reason}"
    return arch.summary.confidence


def _facts(profile: ProfileDocument) -> list[tuple[str, str]]:
    arch, quant, kv = profile.architecture, profile.architecture.quantization, profile.architecture.kv_cache
    rows = [("model type", arch.model_type or "unknown"),
            ("architectures", ", ".join(arch.architectures or []) or "not stated"),
            ("decoder layers", str(arch.num_layers) if arch.num_layers is not None else "unknown"),
            ("hidden size", _known(arch.hidden_size)), ("vocabulary", _known(arch.vocab_size)),
            ("max context", _known(arch.max_context)), ("dtype", _known(arch.dtype)),
            ("quantization", " ".join(str(v) for v in (quant.method, quant.bits, quant.format) if v)
             if quant is not None else "none declared")]
    if kv is not None and kv.bytes_per_token is not None:
        rows.append(("KV cache", f"{kv.bytes_per_token:,} bytes per token ({kv.dtype or 'dtype assumed'})"
                     + (f", {kv.state_bytes_per_sequence:,} bytes of state per sequence"
                        if kv.state_bytes_per_sequence else "")))
    else:
        rows.append(("KV cache", "unknown: " + ((kv.why if kv is not None else None)
                                                or "the profile states no cache geometry")))
    if profile.files.status not in (None, "ok"):
        rows.append(("model dir", str(profile.files.status)))
    return rows


def _known(value: int | str | None) -> str:
    return "unknown" if value is None else (f"{value:,}" if isinstance(value, int) else str(value))


def _verdict(auto: AutoTokenizer) -> tuple[str, bool | None]:
    if auto.ok and auto.stand_in:
        return f"stand-in: {auto.class_} made up from model_type ({auto.stand_in_reason})", False
    if auto.ok:
        return f"AutoTokenizer loads it ({auto.class_}, transformers {auto.transformers_version})", True
    if auto.ok is False:
        return f"AutoTokenizer fails: {auto.type}: {auto.cause or auto.message}", False
    return f"not judged: {auto.reason or 'no tokenizer load ran'}", None


def tokenizer_card(tok: Tokenizer) -> TokenizerCard:
    verdict, ok = _verdict(tok.autotokenizer)
    rows = [("class", tok.class_ or tok.declared_class or "not stated"),
            ("loaded by", tok.source if tok.loaded else "nothing: facts from the files"),
            ("vocab size", _known(tok.vocab_size)), ("len(tokenizer)", _known(tok.len))]
    ids = [Token(name, pair.token if pair else None, pair.id if pair else None)
           for name, pair in (("bos", tok.bos), ("eos", tok.eos), ("pad", tok.pad), ("unk", tok.unk), ("mask", tok.mask))]
    specials = [Token("special", s.token, s.id) for s in tok.special_tokens]
    return TokenizerCard(verdict, ok, rows, ids, specials, tok.special_tokens_total, *_template(tok.chat_template))


def _template(template: ChatTemplate) -> tuple[Template, str]:
    error = template.sample_error  # the renderer's error record, as the host sent it
    found = Template(template.present, template.source, template.sha256, template.sample,
                     f"{error.get('type')}: {error.get('message')}" if error else None)
    return found, _mask_note(found)


def _mask_note(template: Template) -> str:
    """The profile renders a sample but locates no assistant-mask spans in it: say where they are checked."""
    if not template.present:
        return "no chat template: nothing to mask"
    return ("this profile holds no assistant-mask spans (the sample is shown as rendered); "
            "introspect preflight checks that assistant-only loss masks can be built from this template")


def _findings(findings: list[ProfileFinding]) -> dict[str, list[Finding]]:
    grouped: dict[str, list[Finding]] = {severity: [] for severity in SEVERITIES}
    for item in findings:
        grouped.setdefault(item.severity, []).append(Finding(item.severity, item.code, item.message, item.fix))
    return grouped


__all__ = ["Answer", "ModelPage", "TokenizerCard", "model_page", "tokenizer_card"]
