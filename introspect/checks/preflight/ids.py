"""The ``ids`` check: tokenizer size vs vocab_size, and the stop ids vs the template's end of turn."""

from __future__ import annotations

from typing import Any, TypedDict

from introspect.analysis.tokenizer.shapes import shaped
from introspect.checks.preflight.common import (
    Check,
    Problem,
    comment,
    fix_lines,
    loaded_tokenizer,
    needs_tokenizer,
    no_evidence,
    section,
    worst,
)
from introspect.remote.contract import PreflightReply, TokenPair, as_dict, as_list


class EndOfTurn(TypedDict, total=False):
    """The template's end-of-turn marker (remote/facts/tokenizer/turn_markers.py ``find_markers``)."""

    text: str
    id: int | None


class IdsEvidence(TypedDict):
    """What the ids check compares: the tokenizer's size and EOS, config.json's and generation_config's
    (the preflight task's ``config`` section, remote/facts/model/configs.py ``vocab_and_eos``), the
    template's end of turn (``markers``)."""

    len_tokenizer: object
    vocab_size: object
    vocab_size_source: object
    tokenizer_eos: TokenPair | None  # as the loaded tokenizer reported it
    generation_config_eos: list[Any] | None
    config_eos: list[Any] | None
    config_eos_source: object
    generation_config_present: object
    stop_ids: list[int]
    end_of_turn: EndOfTurn | None


def check_ids(evidence: PreflightReply) -> Check:
    tok = loaded_tokenizer(evidence)
    if tok is None:
        return needs_tokenizer("ids", evidence)
    config, err = section(evidence.get("config"))
    if config is None:
        return no_evidence("ids", evidence, "config.json", err)
    markers = as_dict(evidence.get("markers"))
    eot = shaped(markers.get("end_of_turn"), EndOfTurn) or None
    eos = shaped(tok.get("eos"), TokenPair) or None
    gen, cfg_eos = as_list(config.get("generation_eos")), as_list(config.get("config_eos"))
    stop = sorted(set(([eos["id"]] if eos and isinstance(eos.get("id"), int) else []) + (gen or cfg_eos)))
    out: IdsEvidence = {"len_tokenizer": tok.get("len"), "vocab_size": config.get("vocab_size"),
           "vocab_size_source": config.get("vocab_size_source"), "tokenizer_eos": eos,
           "generation_config_eos": gen or None, "config_eos": cfg_eos or None,
           "config_eos_source": config.get("config_eos_source"),
           "generation_config_present": config.get("generation_config_present"),
           "stop_ids": stop, "end_of_turn": eot}
    runaway = bool(as_dict(evidence.get("template")).get("runaway"))
    problems = _size_problems(out) + _stop_problems(out, eot, stop, runaway) + _eos_problems(out)
    if not problems:
        return Check("ids", "pass", dict(out), None,
                     f"len(tokenizer) {out['len_tokenizer']} <= vocab_size {out['vocab_size']}; EOS ids agree; "
                     f"end of turn {eot.get('text') if eot else '?'} is a stop id")
    status = worst(p[0] for p in problems)
    fixes = [p[2] for p in problems if p[0] == status and p[2]]
    return Check("ids", status, dict(out), fix_lines(*fixes), "; ".join(p[1] for p in problems))


def _size_problems(out: IdsEvidence) -> list[Problem]:
    size, vocab, source = out["len_tokenizer"], out["vocab_size"], out["vocab_size_source"]
    if not isinstance(vocab, int):
        return [("warn", "config.json has no vocab_size: the embedding size is unknown",
                 comment("add vocab_size (the embedding's row count) to config.json"))]
    if isinstance(size, int) and size > vocab:
        return [("fail", f"len(tokenizer) {size} > {source} vocab_size {vocab}: ids {vocab}..{size - 1} index "
                 "past the embedding", comment(f"set {source}'s vocab_size to the embedding's row count (>= {size}), "
                                              "or use the tokenizer that belongs to these weights"))]
    return []


def _stop_problems(out: IdsEvidence, eot: EndOfTurn | None, stop: list[int],
                   runaway: bool = False) -> list[Problem]:
    if runaway:  # no render to find it in: the chat-template check names the cause and the fix
        return [("warn", "the end-of-turn token was not checked: the chat template does not finish rendering",
                 None)]
    end = eot.get("id") if eot is not None else None
    if eot is None or not isinstance(end, int):
        return [("warn", "the template's end-of-turn token could not be identified as one id",
                 comment("check by hand that generation stops at the end of an assistant turn"))]
    if end in stop:
        return []
    listed = sorted(set(stop) | {end})
    return [("fail", f"the template ends turns with {eot.get('text')} ({end}) but the stop ids are "
             f"{stop or 'none'}: completions would run past the turn",
             comment(f"set \"eos_token_id\": {listed} in generation_config.json (or pass "
                     f"stop_token_ids=[{end}] in every request)"))]


def _eos_problems(out: IdsEvidence) -> list[Problem]:
    eos = out["tokenizer_eos"]
    tok_id = eos.get("id") if eos else None
    sources = {"tokenizer": [tok_id] if isinstance(tok_id, int) else [],
               "generation_config.json": out["generation_config_eos"] or [],
               str(out["config_eos_source"] or "config.json"): out["config_eos"] or []}
    named = {k: set(v) for k, v in sources.items() if v}
    # Agreement: every source shares an id with every other (generation_config may list several).
    if all(a & b for a in named.values() for b in named.values()):
        return []
    shown = ", ".join(f"{k} {sorted(v)}" for k, v in named.items())
    stop = out["stop_ids"]
    return [("warn", f"EOS ids differ between sources ({shown}); generation stops on {stop}",
             comment(f"treat every id of {stop} as the end of a completion in the pipeline (the server stops "
                     "on any of them) and strip it before storing the completion"))]
