"""Right by default: real checkpoints' index files, size flags, inventory and config selection,
the local interpreter, the result cache, and errors that name their real cause."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import click
import pytest

from introspect.checks.history import HistoryStore
from introspect.checks.result import CheckResult
from introspect.cli.options import parse_size
from tests.conftest import SESSION_TMP, assert_clean_error, run_cli, ssh_flags
from tests.fixtures.shards import KIMI_K25_CONFIG, write_shard
from tests.sshd_server import free_port

INDEX_ENTRIES = 208_000  # Kimi K2.5/K2.6: ~208k weight_map entries, ~23-27 MB of JSON
SHARDS = 8


def _big_index_model(root: Path) -> Path:
    """A model dir whose index is as big as Kimi K2.6's (the shards hold one tensor each:
    the probe reads the index and every shard's header, never tensor data)."""
    root.mkdir()
    (root / "config.json").write_text(KIMI_K25_CONFIG.read_text())
    names = [f"model-{i:05d}-of-{SHARDS:06d}.safetensors" for i in range(1, SHARDS + 1)]
    weight_map = {f"language_model.model.layers.{i // 3400}.mlp.experts.{i % 384}.gate_up_proj.weight_packed.{i}":
                  names[i % SHARDS] for i in range(INDEX_ENTRIES)}
    for name in names:
        write_shard(root / name, [("t", "BF16", [8])])
    index = {"metadata": {"total_size": 1}, "weight_map": weight_map}
    (root / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    return root


def test_a_kimi_sized_index_probes_clean_under_default_flags(tmp_path: Path) -> None:
    model = _big_index_model(tmp_path / "Kimi-K2.6")
    assert (model / "model.safetensors.index.json").stat().st_size > 16 * 1024 * 1024  # over the JSON cap
    result = run_cli("probe", "--model", str(model), "--no-tokenizer", "--no-cache", "--json")
    assert result.code == 0, (result.stderr, [f["code"] for f in result.json()["findings"]])
    profile = result.json()
    assert not [f for f in profile["findings"] if "too-large" in f["code"]], profile["findings"]
    weights = profile["files"]["hashes"]["weights"]  # what `diff` compares: read through the index
    assert weights["index"]["sha256"] and len(weights["shards"]) == SHARDS and weights["missing_shards"] == []


def _small_model(root: Path, index_entries: int = 0) -> Path:
    root.mkdir()
    (root / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    if index_entries:
        write_shard(root / "a.safetensors", [("t", "BF16", [8])])
        weight_map = {f"model.layers.{i}.mlp.down_proj.weight": "a.safetensors" for i in range(index_entries)}
        (root / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return root


def test_the_index_is_not_held_to_the_configs_json_cap(tmp_path: Path) -> None:
    model = _small_model(tmp_path / "m", index_entries=100)
    assert (model / "model.safetensors.index.json").stat().st_size > 1000
    result = run_cli("probe", "--model", str(model), "--no-tokenizer", "--no-cache", "--json",
                     "--max-json-bytes", "1KB")
    codes = [f["code"] for f in result.json()["findings"] if "too-large" in f["code"]]
    assert codes == [], codes  # the index has its own cap, never the configs' --max-json-bytes


def test_an_index_above_its_cap_is_one_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from introspect.remote.facts.model import hashes

    model = _small_model(tmp_path / "m", index_entries=100)
    monkeypatch.setattr(hashes, "INDEX_CAP", 1000)
    facts, errors = hashes.collect_hashes(str(model), json_cap=1000)
    assert [e["type"] for e in errors] == ["too-large"], errors  # not one for the hash and one for the parse
    assert facts["weights"]["index"]["sha256"] is None


def test_size_flags_take_units() -> None:
    assert parse_size("64MB") == 64 * 10**6
    assert parse_size("1GiB") == 2**30
    assert parse_size("16777216") == 16777216
    assert parse_size("80G") == 80 * 2**30
    with pytest.raises(click.ClickException):
        from introspect.cli.options import BYTE_SIZE

        BYTE_SIZE.convert("lots", None, None)
    result = run_cli("probe", "--model", "/nonexistent", "--max-json-bytes", "lots")
    assert result.code == 2 and "'lots' is not a size" in result.stderr, result.stderr


# --------------------------------------------------------------------------- errors that name the cause


def test_missing_identity_file_is_an_input_error(sshd, client_keys, tmp_path: Path) -> None:
    flags = ssh_flags(sshd, client_keys)
    flags[flags.index("--identity") + 1] = str(tmp_path / "id_ed25519_typo")
    result = run_cli("probe", "--model", "/m", *flags)
    assert_clean_error(result, 2, f"identity file {tmp_path / 'id_ed25519_typo'} does not exist", "--identity")
    assert "network" not in result.stderr and "address" not in result.stderr


def test_no_usable_key_says_what_was_tried(sshd, client_keys, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    flags = [f for f in ssh_flags(sshd, client_keys)]
    at = flags.index("--identity")
    del flags[at:at + 2]
    result = run_cli("probe", "--model", "/m", *flags, env={"HOME": str(home)}, unset=("SSH_AUTH_SOCK",))
    assert_clean_error(result, 3, "no usable ssh key", "tried", "ssh-agent not running", "ssh-add")
    assert "sshd logs" not in result.stderr


def test_output_into_a_missing_directory_fails_before_connecting(tmp_path: Path) -> None:
    result = run_cli("probe", "--model", "/m", "--host", "127.0.0.9", "--port", "1", "-o",
                     str(tmp_path / "no" / "such" / "p.json"))
    assert_clean_error(result, 2, "--output", "does not exist", "mkdir -p")
    assert "internal error" not in result.stderr


def test_output_under_a_file_names_the_file_in_the_way(tmp_path: Path) -> None:
    (tmp_path / "notadir").write_text("x")
    result = run_cli("probe", "--model", "/m", "--host", "127.0.0.9", "--port", "1", "-o",
                     str(tmp_path / "notadir" / "sub" / "p.json"))
    assert_clean_error(result, 2, "--output", f"{tmp_path / 'notadir'} is not a directory", "ls -ld")
    assert "mkdir -p" not in result.stderr  # it would fail with "File exists"


def _inventory(path: Path, client_keys, hosts: dict[str, tuple[str, int]], extra: str = "") -> Path:
    lines = [f"defaults:\n  identity: {client_keys.key}\n  known_hosts: {client_keys.known_hosts}\n{extra}hosts:"]
    lines += [f"  {name}:\n    address: {address}\n    port: {port}" for name, (address, port) in hosts.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_health_db_parent_missing_and_every_host_down(client_keys, tmp_path: Path) -> None:
    inventory = _inventory(tmp_path / "fleet.yaml", client_keys, {
        "a": ("127.0.0.10", free_port("127.0.0.10")), "b": ("127.0.0.11", free_port("127.0.0.11"))})
    missing = run_cli("health", "--hosts", str(inventory), "--db", str(tmp_path / "nodir" / "h.sqlite3"))
    assert_clean_error(missing, 2, "--db", "does not exist")
    assert not (tmp_path / "nodir").exists()
    down = run_cli("health", "--hosts", str(inventory), "--db", str(tmp_path / "h.sqlite3"), "--json")
    assert down.code == 3, down.stderr  # README: 3 when no host could be reached
    assert down.json()["summary"]["unreachable"] == 2


# --------------------------------------------------------------------------- inventory and config


def test_no_implicit_hosts_yaml(client_keys, tmp_path: Path) -> None:
    _inventory(tmp_path / "hosts.yaml", client_keys, {"a": ("127.0.0.10", 1)})
    result = run_cli("models", "--all-hosts", cwd=tmp_path)
    assert_clean_error(result, 2, "no inventory", "INTROSPECT_HOSTS")


def test_inventory_from_env_and_its_remote_code_are_reported(sshd, client_keys, tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "llama"}))
    inventory = _inventory(tmp_path / "fleet.yaml", client_keys, {"h": (sshd.address, sshd.port)},
                           extra="  remote_code: false\n")
    result = run_cli("probe", "--host", "h", "--model", str(model), "--no-tokenizer", "--no-cache", "--json",
                     "--ssh-config", "/dev/null", env={"INTROSPECT_HOSTS": str(inventory)})
    assert result.code in (0, 1), result.stderr
    settings = result.json()["settings"]
    assert settings["inventory"] == {"path": str(inventory), "source": "env", "where": "INTROSPECT_HOSTS"}
    assert settings["remote_code"]["value"] is False and settings["remote_code"]["source"] == "inventory"
    assert result.json()["target"]["python"] == "python3"  # a remote host: its python3


def test_user_config_local_interpreter_cache_hit_and_cache_commands(client_keys, tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "llama"}))
    inventory = _inventory(tmp_path / "fleet.yaml", client_keys, {"a": ("127.0.0.10", 1), "b": ("127.0.0.10", 1)})
    config = tmp_path / "config.yaml"
    config.write_text(f"inventory: {inventory.name}\nremote_code: false\n")  # relative to the config file
    env = {"INTROSPECT_CONFIG": str(config), "INTROSPECT_CACHE_DIR": str(tmp_path / "cache")}
    args = ("probe", "--model", str(model), "--no-tokenizer", "--json")
    cold = run_cli(*args, env=env)
    assert cold.code == 0, cold.stderr
    profile = cold.json()
    assert profile["target"]["python"] == sys.executable  # the interpreter introspect runs in
    assert profile["settings"]["remote_code"] == {"value": False, "source": "config",
                                                  "where": f"{config}: remote_code"}
    warm = run_cli(*args[:-1], env=env)  # the human report says the cache answered
    assert warm.code == 0 and "hit: the model dir and interpreter are unchanged" in warm.stdout, warm.stdout
    assert re.search(r"model's own code\s+refused \(from", warm.stdout), warm.stdout
    info = run_cli("cache", "info", "--json", env=env)
    assert info.json()["entries"] == 1 and info.json()["path"] == str(tmp_path / "cache")
    assert "removed 1" in run_cli("cache", "clear", env=env).stdout
    assert run_cli("cache", "info", "--json", env=env).json()["entries"] == 0
    # The config's `inventory:` is the fleet's inventory, read by the same loader.
    fleet = run_cli("models", "--all-hosts", "--json", env=env)
    assert fleet.code == 3 and [h["host"] for h in fleet.json()["hosts"]] == ["a", "b"], fleet.stderr


def test_a_bad_user_config_is_a_usage_error(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("host: typo.yaml\n")
    result = run_cli("models", "--all-hosts", env={"INTROSPECT_CONFIG": str(config)})
    assert_clean_error(result, 2, str(config), "unknown key", "host")


# --------------------------------------------------------------------------- selectors, history, the suite


def test_every_multi_host_command_takes_the_same_selectors() -> None:
    from introspect.cli.main import cli

    ctx = click.Context(cli)
    for name in ("probe", "health", "preflight", "models"):
        command = cli.get_command(ctx, name)
        assert command is not None
        opts = {opt for param in command.params for opt in getattr(param, "opts", [])}
        assert {"--host", "--hosts", "--only", "--tags", "--all-hosts"} <= opts, (name, opts)
    diff = cli.get_command(ctx, "diff")
    assert diff is not None and "--sections" in {o for p in diff.params for o in p.opts}


def test_history_prune_keeps_the_latest_run(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    with HistoryStore(db) as store:
        for started in (1000.0, 2000.0, 3000.0):
            store.record_run(argv=["health"], started_at=started, finished_at=started + 1,
                             results=[("a", None, CheckResult("reachable", "pass", "ok"))])
    result = run_cli("history", "prune", "--keep-days", "1", "--db", str(db))
    assert result.code == 0 and "deleted 2 run(s)" in result.stdout, result.stderr
    with HistoryStore(db) as store:
        assert [run.started_at for run in store.runs()] == [3000.0]


def test_cli_runs_of_the_suite_write_under_its_session_dir() -> None:
    # Their result caches and temp files go under the session dir (removed at the end), never /tmp.
    info = run_cli("cache", "info", "--json")
    assert Path(info.json()["path"]).parent == SESSION_TMP
