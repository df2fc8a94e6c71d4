"""`introspect probe` end to end, over a real sshd on 127.0.0.2 with known_hosts checking on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import assert_clean_error, run_cli, ssh_flags

pytestmark = pytest.mark.ssh

KIMI_SPECIALS = {163584: "[BOS]", 163585: "[EOS]", 163586: "<|im_end|>", 163838: "[UNK]", 163839: "[PAD]"}


@pytest.fixture(scope="module")
def good_profile(sshd, client_keys, kimi_model, venv_full, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("out") / "profile.json"
    result = run_cli("probe", *ssh_flags(sshd, client_keys), "--model", str(kimi_model),
                     "--venv", str(venv_full), "--json", "--output", str(out))
    assert result.code == 0, (result.stdout[-3000:], result.stderr[-3000:])
    profile = result.json()
    assert json.loads(out.read_text()) == profile
    return profile


@pytest.fixture(scope="module")
def broken_run(sshd, client_keys, kimi_model, venv_no_tiktoken, tmp_path_factory):
    raw = tmp_path_factory.mktemp("raw") / "raw.json"
    result = run_cli("probe", *ssh_flags(sshd, client_keys), "--model", str(kimi_model),
                     "--venv", str(venv_no_tiktoken), "--json", "--save-raw", str(raw))
    return result, raw


def test_profile_contract_and_architecture(good_profile, sshd, kimi_model, venv_full):
    p = good_profile
    assert p["schema"] == "introspect.profile/v1"
    assert p["target"] == {"scheme": "ssh", "host": sshd.address, "port": sshd.port, "user": None,
                           "python": f"{venv_full}/bin/python", "venv": str(venv_full),
                           "model_path": str(kimi_model)}
    arch = p["architecture"]
    assert arch["model_type"] == "kimi_k25"
    assert arch["text_model_type"] in ("kimi_k2", "deepseek_v3")
    assert arch["num_layers"] == 61 and arch["hidden_size"] == 7168 and arch["vocab_size"] == 163840
    attn = arch["attention"]
    assert attn["type"] == "MLA" and attn["num_heads"] == 64
    assert (attn["q_lora_rank"], attn["kv_lora_rank"], attn["qk_nope_head_dim"], attn["qk_rope_head_dim"],
            attn["v_head_dim"]) == (1536, 512, 128, 64, 128)
    moe = arch["moe"]
    assert moe["is_moe"] is True
    assert (moe["routed_experts"], moe["shared_experts"], moe["experts_per_token"]) == (384, 1, 8)
    assert (moe["n_group"], moe["topk_group"], moe["dense_layers"], moe["moe_layers"]) == (1, 1, 1, 60)


def test_tokenizer_loaded_through_transformers(good_profile):
    tok = good_profile["tokenizer"]
    assert tok["loaded"] is True and tok["source"] == "transformers"
    assert tok["class"] == "TikTokenTokenizer"
    assert tok["vocab_size"] == 163840
    assert tok["bos"] == {"token": "[BOS]", "id": 163584}
    assert tok["eos"] == {"token": "[EOS]", "id": 163585}
    assert tok["pad"] == {"token": "[PAD]", "id": 163839}
    assert tok["unk"] == {"token": "[UNK]", "id": 163838}
    ids = {s["id"]: s["token"] for s in tok["special_tokens"]}
    for token_id, token in KIMI_SPECIALS.items():
        assert ids[token_id] == token
    tpl = tok["chat_template"]
    assert tpl["present"] and len(tpl["sha256"]) == 64
    assert "<|im_assistant|>assistant<|im_middle|>" in tpl["sample"]
    assert tok["error"] is None
    env = good_profile["environment"]
    assert env["packages"]["tiktoken"] and env["packages"]["transformers"]
    assert not [f for f in good_profile["findings"] if f["severity"] == "error"]


def test_missing_tiktoken_gives_finding_fix_and_fallback(broken_run, good_profile, venv_no_tiktoken):
    result, _raw = broken_run
    assert result.code == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    p = result.json()
    missing = [f for f in p["findings"] if f["code"] == "missing-package"]
    assert missing, p["findings"]
    assert any("tiktoken" in f["message"] for f in missing)
    assert any(f["fix"] == f"{venv_no_tiktoken}/bin/pip install tiktoken" for f in missing)
    tok, good = p["tokenizer"], good_profile["tokenizer"]
    assert tok["loaded"] is False and tok["source"] == "files"
    assert "tiktoken" in (tok["error"] or {}).get("missing_packages", [])
    # The fallback must agree with what the loaded tokenizer reported.
    assert tok["vocab_size"] == good["vocab_size"]
    for name in ("bos", "eos", "pad", "unk"):
        assert tok[name] == good[name], name
    assert tok["special_tokens"] == good["special_tokens"]
    assert tok["chat_template"]["sha256"] == good["chat_template"]["sha256"]
    assert p["environment"]["packages"]["tiktoken"] is None


def test_profile_rebuilds_from_saved_raw_facts(broken_run):
    result, raw = broken_run
    again = run_cli("profile", str(raw), "--json")
    assert again.code == result.code
    rebuilt, original = again.json(), result.json()
    rebuilt.pop("timings"), original.pop("timings")
    assert rebuilt == original


def test_local_executor_gives_the_same_profile(good_profile, kimi_model, venv_full):
    result = run_cli("probe", "--model", str(kimi_model), "--venv", str(venv_full), "--json")
    assert result.code == 0, result.stderr[-2000:]
    local = result.json()
    assert local["target"]["host"] is None
    for section in ("architecture", "tokenizer"):
        assert local[section] == good_profile[section], section
    assert local["environment"]["packages"] == good_profile["environment"]["packages"]


def test_human_report_has_every_section(sshd, client_keys, kimi_model, venv_full):
    # The witness is not one of the sections asserted here (good_profile runs it over ssh).
    result = run_cli("probe", *ssh_flags(sshd, client_keys), "--model", str(kimi_model),
                     "--venv", str(venv_full), "--no-model-code", env={"COLUMNS": "120"})
    assert result.code == 0, result.stderr[-2000:]
    for title in ("Model", "Architecture", "Experts", "Tokenizer", "Chat template", "Environment",
                  "Findings"):
        assert title in result.stdout
    assert "MLA" in result.stdout and "384" in result.stdout and "163584" in result.stdout


def test_unknown_host_key_refused_then_accept_new(sshd, client_keys, kimi_model, venv_full, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    args = ["probe", *ssh_flags(sshd, client_keys, known_hosts=empty), "--model", str(kimi_model),
            "--venv", str(venv_full), "--json", "--no-tokenizer", "--no-model-code"]  # host keys: the connection
    refused = run_cli(*args)
    assert_clean_error(refused, 3, "unknown host key", "SHA256:", "--accept-new")
    accepted = run_cli(*args, "--accept-new")
    assert accepted.code == 0, accepted.stderr
    assert f"[{sshd.address}]:{sshd.port}" in empty.read_text()
    again = run_cli(*args)  # now known
    assert again.code == 0, again.stderr


def test_missing_model_dir_is_usage_error_with_partial_facts(sshd, client_keys, venv_full, tmp_path):
    result = run_cli("probe", *ssh_flags(sshd, client_keys), "--model", str(tmp_path / "nope"),
                     "--venv", str(venv_full), "--json")
    assert_clean_error(result, 2, "not-found")
    profile = result.json()
    assert profile["environment"]["python_version"].startswith("3.")
    # Neither isolated load imported transformers for a dir that is not there: both say so.
    loads = {f["code"]: f["message"] for f in profile["findings"]
             if f["code"] in ("tokenizer-load-failed", "model-code-failed")}
    assert len(loads) == 2 and all("is not a directory; the load was not run" in m for m in loads.values()), loads


def test_missing_venv_is_clear(sshd, client_keys, kimi_model, tmp_path: Path):
    result = run_cli("probe", *ssh_flags(sshd, client_keys), "--model", str(kimi_model),
                     "--venv", str(tmp_path / "no-venv"))
    assert_clean_error(result, 2, "no-venv/bin/python")
