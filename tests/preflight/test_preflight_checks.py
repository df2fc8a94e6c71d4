"""evaluate() on hand-made evidence: every verdict, its evidence and its exact fix (no host, no I/O)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from introspect.checks.preflight import CHECK_NAMES, Check, evaluate, ready

PIP = "/root/venv_data/bin/pip"
MODEL = "/root/models/Tiny"


def _render(tokens: int = 40) -> dict[str, Any]:
    return {"ok": True, "error": None, "text": "...", "chars": 120, "tail": "...",
            "roundtrip": {"ok": True, "tokens": tokens, "ids": list(range(tokens))}, "template_ids_match": True}


def good() -> dict[str, Any]:
    """Evidence of a model and host where every check passes."""
    turn = {"prompt_prefix": True, "turn_prefix": True, "prompt_token_prefix": True, "turn_token_prefix": True,
            "ok": True}
    return {
        "model": {"path": MODEL, "status": "ok", "home": "/root"},
        "endpoint": {"url": "http://127.0.0.1:30000", "skipped": False, "api_key_env": None,
                     "api_key_present": None,
                     "models": {"ok": True, "status": 200, "seconds": 0.01, "error": None, "ids": ["Tiny"],
                                "roots": [MODEL]},
                     "matched": {"id": "Tiny", "root": MODEL, "by": "root-path"},
                     "completion": {"ok": True, "status": 200, "seconds": 0.05, "model": "Tiny",
                                    "finish_reason": "length", "completion_tokens": 1, "error": None}},
        "disk": {"output_dir": "/data/out", "defaulted": False, "checked_path": "/data", "exists": False,
                 "writable": True, "free_bytes": 500 * 10**9, "total_bytes": 1000 * 10**9},
        "packages": {"python": "/root/venv_data/bin/python", "prefix": "/root/venv_data", "in_venv": True,
                     "tokenizer_code": [],
                     "items": [{"name": "transformers", "kind": "distribution", "required_by": "pipeline",
                                "version": "5.24.0", "available": True, "install": "transformers"},
                               {"name": "jinja2", "kind": "distribution", "required_by": "pipeline",
                                "version": "3.1.6", "available": True, "install": "jinja2"}],
                     "missing": []},
        "config": {"vocab_size": 264, "vocab_size_source": "config.json", "config_eos": [258],
                   "config_eos_source": "config.json", "generation_eos": [256, 258],
                   "generation_config_present": True, "errors": []},
        "tokenizer": {"loaded": True, "trust_remote_code": True, "error": None, "transformers_version": "5.24.0",
                      "class": "Qwen2Tokenizer", "is_fast": True, "len": 260, "vocab_size": 256,
                      "eos": {"token": "<|im_end|>", "id": 258}, "unk": None,
                      "mask": {"token": "<|mask|>", "id": 259},
                      "added_tokens_check": {"sources": ["tokenizer.json"], "checked": 4, "mismatches": 0,
                                             "items": []},
                      "decode_sweep": {"total": 260, "checked": 260, "complete": True, "failures": 0,
                                       "items": [], "seconds": 0.01}},
        "template": {"present": True, "sha256": "ab" * 32, "variables": ["add_generation_prompt", "messages"],
                     "uses_tools": False, "thinking_switch": None, "generation_markers": True,
                     "mentions_reasoning": False, "text": "{{ x }}",
                     "renders": {"conversation": _render(), "generation_prompt": _render(43)},
                     "generation_prompt_text": "<|im_start|>assistant\n"},
        "markers": {"items": [{"text": "<|im_start|>", "ids": [257], "single": True, "special": True, "added": True},
                              {"text": "<|im_end|>", "ids": [258], "single": True, "special": True, "added": True}],
                    "end_of_turn": {"text": "<|im_end|>", "id": 258, "single": True},
                    "source_render": "conversation"},
        "masks": {"generation_markers": True,
                  "assistant_tokens_mask": {"tried": True, "ok": True, "masked_tokens": 22, "tokens": 150,
                                            "covers_turns": True, "error": None},
                  "prefix": {"plain": {"ok": True, "turns": [dict(turn, index=2), dict(turn, index=4)]}}},
        "mask_token": {"present": {"token": "<|mask|>", "id": 259, "kind": "mask_token", "used_by_template": False},
                       "vocab_size": 264, "used_ids": 40,
                       "candidates": [{"token": None, "id": 260, "kind": "unassigned-row",
                                       "used_by_template": False}]},
        "errors": [], "timings": {},
    }


def run(evidence: dict[str, Any], min_free_gb: float = 50.0) -> dict[str, Check]:
    checks = evaluate(evidence, min_free_gb=min_free_gb, pip=PIP)
    assert [c.name for c in checks] == list(CHECK_NAMES)
    return {c.name: c for c in checks}


def only(checks: dict[str, Check], name: str, status: str) -> Check:
    """``name`` has ``status`` and every other check passed."""
    others = {n: c.status for n, c in checks.items() if n != name and c.status != "pass"}
    assert not others, {n: checks[n].message for n in others}
    check = checks[name]
    assert check.status == status, (check.message, check.evidence)
    return check


@pytest.fixture
def ev() -> dict[str, Any]:
    return copy.deepcopy(good())


def test_all_pass_and_ready(ev):
    checks = run(ev)
    assert {c.status for c in checks.values()} == {"pass"}, {n: c.message for n, c in checks.items()}
    assert all(c.fix is None for c in checks.values())
    assert ready(checks.values())
    assert checks["loss-masks"].evidence["method"] == "assistant_tokens_mask"
    assert checks["endpoint"].evidence["matched"]["by"] == "root-path"


def test_ready_ignores_warnings_not_failures():
    warn = Check("ids", "warn", {}, "x", "m")
    fail = Check("endpoint", "fail", {}, "x", "m")
    assert ready([warn]) and not ready([warn, fail]) and ready([])


# ------------------------------------------------------------------ 1. tokenizer


def test_missing_package_names_the_pip_command(ev):
    ev["tokenizer"] = {"loaded": False, "trust_remote_code": True, "transformers_version": "5.24.0",
                       "error": {"type": "ImportError", "message": "requires tiktoken", "cause": "missing-package",
                                 "missing_packages": ["tiktoken"]}}
    checks = run(ev)
    check = checks["tokenizer"]
    assert check.status == "fail" and check.fix == f"{PIP} install tiktoken"
    # They could not run: skipped, not failed (the tokenizer check carries the cause and the fix).
    for name in ("chat-template", "loss-masks", "mask-token", "ids"):
        assert checks[name].status == "skipped" and "tokenizer did not load" in checks[name].message
        assert checks[name].fix is None
    assert not ready(checks.values())


def test_remote_code_refused_says_drop_the_flag(ev):
    ev["tokenizer"] = {"loaded": False, "trust_remote_code": False,
                       "error": {"type": "ValueError", "message": "custom code", "cause": "remote-code-refused",
                                 "missing_packages": []}}
    assert "--no-remote-code" in run(ev)["tokenizer"].fix


def test_incompatible_code_pins_the_previous_major(ev):
    ev["tokenizer"] = {"loaded": False, "transformers_version": "5.24.0",
                       "error": {"type": "ImportError", "message": "cannot import name 'bytes_to_unicode'",
                                 "cause": "incompatible-code", "missing_packages": []}}
    assert f"{PIP} install 'transformers<5'" in run(ev)["tokenizer"].fix


def test_shifted_added_token_ids_fail_with_evidence(ev):
    item = {"id": 163607, "expected": "</think>", "source": "tokenizer_config.json", "id_to_token": "</think>",
            "token_to_id": 163607, "decoded": "<|reserved_token_163608|>", "encoded": [163608]}
    ev["tokenizer"]["added_tokens_check"] = {"sources": ["tokenizer_config.json"], "checked": 23,
                                             "mismatches": 1, "items": [item]}
    check = only(run(ev), "tokenizer", "fail")
    assert "decode([163607])='<|reserved_token_163608|>'" in check.message
    assert "use_fast=False" in check.fix  # this tokenizer is a fast one: the conversion is the suspect
    assert check.evidence["added_tokens"]["items"] == [item]


def test_slow_tokenizer_mismatch_points_at_the_files(ev):
    ev["tokenizer"]["is_fast"] = False
    ev["tokenizer"]["added_tokens_check"].update(mismatches=2, items=[{"id": 5, "expected": "a"},
                                                                     {"id": 6, "expected": "b"}])
    check = only(run(ev), "tokenizer", "fail")
    assert "ids 5, 6" in check.fix and "added_tokens_decoder" in check.fix


def test_decode_failure_and_partial_sweep(ev):
    ev["tokenizer"]["decode_sweep"].update(failures=1, items=[{"id": 7, "error": "KeyError: 7"}])
    assert "7" in only(run(ev), "tokenizer", "fail").fix
    ev = copy.deepcopy(good())
    ev["tokenizer"]["decode_sweep"].update(checked=100, complete=False)
    assert "--timeout" in only(run(ev), "tokenizer", "warn").fix


def test_tokenizer_part_timed_out(ev):
    for key in ("config", "tokenizer", "template", "markers", "masks", "mask_token"):
        del ev[key]
    ev["errors"] = [{"probe": "preflight.tokenizer", "type": "timeout",
                     "message": "preflight probe ran past its 300 s timeout; its process group was killed"}]
    checks = run(ev)
    assert checks["tokenizer"].status == "fail" and "--timeout" in checks["tokenizer"].fix
    # One cause, one failure: the checks the killed part would have fed are skipped, saying why.
    for name in ("tokenizer", "chat-template", "loss-masks", "mask-token", "ids"):
        assert checks[name].status == ("fail" if name == "tokenizer" else "skipped"), name
        assert "300 s timeout" in checks[name].message
    assert not ready(checks.values())
    assert checks["endpoint"].status == "pass" and checks["disk-and-packages"].status == "pass"


# ------------------------------------------------------------------ 2. chat template


def test_no_template_fails(ev):
    ev["template"] = {"present": False}
    del ev["markers"], ev["masks"], ev["mask_token"]
    checks = run(ev)
    assert checks["chat-template"].status == "fail" and "chat_template.jinja" in checks["chat-template"].fix
    assert checks["loss-masks"].status == "fail"


def test_render_error_fails(ev):
    ev["template"]["renders"]["tools"] = {"ok": False, "error": {"type": "TemplateError", "message": "boom"}}
    check = only(run(ev), "chat-template", "fail")
    assert "rendering 'tools' raises TemplateError: boom" in check.message


def test_roundtrip_failure_and_cleanup_only_difference(ev):
    trip = ev["template"]["renders"]["conversation"]["roundtrip"]
    trip.update(ok=False, diff={"offset": 3, "expected": "a .", "got": "a."}, ok_without_cleanup=True)
    assert "clean_up_tokenization_spaces=False" in only(run(ev), "chat-template", "warn").fix
    trip["ok_without_cleanup"] = False
    assert "does not round-trip" in only(run(ev), "chat-template", "fail").message


def test_template_ids_differ_from_encode_is_a_warning(ev):
    ev["template"]["renders"]["generation_prompt"].update(
        template_ids_match=False, template_ids_diff={"offset": 0, "template": [1, 1], "encode": [1, 5]})
    assert "tokenize one way only" in only(run(ev), "chat-template", "warn").fix


def test_marker_split_into_pieces_fails(ev):
    ev["markers"]["items"].append({"text": "<|im_sep|>", "ids": [27, 91, 318], "single": False, "special": False,
                                   "added": False})
    check = only(run(ev), "chat-template", "fail")
    assert "<|im_sep|> -> 3 tokens" in check.message and "model's own chat template" in check.fix


def test_thinking_switch_without_effect_warns(ev):
    ev["template"].update(thinking_switch="enable_thinking", switch_changes_render=False)
    assert "'enable_thinking'" in only(run(ev), "chat-template", "warn").message


# ------------------------------------------------------------------ 3. loss masks


def test_prefix_method_when_no_generation_markers(ev):
    ev["masks"]["generation_markers"] = False
    ev["masks"]["assistant_tokens_mask"] = {"tried": False}
    check = only(run(ev), "loss-masks", "pass")
    assert check.evidence["method"] == "prefix" and "prefix property" in check.message


def test_reasoning_breaks_the_prefix_property(ev):
    ev["masks"]["generation_markers"] = False
    ev["masks"]["assistant_tokens_mask"] = {"tried": False}
    broken = {"index": 2, "ok": False, "prompt_prefix": True, "turn_prefix": False,
              "diff": {"offset": 70, "expected": "x" * 60 + "<think>r</think>", "got": "x" * 60 + "<think></think>",
                       "what": "conversation cut after this turn vs full render"}}
    ev["masks"]["prefix"]["reasoning"] = {"ok": False, "turns": [broken]}
    check = only(run(ev), "loss-masks", "warn")
    assert check.evidence["method"] == "prefix-without-reasoning"
    assert "one sample per assistant turn" in check.message and "reasoning_content" in check.fix


def test_neither_method_needs_one_sample_per_turn(ev):
    ev["masks"]["assistant_tokens_mask"] = {"tried": True, "ok": False, "masked_tokens": 0, "covers_turns": False,
                                            "error": {"type": "TypeError", "message": "no mask"}}
    ev["masks"]["prefix"]["plain"] = {"ok": False, "turns": [{"index": 2, "ok": False, "prompt_prefix": False,
                                                              "diff": {"offset": 0, "expected": "a", "got": "b",
                                                                       "what": "generation prompt vs rendered turn"}}]}
    check = only(run(ev), "loss-masks", "warn")
    assert check.evidence["method"] == "per-turn-samples"
    assert "return_assistant_tokens_mask fails (TypeError: no mask)" in check.message
    assert check.fix.startswith("# build one sample per assistant turn")


# ------------------------------------------------------------------ 4. mask token


def test_proposed_unk_gives_the_exact_setting(ev):
    ev["mask_token"] = {"present": None, "vocab_size": 163840, "used_ids": 100,
                        "candidates": [{"token": "[UNK]", "id": 163838, "kind": "unk", "used_by_template": False},
                                       {"token": "<|reserved_token_163589|>", "id": 163589, "kind": "reserved",
                                        "used_by_template": False}]}
    check = only(run(ev), "mask-token", "warn")
    assert check.fix == '# set the drafter\'s config.json "dflash_config": {"mask_token_id": 163838, "mask_token": "[UNK]"}'
    assert check.evidence["proposed"]["id"] == 163838


def test_candidate_used_by_template_is_skipped(ev):
    ev["mask_token"] = {"present": None, "vocab_size": 300, "candidates": [
        {"token": "[UNK]", "id": 3, "kind": "unk", "used_by_template": True},
        {"token": None, "id": 260, "kind": "unassigned-row", "used_by_template": False}]}
    check = only(run(ev), "mask-token", "warn")
    assert check.fix == '# set the drafter\'s config.json "dflash_config": {"mask_token_id": 260}'


def test_ids_at_or_above_vocab_size_fail(ev):
    ev["mask_token"] = {"present": None, "vocab_size": 163584, "candidates": [
        {"token": "[UNK]", "id": 163838, "kind": "unk", "used_by_template": False}]}
    check = only(run(ev), "mask-token", "fail")
    assert "[UNK]=163838 at or above vocab_size 163584" in check.message
    ev = copy.deepcopy(good())
    ev["mask_token"]["present"]["id"] = 264
    check = only(run(ev), "mask-token", "fail")
    assert "outside the embedding" in check.message and '"mask_token_id": 260' in check.fix


# ------------------------------------------------------------------ 5. ids


def test_tokenizer_larger_than_embedding_fails(ev):
    ev["config"]["vocab_size"] = 256
    check = only(run(ev), "ids", "fail")
    assert "len(tokenizer) 260 > config.json vocab_size 256" in check.message and ">= 260" in check.fix


def test_end_of_turn_not_a_stop_id_fails(ev):
    ev["config"]["generation_eos"] = [256]
    ev["tokenizer"]["eos"] = {"token": "<|endoftext|>", "id": 256}
    ev["config"]["config_eos"] = [256]
    check = only(run(ev), "ids", "fail")
    assert '"eos_token_id": [256, 258] in generation_config.json' in check.fix


def test_disagreeing_eos_is_a_warning_when_the_turn_still_stops(ev):
    ev["tokenizer"]["eos"] = {"token": "[EOS]", "id": 257}
    ev["config"]["generation_eos"] = [258]
    check = only(run(ev), "ids", "warn")
    assert "EOS ids differ" in check.message and check.evidence["stop_ids"] == [257, 258]


# ------------------------------------------------------------------ 6. endpoint


def test_endpoint_not_given_is_a_warning(ev):
    ev["endpoint"] = {"url": None, "skipped": True}
    assert "--endpoint" in only(run(ev), "endpoint", "warn").fix


def test_endpoint_unreachable_unauthorized_and_unmatched(ev):
    ev["endpoint"]["models"] = {"ok": False, "status": None, "error": {"type": "unreachable", "message": "refused"}}
    assert "start the server" in only(run(ev), "endpoint", "fail").fix
    ev["endpoint"].update(api_key_env="MY_KEY", api_key_present=False)
    ev["endpoint"]["models"] = {"ok": False, "status": 401, "error": {"type": "http-error", "message": "HTTP 401"}}
    assert only(run(ev), "endpoint", "fail").fix.startswith("export MY_KEY=KEY  # in the host's environment")
    ev = copy.deepcopy(good())
    ev["endpoint"]["matched"] = None
    ev["endpoint"]["models"]["ids"] = ["other"]
    check = only(run(ev), "endpoint", "fail")
    assert "['other']" in check.message and f"serve {MODEL}" in check.fix


def test_completion_failure_fails(ev):
    ev["endpoint"]["completion"] = {"ok": False, "status": None, "error": {"type": "timeout", "message": "timed out"}}
    assert "--endpoint-timeout" in only(run(ev), "endpoint", "fail").fix


# ------------------------------------------------------------------ 7. disk and packages


def test_disk_below_minimum_and_not_writable(ev):
    check = only(run(ev, min_free_gb=600), "disk-and-packages", "fail")
    assert "500.0 GB free at /data, below --min-free-gb 600" in check.message and "free 100.0 GB" in check.fix
    ev["disk"]["writable"] = False
    assert "writable" in only(run(ev), "disk-and-packages", "fail").fix


def test_missing_packages_fix_quotes_names(ev):
    ev["packages"]["items"].append({"name": "tiktoken", "kind": "module", "required_by": "tokenizer code",
                                    "version": None, "available": False, "install": "tiktoken"})
    ev["packages"]["missing"] = ["tiktoken"]
    check = only(run(ev), "disk-and-packages", "fail")
    assert check.fix == f"{PIP} install tiktoken" and "tiktoken (tokenizer code)" in check.message


def test_defaulted_output_dir_is_said(ev):
    ev["disk"]["defaulted"] = True
    assert "no --output-dir" in only(run(ev), "disk-and-packages", "pass").message


def test_light_part_lost_fails_its_checks_only(ev):
    for key in ("endpoint", "disk", "packages"):
        del ev[key]
    ev["errors"] = [{"probe": "preflight.light", "type": "ProbeTimeout", "message": "did not answer"}]
    checks = run(ev)
    # One lost part, one failure naming it; the part's other check is skipped, not failed again.
    assert checks["endpoint"].status == "fail" and checks["disk-and-packages"].status == "skipped"
    assert "did not answer" in checks["disk-and-packages"].message
    assert checks["tokenizer"].status == "pass" and not ready(checks.values())


def test_substitute_class_for_the_models_own_code_warns(ev):
    # transformers 5 converts Kimi's tiktoken tokenizer itself when remote code is refused.
    ev["tokenizer"].update(declared_classes=["TikTokenTokenizer"], trust_remote_code=False,
                           **{"class": "TokenizersBackend"})
    check = only(run(ev), "tokenizer", "warn")
    assert "not the model's own TikTokenTokenizer" in check.message and "--no-remote-code" in check.fix
    ev["tokenizer"]["class"] = "TikTokenTokenizer"
    assert run(ev)["tokenizer"].status == "pass"
