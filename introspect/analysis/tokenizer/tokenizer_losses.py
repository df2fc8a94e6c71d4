"""What transformers' conversion of a tekken or Meta-original directory drops (pure, no I/O).

The same-story check (tokenizer_agreement) compares values both sides have; this one
takes the case where the loaded side has none and the files name one: a named token
(bos/eos/pad/unk/mask) or every special token. That is what a conversion loses:

* tekken.json: transformers 5.24.0 builds the tokenizer with
  ``MistralConverter(vocab_file).converted()`` and no token names
  (https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/tokenization_utils_tokenizers.py#L207-L212),
  where its own ``convert_tekken_tokenizer`` passes ``_MAP_SPECIALS`` (bos ``<s>``, eos ``</s>``,
  pad ``<pad>``, unk ``<unk>``:
  https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/integrations/mistral/tokenizer.py#L197-L202):
  AutoTokenizer on a Mistral native directory loads with bos/eos/pad/unk all None.
* a tiktoken ranks file (Meta's original ``tokenizer.model``): ``_convert_from_tiktoken``
  adds only the specials ``added_tokens_decoder`` / ``extra_special_tokens`` list
  (https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/tokenization_utils_tokenizers.py#L273-L306);
  the specials Meta's class defines in code (llama_models/llama3/tokenizer.py) are gone.

Only a load by transformers is judged (a layout's own library is introspect's reading,
compared by tokenizer_agreement), and only facts the probe reported (``sources`` names
the loader): a raw file of an older probe that lacks the key says nothing.
"""

from __future__ import annotations

import json

from introspect.analysis.findings import Finding, make
from introspect.analysis.tokenizer.shapes import NAMED, Token
from introspect.documents.base import TokenId
from introspect.documents.profile_tokenizer import FromFiles, Tokenizer

TRANSFORMERS = "https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/"
CONVERSIONS = {
    "tekken": ("tekken conversion (MistralConverter, without the bos/eos/pad/unk names)",
               TRANSFORMERS + "tokenization_utils_tokenizers.py#L207-L212"),
    "tiktoken": ("tiktoken conversion (the ranks plus only the specials tokenizer_config.json lists)",
                 TRANSFORMERS + "tokenization_utils_tokenizers.py#L273-L306"),
}


def conversion_losses(section: Tokenizer, files: FromFiles) -> list[Finding]:
    """One warning naming every field the loaded tokenizer has none of and the files name."""
    if not section.loaded or section.source != "transformers":
        return []
    sources = section.sources.to_dict()
    named: dict[str, Token] = {}
    for attr in NAMED:
        known: TokenId | None = getattr(files, attr)
        if getattr(section, attr) is None and sources.get(attr) == "transformers" and known is not None \
                and isinstance(known.token, str):
            named[attr] = Token(token=known.token, id=known.id)
    specials = files.special_tokens
    lost_specials = bool(specials and not section.special_tokens and section.special_tokens_total == 0
                         and sources.get("special_tokens") == "transformers")
    if not named and not lost_specials:
        return []
    return [_finding(section, files, named, specials if lost_specials else None)]


def _finding(section: Tokenizer, files: FromFiles, named: dict[str, Token], specials: list[TokenId] | None) -> Finding:
    kind = str(files.vocab_kind or "")
    what, reference = CONVERSIONS.get("tiktoken" if kind.startswith("tiktoken") else kind,
                                      ("load", None))
    version = section.transformers_version
    source = files.vocab_file if kind == "tekken" else "tokenizer_config.json"
    lost = [*named, *(["special_tokens"] if specials is not None else [])]
    shown = [f"{attr} {value['token']!r} (id {value['id']})" for attr, value in named.items()]
    if specials is not None:
        ids = [s.id for s in specials if isinstance(s.id, int)]
        total = files.special_tokens_total or len(specials)
        shown.append(f"{total} special tokens" + (f" (ids {min(ids)}..{max(ids)})" if ids else ""))
        source = files.vocab_file or source
    return make(
        "warning",
        "tokenizer-conversion-loss",
        f"the loaded tokenizer ({section.class_}) has no {', '.join(lost)}, which the files name "
        f"({'; '.join(shown)}, read from {source}): transformers{' ' + version if version else ''}'s {what} "
        "drops them, so a pipeline's AutoTokenizer gets none",
        _fix(kind, named, specials is not None),
        fields=lost, files_values=dict(named),
        **({"reference": reference} if reference else {}),
    )


def _fix(kind: str, named: dict[str, Token], specials: bool) -> str:
    parts = []
    if named:
        config = json.dumps({f"{attr}_token": value["token"] for attr, value in named.items()})
        parts.append(f"name them in tokenizer_config.json: {config}")
    if specials:
        parts.append("list the specials in tokenizer_config.json's added_tokens_decoder, or load with the "
                     "model's own class (trust_remote_code)")
    if kind == "tekken":
        parts.append("or load with mistral_common (vLLM: --tokenizer-mode mistral)")
    return "# " + "; ".join(parts)
