"""Links out of the model directory are never followed, and path failures name their real cause.

A model dir is filled by someone else: any file the probe reads may be a symbolic link to a
secret elsewhere (a docker ``config.json`` with ``auths``, a shadow-like file, a key). Each case
puts a unique marker in such a file outside the model dir, links a model file to it, runs
``introspect probe`` with ``--output``, ``--save-raw`` and the result cache, and checks that the
marker (and the secret's path and hash) reach no output and no written file, while the finding
names the link. An HF-cache snapshot, whose files link into the repo's ``blobs/``, still probes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import assert_clean_error, run_cli, ssh_flags
from tests.inprocess import run_main
from tests.models import NEW_COMMIT, REPO_ID, add_revision, files_of

DOCKER = '{"auths": {"registry.example": {"auth": "%s"}}}\n'
JINJA = "{{ '%s' }}{%% for m in messages %%}{{ m.content }}{%% endfor %%}\n"
SHADOW = "root:%s:19700:0:99999:7:::\ndaemon:*:19700:0:99999:7:::\n"

# (file in the model dir, secret format). The files of the issue, then every other kind the probe
# reads: vocab files, the weights index and a shard header, the model's code, processor configs.
CASES = [
    ("config.json", DOCKER),
    ("tokenizer_config.json", DOCKER),
    ("generation_config.json", DOCKER),
    ("special_tokens_map.json", SHADOW),
    ("chat_template.jinja", JINJA),
    ("tokenizer.json", DOCKER),
    ("tiktoken.model", SHADOW),
    ("model.safetensors.index.json", DOCKER),
    ("model-00001-of-000001.safetensors", SHADOW),
    ("modeling_deepseek.py", SHADOW),
    ("preprocessor_config.json", DOCKER),
    ("additional_chat_templates/tools.jinja", JINJA),
]


def _secret(tmp_path: Path, name: str, fmt: str) -> tuple[Path, str]:
    """A file outside the model dir holding a marker unique to this case."""
    marker = "MARKER" + hashlib.sha256(f"{tmp_path}{name}".encode()).hexdigest()[:16]
    outside = tmp_path / "outside-secrets"
    outside.mkdir(exist_ok=True)
    secret = outside / ("secret-" + name.replace("/", "-"))
    secret.write_text(fmt % marker)
    return secret, marker


def _linked_model(kimi_model: Path, tmp_path: Path, name: str, target: Path) -> Path:
    model = tmp_path / "model"
    shutil.copytree(kimi_model, model)
    link = model / name
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.exists():
        link.unlink()
    link.symlink_to(target)
    return model


def _written(*roots: Path) -> list[Path]:
    files = []
    for root in roots:
        files += [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
    return files


def _assert_nothing_leaks(result, secret: Path, marker: str, written: list[Path]) -> None:
    digest = hashlib.sha256(secret.read_bytes()).hexdigest()
    for needle in (marker, digest, str(secret.parent)):
        assert needle not in result.stdout and needle not in result.stderr, needle
        for path in written:
            assert needle not in path.read_text(errors="replace"), (needle, path)


def _probe(model: Path, venv: Path, tmp_path: Path, *extra: str):
    """The probe through ``main()`` in this process (tests/inprocess.py): what it prints and writes
    is what a subprocess would, without paying the CLI's imports (~1.5 CPU-s) in each case; the
    loads still run in their own interpreters, under the probe's own timeouts."""
    out, raw, cache = tmp_path / "profile.json", tmp_path / "raw.json", tmp_path / "cache"
    result = run_main("probe", "--model", str(model), "--venv", str(venv), "--output", str(out),
                      "--save-raw", str(raw), *extra, env={"INTROSPECT_CACHE_DIR": str(cache)})
    written = _written(out, raw, cache)
    assert len(written) >= 3, "the profile, the raw facts and a cache entry were all written"
    return result, json.loads(out.read_text()), written


def _link_findings(profile: dict, link: Path) -> list[dict]:
    return [f for f in profile["findings"] if f["code"] == "link-outside" and str(link) in f["message"]]


@pytest.mark.parametrize(("name", "fmt"), CASES, ids=[c[0] for c in CASES])
def test_a_link_out_is_named_and_never_followed(kimi_model, venv_full, tmp_path, name, fmt):
    secret, marker = _secret(tmp_path, name, fmt)
    model = _linked_model(kimi_model, tmp_path, name, secret)
    result, profile, written = _probe(model, venv_full, tmp_path)
    assert result.code == 1, (result.code, result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    _assert_nothing_leaks(result, secret, marker, written)
    findings = _link_findings(profile, model / name)
    assert len(findings) == 1 and findings[0]["severity"] == "error", profile["findings"]
    assert "outside the model directory" in findings[0]["message"]
    if not name.endswith(".safetensors") and not name.endswith(".index.json"):
        # transformers would follow the link: the load is not run, the raw files' facts stand.
        assert profile["tokenizer"]["loaded"] is False
        assert any(f["code"] == "tokenizer-load-failed" and str(model / name) in f["message"]
                   for f in profile["findings"]), profile["findings"]
    else:  # weights are never opened by the loads: the tokenizer still loads
        assert profile["tokenizer"]["loaded"] is True, profile["findings"]
    # The facts of every file that stays inside still stand.
    if name != "config.json":
        assert profile["architecture"]["num_layers"] == 61
    if name not in ("tokenizer_config.json", "tiktoken.model"):
        assert profile["tokenizer"]["bos"] == {"token": "[BOS]", "id": 163584}


def test_a_directory_link_out_is_named_once(kimi_model, venv_full, tmp_path):
    secret, marker = _secret(tmp_path, "tools.jinja", JINJA)
    model = tmp_path / "model"
    shutil.copytree(kimi_model, model)
    (model / "additional_chat_templates").symlink_to(secret.parent, target_is_directory=True)
    result, profile, written = _probe(model, venv_full, tmp_path, "--no-model-code")
    assert result.code == 1, result.stderr[-2000:]
    _assert_nothing_leaks(result, secret, marker, written)
    assert _link_findings(profile, model / "additional_chat_templates"), profile["findings"]
    listing = {row["name"]: row for row in profile["files"]["listing"]}
    row = listing["additional_chat_templates"]
    assert (row["link_error"], row["link"], row["resolved"]) == ("link-outside", None, None)


@pytest.mark.ssh
def test_a_link_out_over_ssh(sshd, client_keys, kimi_model, venv_full, tmp_path):
    secret, marker = _secret(tmp_path, "config.json", DOCKER)
    model = _linked_model(kimi_model, tmp_path, "config.json", secret)
    out, raw, cache = tmp_path / "profile.json", tmp_path / "raw.json", tmp_path / "cache"
    result = run_cli("probe", *ssh_flags(sshd, client_keys), "--model", str(model), "--venv", str(venv_full),
                     "--output", str(out), "--save-raw", str(raw), env={"INTROSPECT_CACHE_DIR": str(cache)},
                     timeout=180)
    assert result.code == 1, result.stderr[-2000:]
    written = _written(out, raw, cache)
    assert len(written) >= 3
    _assert_nothing_leaks(result, secret, marker, written)
    assert _link_findings(json.loads(out.read_text()), model / "config.json")


def test_hf_cache_snapshot_links_into_blobs_still_probe(kimi_model, venv_full, tmp_path):
    snapshot = add_revision(tmp_path / "hub", REPO_ID, NEW_COMMIT, files_of(kimi_model), refs=("main",))
    assert (snapshot / "config.json").is_symlink()
    result = run_cli("probe", "--model", str(snapshot), "--venv", str(venv_full), "--json", "--no-model-code",
                     timeout=180)
    assert result.code == 0, result.stderr[-2000:]
    profile = result.json()
    assert profile["tokenizer"]["loaded"] is True
    assert profile["architecture"]["num_layers"] == 61
    assert not [f for f in profile["findings"] if f["code"] == "link-outside"]


def test_hf_cache_snapshot_link_out_of_its_repo(kimi_model, venv_full, tmp_path):
    snapshot = add_revision(tmp_path / "hub", REPO_ID, NEW_COMMIT, files_of(kimi_model))
    secret, marker = _secret(tmp_path, "tokenizer_config.json", DOCKER)
    (snapshot / "tokenizer_config.json").unlink()
    (snapshot / "tokenizer_config.json").symlink_to(os.path.relpath(secret, snapshot))
    result, profile, written = _probe(snapshot, venv_full, tmp_path, "--no-model-code")
    assert result.code == 1, result.stderr[-2000:]
    _assert_nothing_leaks(result, secret, marker, written)
    assert _link_findings(profile, snapshot / "tokenizer_config.json"), profile["findings"]
    assert profile["architecture"]["num_layers"] == 61  # config.json's link into blobs/ is followed


# -- path failures name their real cause ---------------------------------------------------------

def _not_config(result) -> None:
    assert "config.json" not in result.stderr and "config-missing" not in result.stdout, result.stderr


@pytest.mark.parametrize("interpreter", ["false", "prints-hello"])
def test_a_venv_whose_python_is_no_python(kimi_model, tmp_path, interpreter):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    if interpreter == "false":
        python.symlink_to(shutil.which("false") or "/bin/false")
    else:
        python.write_text("#!/bin/sh\necho hello\n")
        python.chmod(0o755)
    result = run_cli("probe", "--model", str(kimi_model), "--venv", str(venv))
    assert_clean_error(result, 2, str(python), "not a working Python interpreter", "sys.version")
    _not_config(result)


def test_a_python_that_is_no_python(kimi_model, tmp_path):
    python = tmp_path / "python3"
    python.write_text("#!/bin/sh\nexit 3\n")
    python.chmod(0o755)
    result = run_cli("probe", "--model", str(kimi_model), "--python", str(python))
    assert_clean_error(result, 2, "exit status 3", "not a working Python interpreter")
    _not_config(result)


def _as_nobody(tmp_path: Path) -> Path:
    """An interpreter that runs the probe as nobody (a permission denied means something to it)."""
    setpriv, system_python = shutil.which("setpriv"), "/usr/bin/python3"
    if os.geteuid() != 0 or setpriv is None or not os.access(system_python, os.X_OK):
        pytest.skip("needs root, setpriv and /usr/bin/python3 to run the probe as nobody")
    wrapper = tmp_path / "as-nobody"
    wrapper.write_text(f'#!/bin/sh\nexec {setpriv} --reuid=nobody --regid=nogroup --clear-groups '
                       f'{system_python} "$@"\n')
    wrapper.chmod(0o755)
    tmp_path.chmod(0o755)
    return wrapper


def test_permission_denied_model_dir_as_nobody(kimi_model, tmp_path):
    python = _as_nobody(tmp_path)
    model = tmp_path / "model"
    shutil.copytree(kimi_model, model)
    model.chmod(0o000)
    try:
        result = run_cli("probe", "--model", str(model), "--python", str(python), "--no-tokenizer")
    finally:
        model.chmod(0o755)
    assert_clean_error(result, 2, "permission denied", f"ls -ld {model}")
    _not_config(result)


def test_non_utf8_model_path_loads_its_tokenizer(kimi_model, venv_full, tmp_path):
    model = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"m\xff"))
    shutil.copytree(kimi_model, model)
    result = run_cli("probe", "--model", model, "--venv", str(venv_full), "--json", "--no-model-code")
    assert result.code == 0, result.stderr[-2000:]
    profile = result.json()
    assert profile["tokenizer"]["loaded"] is True, profile["findings"]
    assert profile["tokenizer"]["class"] == "TikTokenTokenizer"
    assert profile["target"]["model_path"] == model


# -- the remote side, in process -----------------------------------------------------------------

def test_confined_reads_name_the_link_and_open_nothing(tmp_path):
    from introspect.remote import confine, readers

    model, outside = tmp_path / "m", tmp_path / "o"
    (model / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "s.json").write_text('{"k": 1}')
    os.mkfifo(outside / "fifo")  # opened, it would block: the check must come first
    (model / "in.json").write_text('{"k": 2}')
    (model / "alias.json").symlink_to(model / "in.json")
    (model / "out.json").symlink_to(outside / "s.json")
    (model / "fifo.json").symlink_to(outside / "fifo")
    (model / "sub" / "up").symlink_to(outside, target_is_directory=True)
    confine.confine(str(model))
    assert readers.read_json_capped(str(model / "alias.json")) == ({"k": 2}, None)
    for path, link in ((model / "out.json", model / "out.json"), (model / "fifo.json", model / "fifo.json"),
                       (model / "sub" / "up" / "s.json", model / "sub" / "up")):
        value, err = readers.read_json_capped(str(path))
        assert value is None and err is not None and err["type"] == "link-outside", err
        assert err["path"] == str(link) and str(outside) not in err["message"]
    assert confine.links_out(str(model)) == sorted([str(model / "fifo.json"), str(model / "out.json"),
                                                    str(model / "sub" / "up")])
    assert readers.sha256_file(str(model / "out.json"))[1]["type"] == "link-outside"


def test_hf_cache_root_is_the_repo(tmp_path):
    from introspect.remote import confine

    snapshot = tmp_path / "models--org--name" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    assert confine.allowed_root(str(snapshot)) == str((tmp_path / "models--org--name").resolve())
    plain = tmp_path / "snapshots" / "abc"
    plain.mkdir(parents=True)
    assert confine.allowed_root(str(plain)) == str(plain.resolve())


def test_load_guard_alias_is_utf8_and_removed(tmp_path):
    from introspect.remote.facts import load_guard

    model = os.path.join(os.fsencode(tmp_path), b"m\xff")
    os.mkdir(model)
    with load_guard.loadable(os.fsdecode(model)) as alias:
        alias.encode("utf-8")
        assert os.path.samefile(alias, model)
    assert not os.path.lexists(alias) and not os.path.exists(os.path.dirname(alias))


@pytest.mark.parametrize("task", ["tokenizer", "model_code"])
def test_isolated_loads_refuse_a_model_dir_that_links_out(kimi_model, tmp_path, task):
    import importlib

    secret, _marker = _secret(tmp_path, "tokenizer_config.json", DOCKER)
    model = _linked_model(kimi_model, tmp_path, "tokenizer_config.json", secret)
    (model / "model-00001-of-000001.safetensors").symlink_to(secret)  # weights: never opened by a load
    run = importlib.import_module(f"introspect.remote.tasks.{task}").run
    error = run({"model_path": str(model), "trust_remote_code": True})["error"]
    assert error["cause"] == "link-outside" and error["type"] == "LinkOutside", error
    assert str(model / "tokenizer_config.json") in error["message"]
    assert "safetensors" not in error["message"] and str(secret) not in error["message"]
