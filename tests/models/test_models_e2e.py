"""Issue 8 end to end over real sshd hosts on 127.0.0.2 and 127.0.0.3 (known_hosts checking on).

Both "hosts" share this machine's filesystem, so each gets its own directory tree;
the HF cache is passed with ``--hf-cache`` (the remote environment is sshd's, and the
real ``~/.cache/huggingface`` must stay untouched).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from introspect.analysis.profile import build_profile
from introspect.cli.connect import ConnectionFlags, executor_for
from introspect.client.hub import resolve_model
from introspect.client.model import ProbeOptions, gather
from introspect.errors import ModelPathError
from introspect.transport.hostkeys import KnownHosts
from tests.conftest import assert_clean_error, run_cli, ssh_flags
from tests.models import NEW_COMMIT, OLD_COMMIT, REPO_ID, add_revision, files_of
from tests.sshd_server import ClientKeys, SSHServer, free_port, start_sshd, trust

pytestmark = pytest.mark.ssh

SYSTEM_LINE = "You are Kimi, an AI assistant created by Moonshot AI."
EDITED_LINE = "You are Kimi, a careful assistant."
DFLASH = {"architectures": ["DFlashDraftModel"], "num_hidden_layers": 6, "block_size": 8,
          "dflash_config": {"mask_token_id": 163838, "target_layer_ids": [1, 12, 24, 35, 47, 58]},
          "target_model": "moonshotai/Kimi-K2.6"}


@pytest.fixture(scope="module")
def sshd3(tmp_path_factory: pytest.TempPathFactory, client_keys: ClientKeys) -> Iterator[SSHServer]:
    server = start_sshd(tmp_path_factory.mktemp("sshd3"), client_keys, address="127.0.0.3")
    trust(server, client_keys)
    yield server
    server.stop()


def _edit_template(model: Path) -> None:
    path = model / "chat_template.jinja"
    text = path.read_text(encoding="utf-8")
    assert SYSTEM_LINE in text
    path.write_text(text.replace(SYSTEM_LINE, EDITED_LINE), encoding="utf-8")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, kimi_model: Path, sshd: SSHServer, sshd3: SSHServer,
          client_keys: ClientKeys) -> dict[str, Path]:
    """host-a: Kimi + a DFlash drafter + an HF cache (v1: edited template, main: original);
    host-b: the same Kimi with one template line changed, and an identical copy."""
    base = tmp_path_factory.mktemp("fleet")
    root_a = base / "host-a" / "models"
    model_a = Path(shutil.copytree(kimi_model, root_a / "Kimi-K2.6"))
    # Not beside the model: a sibling drafter would (rightly) show up in the model's own profile.
    drafter = base / "host-a" / "drafters" / "Kimi-K2.6-DFlash"
    drafter.mkdir(parents=True)
    (drafter / "config.json").write_text(json.dumps(DFLASH))
    root_b = base / "host-b" / "models"
    model_b = Path(shutil.copytree(kimi_model, root_b / "Kimi-K2.6"))
    _edit_template(model_b)
    same_b = Path(shutil.copytree(kimi_model, root_b / "Kimi-K2.6-copy"))
    cache = base / "host-a" / "hub"
    add_revision(cache, REPO_ID, OLD_COMMIT, files_of(model_b), refs=("v1",), mtime=time.time() - 3600)
    add_revision(cache, REPO_ID, NEW_COMMIT, files_of(model_a), refs=("main",))
    inventory = base / "hosts.yaml"
    inventory.write_text(
        f"defaults:\n  identity: {client_keys.key}\n  known_hosts: {client_keys.known_hosts}\n"
        f"hosts:\n"
        f"  h2:\n    address: {sshd.address}\n    port: {sshd.port}\n"
        f"  h3:\n    address: {sshd3.address}\n    port: {sshd3.port}\n"
        f"  down:\n    address: 127.0.0.4\n    port: {free_port('127.0.0.4')}\n")
    return {"base": base, "root_a": root_a, "model_a": model_a, "drafter": drafter, "root_b": root_b,
            "model_b": model_b, "same_b": same_b, "cache": cache, "inventory": inventory}


def _line(stdout: str, *needles: str) -> str:
    lines = [line for line in stdout.splitlines() if all(n in line for n in needles)]
    assert len(lines) == 1, (needles, stdout)
    return lines[0]


# --------------------------------------------------------------------------- models


def test_models_lists_dirs_cache_and_drafter(fleet, sshd, client_keys, venv_full) -> None:
    result = run_cli("models", *ssh_flags(sshd, client_keys), "--roots", str(fleet["root_a"]),
                     "--roots", str(fleet["drafter"].parent), "--hf-cache", str(fleet["cache"]),
                     "--venv", str(venv_full), "--wide", cwd=fleet["base"])  # one line per model
    assert result.code == 0, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    kimi = _line(result.stdout, str(fleet["model_a"]) + " ")
    for needle in (sshd.address, "kimi_k25 (kimi_k2)", " 61 ", "1.03T / 31.69B", "compressed-tensors 4-bit",
                   "tiktoken + remote code"):
        assert needle in kimi, (needle, kimi)
    assert "kimi_k25" in _line(result.stdout, f"{REPO_ID}@main")
    assert "kimi_k25" in _line(result.stdout, f"{REPO_ID}@v1")
    assert "dflash -> moonshotai/Kimi-K2.6" in _line(result.stdout, str(fleet["drafter"]))


def test_models_json_with_the_stdlib_cache_reader(fleet, sshd, client_keys) -> None:
    result = run_cli("models", *ssh_flags(sshd, client_keys), "--roots", str(fleet["root_a"]),
                     "--roots", str(fleet["drafter"].parent), "--hf-cache", str(fleet["cache"]),
                     "--python", "/usr/bin/python3", "--no-hf-scanner",
                     "--json", cwd=fleet["base"])
    assert result.code == 0, result.stderr
    [host] = result.json()["hosts"]
    assert host["ok"] and host["hf_cache"]["scanner"] == "stdlib"
    cached = [(m["repo_id"], m["commit"]) for m in host["models"] if m["source"] == "hf-cache"]
    assert cached == [(REPO_ID, NEW_COMMIT), (REPO_ID, OLD_COMMIT)]
    assert {m["path"] for m in host["models"] if m["source"] == "dir"} == {str(fleet["model_a"]),
                                                                          str(fleet["drafter"])}


def test_models_fleet_in_parallel_with_one_host_down(fleet, venv_full) -> None:
    result = run_cli("models", "--hosts", str(fleet["inventory"]), "--ssh-config", "/dev/null",
                     "--roots", str(fleet["base"]), "--hf-cache", str(fleet["cache"]),
                     "--venv", str(venv_full), "--connect-timeout", "3", "--wide", cwd=fleet["base"])
    assert result.code == 3, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    for host in ("h2", "h3"):
        assert _line(result.stdout, host + " ", str(fleet["model_b"]) + " ")
    assert any(line.startswith("error: down: ") for line in result.stderr.splitlines()), result.stderr
    assert "fix: " in result.stderr


# --------------------------------------------------------------------------- repo ids


def _executor(server: SSHServer, client: ClientKeys):
    flags = ConnectionFlags(host=server.address, port=server.port, user=None, identity=str(client.key),
                            jump=None, known_hosts=str(client.known_hosts), accept_new=False,
                            ssh_config="/dev/null", connect_timeout=5.0, hosts_file=None)
    executor, _entry = executor_for(flags, None, KnownHosts(str(client.known_hosts)))
    return executor


def test_repo_id_resolves_to_a_snapshot_that_probes(fleet, sshd, client_keys, venv_full) -> None:
    python = f"{venv_full}/bin/python"
    cache = str(fleet["cache"])
    with _executor(sshd, client_keys) as executor:
        newest, facts = resolve_model(executor, python, REPO_ID, 30, cache_dir=cache)
        tagged, _ = resolve_model(executor, python, f"{REPO_ID}@v1", 30, cache_dir=cache)
        by_commit, _ = resolve_model(executor, python, f"{REPO_ID}@{OLD_COMMIT[:7]}", 30, cache_dir=cache)
        with pytest.raises(ModelPathError) as missing:
            resolve_model(executor, python, f"{REPO_ID}@v2", 30, cache_dir=cache)
        # Without the model-code witness (not asserted here): the snapshot's files and tokenizer are.
        raw = gather(executor, ProbeOptions(model_path=tagged, venv=str(venv_full), load_model_code=False),
                     {"model_path": tagged})
    assert newest.endswith("/snapshots/" + NEW_COMMIT) and facts["revision"] == "main"
    assert tagged == by_commit and tagged.endswith("/snapshots/" + OLD_COMMIT)
    assert missing.value.host == sshd.address
    assert f"{NEW_COMMIT[:12]} (main)" in missing.value.message and f"{OLD_COMMIT[:12]} (v1)" in missing.value.message
    # The snapshot's files are links into blobs/: the probe reads through them.
    listing = {row["name"]: row for row in raw["files"]["listing"]}
    assert "/blobs/" in listing["config.json"]["resolved"]
    profile = build_profile(raw)
    assert profile["architecture"]["num_layers"] == 61
    assert profile["tokenizer"]["loaded"] is True, profile["tokenizer"]["error"]
    assert EDITED_LINE in profile["tokenizer"]["chat_template"]["text"]


def _probe_takes_hf_cache() -> bool:
    return "--hf-cache" in run_cli("probe", "--help").stdout


def test_probe_model_repo_id_cli(fleet, sshd, client_keys, venv_full) -> None:
    if not _probe_takes_hf_cache():
        pytest.skip("`probe --model org/name` is wired into cmd_probe separately (resolve_model)")
    # What is asserted is the resolved path: the tokenizer and the witness are left out.
    result = run_cli("probe", *ssh_flags(sshd, client_keys), "--model", f"{REPO_ID}@v1", "--hf-cache",
                     str(fleet["cache"]), "--venv", str(venv_full), "--json", "--no-tokenizer",
                     "--no-model-code", cwd=fleet["base"])
    assert result.code == 0, result.stderr[-2000:]
    assert result.json()["target"]["model_path"].endswith("/snapshots/" + OLD_COMMIT)
    missing = run_cli("probe", *ssh_flags(sshd, client_keys), "--model", f"{REPO_ID}@v2", "--hf-cache",
                      str(fleet["cache"]), "--venv", str(venv_full), cwd=fleet["base"])
    assert_clean_error(missing, 2, "v2", OLD_COMMIT[:12], NEW_COMMIT[:12])


# --------------------------------------------------------------------------- diff


def _diff(fleet, venv_full, a: str, b: str, *extra: str):
    return run_cli("diff", a, b, "--hosts", str(fleet["inventory"]), "--ssh-config", "/dev/null",
                   "--venv", str(venv_full), "--no-model-code", *extra, cwd=fleet["base"])


def test_diff_two_hosts_names_the_template_and_the_changed_line(fleet, venv_full) -> None:
    result = _diff(fleet, venv_full, f"h2:{fleet['model_a']}", f"h3:{fleet['model_b']}")
    assert result.code == 1, (result.stdout[-3000:], result.stderr[-3000:])
    out = result.stdout
    assert "architecture: identical" in out and "environment: identical" in out
    assert "chat template (chat_template.jinja) differs" in out
    assert "sha256:chat_template.jinja" in out  # the files group names the file too
    assert any(line.strip() == f"-<|im_system|>system<|im_middle|>{SYSTEM_LINE}<|im_end|>"
               for line in out.splitlines()), out
    assert any(line.strip() == f"+<|im_system|>system<|im_middle|>{EDITED_LINE}<|im_end|>"
               for line in out.splitlines()), out
    assert "result: different (tokenizer, files)" in out


def test_diff_identical_copies_on_two_hosts(fleet, venv_full) -> None:
    result = _diff(fleet, venv_full, f"h2:{fleet['model_a']}", f"h3:{fleet['same_b']}", "--json",
                   "--no-tokenizer")  # the file facts suffice here; the tokenizer load is tested above
    assert result.code == 0, (result.stdout[-3000:], result.stderr[-3000:])
    assert result.json()["identical"] is True


def test_diff_cached_revisions_by_repo_id(fleet, venv_full) -> None:
    result = _diff(fleet, venv_full, f"h2:{REPO_ID}@v1", f"h2:{REPO_ID}", "--hf-cache", str(fleet["cache"]),
                   "--only", "tokenizer", "--only", "files", "--json", "--no-tokenizer")
    assert result.code == 1, result.stderr[-3000:]
    data = result.json()
    assert data["labels"]["a"].endswith("/snapshots/" + OLD_COMMIT)
    lines = data["groups"]["tokenizer"]["template_diff"]["lines"]
    assert f"-<|im_system|>system<|im_middle|>{EDITED_LINE}<|im_end|>" in lines
    missing = _diff(fleet, venv_full, f"h2:{REPO_ID}@v9", f"h2:{REPO_ID}", "--hf-cache", str(fleet["cache"]))
    assert_clean_error(missing, 2, "v9", "cached revisions")
