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
from typing import Any

from introspect.analysis.findings import Finding, make
from introspect.remote.contract import as_dict

NAMED = ("bos", "eos", "pad", "unk", "mask")
TRANSFORMERS = "https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/"
CONVERSIONS = {
    "tekken": ("tekken conversion (MistralConverter, without the bos/eos/pad/unk names)",
               TRANSFORMERS + "tokenization_utils_tokenizers.py#L207-L212"),
    "tiktoken": ("tiktoken conversion (the ranks plus only the specials tokenizer_config.json lists)",
                 TRANSFORMERS + "tokenization_utils_tokenizers.py#L273-L306"),
}


def conversion_losses(section: dict[str, Any], files: dict[str, Any]) -> list[Finding]:
    """One warning naming every field the loaded tokenizer has none of and the files name."""
    if not section.get("loaded") or section.get("source") != "transformers":
        return []
    sources = as_dict(section.get("sources"))
    lost: dict[str, Any] = {}
    for attr in NAMED:
        known = as_dict(files.get(attr))
        if section.get(attr) is None and sources.get(attr) == "transformers" and isinstance(known.get("token"), str):
            lost[attr] = {"token": known["token"], "id": known.get("id")}
    specials = [s for s in files.get("special_tokens") or [] if isinstance(s, dict)]
    if (specials and not section.get("special_tokens") and section.get("special_tokens_total") == 0
            and sources.get("special_tokens") == "transformers"):
        lost["special_tokens"] = specials
    if not lost:
        return []
    return [_finding(section, files, lost)]


def _finding(section: dict[str, Any], files: dict[str, Any], lost: dict[str, Any]) -> Finding:
    kind = str(files.get("vocab_kind") or "")
    what, reference = CONVERSIONS.get("tiktoken" if kind.startswith("tiktoken") else kind,
                                      ("load", None))
    version = section.get("transformers_version")
    source = files.get("vocab_file") if kind == "tekken" else "tokenizer_config.json"
    named = {attr: value for attr, value in lost.items() if attr != "special_tokens"}
    shown = [f"{attr} {value['token']!r} (id {value['id']})" for attr, value in named.items()]
    if "special_tokens" in lost:
        ids = [s.get("id") for s in lost["special_tokens"] if isinstance(s.get("id"), int)]
        total = files.get("special_tokens_total") or len(lost["special_tokens"])
        shown.append(f"{total} special tokens" + (f" (ids {min(ids)}..{max(ids)})" if ids else ""))
        source = files.get("vocab_file") or source
    return make(
        "warning",
        "tokenizer-conversion-loss",
        f"the loaded tokenizer ({section.get('class')}) has no {', '.join(lost)}, which the files name "
        f"({'; '.join(shown)}, read from {source}): transformers{' ' + version if version else ''}'s {what} "
        "drops them, so a pipeline's AutoTokenizer gets none",
        _fix(kind, named, "special_tokens" in lost),
        fields=list(lost), files_values={k: v for k, v in named.items()},
        **({"reference": reference} if reference else {}),
    )


def _fix(kind: str, named: dict[str, Any], specials: bool) -> str:
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
