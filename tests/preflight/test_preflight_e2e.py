"""`introspect preflight` end to end: a real sshd on 127.0.0.2, real venvs, real model fixtures
and a small OpenAI-compatible server on the host's loopback (issue 5)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CLIResult, assert_clean_error, ssh_flags
from tests.inprocess import run_main
from tests.preflight.fixtures import build_generation_marker_model, build_kimi_variant
from tests.preflight.openai_server import OpenAIServer, start_openai_server
from tests.sshd_server import free_port

pytestmark = pytest.mark.ssh

CHECKS = ["tokenizer", "chat-template", "loss-masks", "mask-token", "ids", "endpoint", "disk-and-packages"]
_CWD: list[Path] = []


@pytest.fixture(scope="module", autouse=True)
def empty_cwd(tmp_path_factory: pytest.TempPathFactory) -> None:
    # Run outside the repo: its example hosts.yaml would be read as the inventory
    # (./hosts.yaml is the default) and its defaults (user, identity) applied.
    _CWD[:] = [tmp_path_factory.mktemp("cwd")]


def cli(*args: str, env: dict[str, str] | None = None) -> CLIResult:
    """``introspect`` through ``main()`` in this process (tests/inprocess.py): the checks still run
    in the host's interpreters over sshd; a subprocess would add the CLI's imports (~1.5 CPU-s)."""
    return run_main(*args, env=env, cwd=_CWD[0])


@pytest.fixture(scope="module")
def models(kimi_model: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("preflight-models")
    out = {name: build_kimi_variant(kimi_model, root / f"Kimi-{name}", name)
           for name in ("shifted-ids", "small-vocab", "chatml-template", "no-eot-stop")}
    out["tiny"] = build_generation_marker_model(root / "tiny-chatml")
    return out


@pytest.fixture(scope="module")
def kimi_server(kimi_model: Path) -> Iterator[OpenAIServer]:
    # sglang's shape: id is the served name, root the path it loaded.
    server = start_openai_server(model_id="Kimi-K2.6", root=str(kimi_model))
    yield server
    server.stop()


def preflight(sshd, client_keys, model: Path, venv: Path, *extra: str, env: dict[str, str] | None = None,
              remote: bool = True) -> CLIResult:
    flags = ssh_flags(sshd, client_keys) if remote else []
    return cli("preflight", *flags, "--model", str(model), "--venv", str(venv), "--min-free-gb", "1",
                   *extra, env=env)


def checks_of(result: CLIResult) -> dict[str, dict[str, Any]]:
    assert "Traceback" not in result.stderr, result.stderr
    report = result.json()
    return {c["name"]: c for c in report["checks"]}


def assert_failing(result: CLIResult, name: str, *needles: str) -> dict[str, Any]:
    """Exit 1, ``name`` failed with a fix, and its message or fix names every needle."""
    assert result.code == 1, (result.code, result.stdout[-3000:], result.stderr[-2000:])
    check = checks_of(result)[name]
    assert check["status"] == "fail", check
    assert check["fix"], check
    text = (check["message"] + " " + check["fix"]).lower()
    for needle in needles:
        assert needle.lower() in text, (needle, check)
    return check


@pytest.fixture(scope="module")
def ready_run(sshd, client_keys, kimi_model, venv_full, kimi_server, tmp_path_factory) -> CLIResult:
    out_dir = tmp_path_factory.mktemp("data") / "kimi-data"  # does not exist yet: its parent is checked
    return preflight(sshd, client_keys, kimi_model, venv_full, "--endpoint", kimi_server.url,
                     "--output-dir", str(out_dir), "--json")


def test_kimi_is_ready_over_ssh(ready_run, kimi_server):
    assert ready_run.code == 0, (ready_run.stdout[-4000:], ready_run.stderr[-2000:])
    checks = checks_of(ready_run)
    assert [c["status"] for c in checks.values()] == [
        "pass", "pass", "warn", "warn", "warn", "pass", "pass"], {n: c["message"] for n, c in checks.items()}
    # The endpoint was called from the host: one listing and a one-token completion.
    posts = [r for r in kimi_server.requests if r.method == "POST"]
    assert any(r.path == "/v1/models" for r in kimi_server.requests)
    assert posts and posts[-1].body["max_tokens"] == 1 and posts[-1].body["model"] == "Kimi-K2.6"


def test_kimi_evidence_is_truthful(ready_run, kimi_model):
    checks = checks_of(ready_run)
    tok = checks["tokenizer"]["evidence"]
    assert tok["class"] == "TikTokenTokenizer" and tok["len"] == 163840
    assert tok["added_tokens"]["checked"] == 23 and tok["added_tokens"]["mismatches"] == 0
    assert tok["decode_sweep"]["complete"] and tok["decode_sweep"]["total"] == 163840
    tpl = checks["chat-template"]["evidence"]
    assert tpl["thinking_switch"] == "thinking" and tpl["switch_changes_render"] is True
    assert set(tpl["renders"]) == {"conversation", "generation_prompt", "tools", "thinking_on", "thinking_off"}
    assert all(r["roundtrip"] for r in tpl["renders"].values())
    assert tpl["end_of_turn"] == {"text": "<|im_end|>", "id": 163586, "single": True}
    assert tpl["generation_prompt"] == "<|im_assistant|>assistant<|im_middle|><think>"
    # No {% generation %} markers; prefix-stable without reasoning, not with it (older reasoning collapses).
    masks = checks["loss-masks"]
    assert masks["evidence"]["method"] == "prefix-without-reasoning"
    assert masks["evidence"]["prefix"]["plain"]["ok"] is True
    assert masks["evidence"]["prefix"]["reasoning"]["ok"] is False
    assert "one sample per assistant turn" in masks["message"]
    mask = checks["mask-token"]
    assert mask["evidence"]["proposed"]["id"] == 163838 and mask["evidence"]["proposed"]["token"] == "[UNK]"
    assert '"mask_token_id": 163838' in mask["fix"]
    ids = checks["ids"]["evidence"]
    assert ids["vocab_size"] == 163840 and ids["vocab_size_source"] == "config.json:text_config"
    assert ids["stop_ids"] == [163585, 163586] and ids["generation_config_eos"] == [163586]
    endpoint = checks["endpoint"]["evidence"]
    assert endpoint["matched"] == {"id": "Kimi-K2.6", "root": str(kimi_model), "by": "root-path"}
    assert endpoint["completion"]["ok"] and endpoint["completion"]["seconds"] >= 0
    packages = checks["disk-and-packages"]["evidence"]["packages"]
    assert {i["name"] for i in packages["items"]} >= {"transformers", "jinja2", "tiktoken"}


def test_json_layout(ready_run, sshd, kimi_model, venv_full):
    report = ready_run.json()
    assert report["schema"] == "introspect.preflight/v1" and report["ready"] is True
    assert report["target"]["host"] == sshd.address and report["target"]["model_path"] == str(kimi_model)
    assert report["target"]["python"] == f"{venv_full}/bin/python"
    assert [c["name"] for c in report["checks"]] == CHECKS
    for check in report["checks"]:
        assert set(check) >= {"name", "title", "status", "message", "evidence", "fix"}
        assert check["status"] in ("pass", "warn", "fail")
        assert (check["fix"] is None) == (check["status"] == "pass"), check


def test_human_checklist(sshd, client_keys, kimi_model, venv_full, kimi_server):
    result = cli("preflight", *ssh_flags(sshd, client_keys), "--model", str(kimi_model), "--venv",
                     str(venv_full), "--endpoint", kimi_server.url, "--min-free-gb", "1",
                     env={"COLUMNS": "160"})
    assert result.code == 0, result.stderr[-2000:]
    for name in CHECKS:
        assert name in result.stdout
    assert "READY" in result.stdout and "NOT READY" not in result.stdout
    assert "fix:" in result.stdout and "163838" in result.stdout


def test_shifted_ids_fail_the_tokenizer_check(sshd, client_keys, models, venv_full):
    result = preflight(sshd, client_keys, models["shifted-ids"], venv_full, "--json")
    check = assert_failing(result, "tokenizer", "163607", "</think>")
    first = check["evidence"]["added_tokens"]["items"][0]
    assert first["id"] == 163607 and first["expected"] == "<think>" and first["decoded"] == "</think>"
    assert check["evidence"]["added_tokens"]["mismatches"] == 2


def test_small_vocab_fails_ids_and_mask_token(sshd, client_keys, models, venv_full):
    result = preflight(sshd, client_keys, models["small-vocab"], venv_full, "--json")
    ids = assert_failing(result, "ids", "163840 > config.json:text_config vocab_size 163584")
    assert ids["evidence"]["len_tokenizer"] == 163840
    # [UNK] (163838) and every reserved id sit above 163584: no usable mask id remains.
    assert_failing(result, "mask-token", "163838", "vocab_size 163584")


def test_foreign_template_markers_fail(sshd, client_keys, models, venv_full):
    result = preflight(sshd, client_keys, models["chatml-template"], venv_full, "--json")
    check = assert_failing(result, "chat-template", "<|im_start|>", "not single tokens")
    broken = [m for m in check["evidence"]["markers"] if not m["single"]]
    assert [m["text"] for m in broken] == ["<|im_start|>"]


def test_end_of_turn_missing_from_stop_ids(sshd, client_keys, models, venv_full):
    result = preflight(sshd, client_keys, models["no-eot-stop"], venv_full, "--json")
    assert_failing(result, "ids", "<|im_end|> (163586)", '"eos_token_id": [163585, 163586]')


def test_generation_markers_give_assistant_masks(sshd, client_keys, models, venv_full):
    result = preflight(sshd, client_keys, models["tiny"], venv_full, "--json")
    assert result.code == 0, (result.stdout[-3000:], result.stderr[-2000:])
    checks = checks_of(result)
    masks = checks["loss-masks"]
    assert masks["status"] == "pass" and masks["evidence"]["method"] == "assistant_tokens_mask"
    assert masks["evidence"]["assistant_tokens_mask"]["covers_turns"] is True
    assert checks["mask-token"]["status"] == "pass" and checks["mask-token"]["evidence"]["present"]["id"] == 259
    assert checks["ids"]["status"] == "pass"
    assert checks["endpoint"]["status"] == "warn"  # not given: said, not failed


def test_stopped_endpoint_fails(sshd, client_keys, models, venv_full):
    server = start_openai_server(model_id="tiny", root=str(models["tiny"]))
    url = server.url
    server.stop()
    result = preflight(sshd, client_keys, models["tiny"], venv_full, "--endpoint", url, "--json")
    check = assert_failing(result, "endpoint", "start the server", url)
    assert check["evidence"]["models"]["error"]["type"] == "unreachable"


def test_endpoint_serving_another_model_fails(sshd, client_keys, models, venv_full):
    server = start_openai_server(model_id="Qwen3-8B", root="/models/Qwen3-8B")
    try:
        result = preflight(sshd, client_keys, models["tiny"], venv_full, "--endpoint", server.url, "--json")
    finally:
        server.stop()
    assert_failing(result, "endpoint", "Qwen3-8B", f"serve {models['tiny']}")


def test_missing_tiktoken_fails_with_pip_fix(sshd, client_keys, kimi_model, venv_no_tiktoken):
    result = preflight(sshd, client_keys, kimi_model, venv_no_tiktoken, "--json")
    pip = f"{venv_no_tiktoken}/bin/pip install tiktoken"
    assert assert_failing(result, "tokenizer")["fix"] == pip
    assert assert_failing(result, "disk-and-packages", "tiktoken (tokenizer code)")["fix"] == pip
    # The other checks still report, each saying it needs the tokenizer.
    assert checks_of(result)["chat-template"]["message"] == "not checked: the tokenizer did not load"


def test_disk_and_extra_packages(sshd, client_keys, models, venv_full, tmp_path):
    result = preflight(sshd, client_keys, models["tiny"], venv_full, "--output-dir", str(tmp_path / "out"),
                       "--min-free-gb", "100000000", "--packages", "no-such-dist-xyz", "--json")
    check = assert_failing(result, "disk-and-packages", "below --min-free-gb",
                           f"{venv_full}/bin/pip install no-such-dist-xyz")
    assert check["evidence"]["disk"]["checked_path"] == str(tmp_path)


def test_api_key_from_the_host_environment_is_used_and_never_shown(models, venv_full):
    secret = "sk-preflight-test-4f1c9a"
    server = start_openai_server(model_id="tiny-chatml", root=None, api_key=secret)
    try:
        args = ("--endpoint", server.url, "--api-key-env", "PREFLIGHT_TEST_KEY", "--json")
        good = preflight(None, None, models["tiny"], venv_full, *args, remote=False,
                         env={"PREFLIGHT_TEST_KEY": secret})
        unset = preflight(None, None, models["tiny"], venv_full, *args, remote=False)
    finally:
        server.stop()
    assert good.code == 0, good.stdout[-3000:]
    endpoint = checks_of(good)["endpoint"]
    assert endpoint["status"] == "pass" and endpoint["evidence"]["matched"]["by"] == "id-name"
    assert secret not in good.stdout + good.stderr
    assert_failing(unset, "endpoint", "export PREFLIGHT_TEST_KEY")
    assert secret not in unset.stdout + unset.stderr


def test_usage_errors_exit_2(kimi_model, venv_full, tmp_path):
    both = cli("preflight", "--model", str(kimi_model), "--venv", str(venv_full), "--python", "python3")
    assert_clean_error(both, 2, "exclusive")
    bad_url = cli("preflight", "--model", str(kimi_model), "--endpoint", "127.0.0.1:30000")
    assert_clean_error(bad_url, 2, "not an http(s) URL")
    missing = cli("preflight", "--model", str(tmp_path / "nope"), "--venv", str(venv_full))
    assert_clean_error(missing, 2, "not-found")


def test_unreachable_host_exits_3(client_keys, kimi_model, venv_full):
    port = free_port("127.0.0.2")  # nothing listens there
    result = cli("preflight", "--host", "127.0.0.2", "--port", str(port), "--identity", str(client_keys.key),
                     "--known-hosts", str(client_keys.known_hosts), "--ssh-config", "/dev/null",
                     "--model", str(kimi_model), "--venv", str(venv_full))
    assert_clean_error(result, 3)
