"""Secrets never leave in any output or file: URL passwords with any characters, tokens in URL
queries, key passphrases and host-spec passwords, masked by pattern on the host (environment
facts) and again on the controller before anything is printed or written (stdout, stderr,
--output, --save-raw, the result cache, the history database)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from introspect import redact
from introspect.errors import UsageError
from introspect.remote.facts.host.environment import relevant_env
from introspect.remote.redaction import REDACTED, is_secret_param, redact_text
from introspect.transport.hostspec import parse_host
from tests.conftest import assert_clean_error, run_cli, ssh_flags
from tests.faults.conftest import tokenizer_model
from tests.sshd_server import start_sshd, trust

# -- the patterns ----------------------------------------------------------------------------------

MASKED = [
    # userinfo: everything up to the LAST '@', whatever the password holds
    ("https://u:p@ss/w@rd@idx.example/simple", "https://<redacted>@idx.example/simple"),
    ("https://u:pass/word@idx.example/simple", "https://<redacted>@idx.example/simple"),
    ("https://u:a?b#c@d@idx.example:8443/x", "https://<redacted>@idx.example:8443/x"),
    ("https://u:a://b@host.example/x", "https://<redacted>@host.example/x"),
    ("http://proxyuser:Pr0xy@proxy.example:3128", "http://<redacted>@proxy.example:3128"),
    ("git remote https://ghp_short@github.com/org/repo.git", "git remote https://<redacted>@github.com/org/repo.git"),
    ("ssh://root:PASSWORD@127.0.0.3:22", "ssh://<redacted>@127.0.0.3:22"),
    ("pct://200?via=ssh://root:pw@pve1", "pct://200?via=ssh://<redacted>@pve1"),
    ("https://proxy.example/https://u:p@x.example", "https://proxy.example/https://<redacted>@x.example"),
    ("host 'root:pa@ss@gpu1' refused", "host '<redacted>@gpu1' refused"),
    ("https://u:1234/5@h.example", "https://<redacted>@h.example"),
    ("https://u:[pw]@h.example/x", "https://<redacted>@h.example/x"),
    # secret query (and fragment) parameters
    ("https://h.example/?token=SECRETQ&x=1", "https://h.example/?token=<redacted>&x=1"),
    ("https://h.example/cb#access_token=AT1&state=s", "https://h.example/cb#access_token=<redacted>&state=s"),
    ("https://s3.example/m?X-Amz-Signature=abc&X-Amz-Credential=AKIAX%2F2024&X-Amz-Date=1",
     "https://s3.example/m?X-Amz-Signature=<redacted>&X-Amz-Credential=<redacted>&X-Amz-Date=1"),
    ("https://storage.example/o?X-Goog-Signature=0a1b", "https://storage.example/o?X-Goog-Signature=<redacted>"),
    ("https://blob.example/c?sv=2022&sig=AbC%3D", "https://blob.example/c?sv=2022&sig=<redacted>"),
    ("https://maps.example/api?key=K1&api_key=K2&apikey=K3&auth=K4&password=K5&passwd=K6&secret=K7",
     "https://maps.example/api?key=<redacted>&api_key=<redacted>&apikey=<redacted>&auth=<redacted>"
     "&password=<redacted>&passwd=<redacted>&secret=<redacted>"),
    # headers and well-known token shapes
    ("Authorization: Bearer abcdefgh12345678", "Authorization: Bearer <redacted>"),
    ("curl -H 'Authorization: token s3cr3tvalue'", "curl -H 'Authorization: token <redacted>'"),
    ("use Bearer eyJhbGciOiJIUzI1NiJ9.e30.x now", "use Bearer <redacted> now"),
    ("HF token hf_" + "a" * 34 + " expired", "HF token <redacted> expired"),
    ("AKIAIOSFODNN7EXAMPLE in the log", "<redacted> in the log"),
    # a fine-grained GitHub token holds no "gh": its own literal start is the marker
    ("GITHUB_PAT=github_pat_" + "A1" * 20, "GITHUB_PAT=<redacted>"),
    ("push with ghp_" + "b" * 36, "push with <redacted>"),
    # the bare-login rule behind its cheap ':'..'@' gate: the gate finds it in a long text
    ("high " * 200 + "root:pw@gpu1 through", "high " * 200 + "<redacted>@gpu1 through"),
]

KEPT = [
    "ssh://root@gpu1:2222", "openssh://gpu1", "pct://200?via=ssh://root@pve1",
    "git+https://github.com/org/repo@v1.0", "https://h.example/a?email=x@y.example",
    "https://h.example/?page=2&sort=name", "num_hidden_layers=61", "root@gpu1:22",
    "{{ bos_token }}{% for m in messages %}", "tokenizer_config.json", "Bearer",
    # usage forms in fix lines, and an '@' in the path after a host:port
    "write it as ssh://[user@]host[:port]", "openssh://[user@]host[:port][?opt=v]",
    "https://host.example:8080/p@x",
    "high-throughput weights through a thigh", "#1 SMP PREEMPT_DYNAMIC @0",
]


@pytest.mark.parametrize(("text", "expected"), MASKED)
def test_patterns_mask(text, expected):
    assert redact_text(text) == expected
    assert redact_text(expected) == expected  # idempotent: masking twice changes nothing


@pytest.mark.parametrize("text", KEPT)
def test_patterns_keep_what_is_no_secret(text):
    assert redact_text(text) == text


@pytest.mark.parametrize("name", ["token", "access_token", "X-Amz-Signature", "X-Amz-Credential",
                                  "X-Amz-Security-Token", "X-Goog-Signature", "sig", "signature", "key",
                                  "api_key", "apikey", "client_secret", "password", "passwd", "auth", "code"])
def test_secret_query_names(name):
    assert is_secret_param(name)


# Passwords: any printable character but whitespace (a URL never holds that unencoded).
_PASSWORDS = st.text(st.characters(blacklist_categories=("Z", "C")), min_size=1, max_size=40)
_QUERY_VALUES = st.text(st.characters(blacklist_categories=("Z", "C"), blacklist_characters="&#;"),
                        min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(password=_PASSWORDS)
def test_any_password_in_a_url_is_masked(password):
    url = f"https://user:{password}@idx.example/simple"
    assert redact_text(url) == "https://<redacted>@idx.example/simple"
    assert redact_text(f"PIP_INDEX_URL={url} pip install x") == \
        "PIP_INDEX_URL=https://<redacted>@idx.example/simple pip install x"


@settings(max_examples=300, deadline=None)
@given(value=_QUERY_VALUES, name=st.sampled_from(["token", "access_token", "sig", "X-Amz-Signature", "key"]))
def test_any_query_token_is_masked(value, name):
    assert redact_text(f"https://h.example/x?a=1&{name}={value}&b=2") == \
        f"https://h.example/x?a=1&{name}={REDACTED}&b=2"


@contextlib.contextmanager
def _own_secrets() -> Iterator[None]:
    """Secrets remembered inside stay in here: the registry is the process's, and a remembered
    "00000000" would mask text in every later test of this process."""
    saved = redact._known
    try:
        yield
    finally:
        redact._known = saved


def _refusal(spec: str) -> str:
    with _own_secrets(), pytest.raises(UsageError) as caught:
        parse_host(spec)
    return f"{caught.value.one_line()} {caught.value.hint}"


@settings(max_examples=200, deadline=None)
@given(password=st.text(st.characters(blacklist_categories=("Cs",)), min_size=8, max_size=30))
def test_a_host_spec_password_is_refused_and_never_echoed(password):
    assume(password not in _refusal("ssh://root:xxxxxxxx@gpu1:22"))  # not a word of the message itself
    assume(not password.startswith("//"))  # root://... is a URL of scheme root, not root:PASSWORD
    for spec in (f"ssh://root:{password}@gpu1:22", f"openssh://root:{password}@gpu1", f"root:{password}@gpu1"):
        shown = _refusal(spec)
        assert "password in host spec" in shown
        assert password not in shown and repr(password)[1:-1] not in shown


def test_known_secrets_are_scrubbed_in_every_form():
    secret = "Pa$$ 'phrase\\42"
    with _own_secrets():
        _check_known(secret)


def _check_known(secret: str) -> None:
    redact.remember(secret)
    for shown in (secret, repr(secret)[1:-1], json.dumps(secret)[1:-1]):
        assert redact.scrub(f"error: cannot decrypt ({shown})") == f"error: cannot decrypt ({REDACTED})"
    document = {"errors": [{"message": f"bad {secret}", secret: 1}], "n": 3}
    assert redact.scrub_document(document) == {"errors": [{"message": f"bad {REDACTED}", REDACTED: 1}], "n": 3}
    clean = {"a": ["no secret here"], "b": 1}
    assert redact.scrub_document(clean) is clean  # nothing to mask: no copy


def test_host_side_environment_is_masked_by_name_and_by_pattern():
    env = relevant_env({"HF_ENDPOINT": "https://u:p@ss/w@rd@hub.example/x", "HF_MIRROR": "https://m.example/?token=Q1",
                        "HF_HUB_TOKEN": "hf_x", "VLLM_PASSPHRASE": "p", "HF_HOME": "/data/hf"})
    assert env == {"HF_ENDPOINT": "https://<redacted>@hub.example/x", "HF_MIRROR": "https://m.example/?token=<redacted>",
                   "HF_HUB_TOKEN": REDACTED, "VLLM_PASSPHRASE": REDACTED, "HF_HOME": "/data/hf"}


def test_env_command_shows_no_secret():
    from introspect.cli.cmd_env import redacted_environment

    shown = redacted_environment({"HF_TOKEN": "hf_x", "HF_HUB_CACHE": "https://u:p@ss/w@rd@h.example/c",
                                  "SSH_AUTH_SOCK": "/run/agent.sock", "INTROSPECT_HOSTS": "/etc/hosts.yaml",
                                  "HF_HOME": "/data/hf?token=T0KEN"})
    assert shown == {"HF_TOKEN": "<set>", "HF_HUB_CACHE": "https://<redacted>@h.example/c",
                     "SSH_AUTH_SOCK": "/run/agent.sock", "INTROSPECT_HOSTS": "/etc/hosts.yaml",
                     "HF_HOME": "/data/hf?token=<redacted>"}


# -- end to end, over a real sshd ------------------------------------------------------------------

# sshd's SetEnv: each value below reaches the probe's session; every SECRET must stay out of
# everything the run prints or writes.
HOST_ENV = {
    "HF_ENDPOINT": "https://hfuser:p@ss/w@rd@idx.example/simple",
    "HF_HUB_MIRROR": "https://h.example/?token=SECRETQ1&x=1",
    "VLLM_MODEL_URL": "https://s3.example/m?X-Amz-Signature=SIGSECRET2&X-Amz-Credential=CREDSECRET3",
    "SGLANG_REMOTE": "https://blob.example/c?sv=1&sig=SIGSECRET4",
    "PIP_INDEX_URL": "https://u:p@ss/w@rd@idx.example/simple",
}
SECRETS = ["p@ss/w@rd", "hfuser", "SECRETQ1", "SIGSECRET2", "CREDSECRET3", "SIGSECRET4"]
# Raised by the model's own tokenizer code on the host: reaches the controller as an error text.
HOST_ERROR = "fetch https://bob:Err0r@Pass@hub.example/x?access_token=ERRTOKEN5 failed"
ERROR_SECRETS = ["Err0r@Pass", "ERRTOKEN5"]


def _everything(written: Path, *results) -> str:
    """Every output and every file under ``written`` (cache, raw, output, history), as text."""
    texts = [part for r in results for part in (r.stdout, r.stderr)]
    for path in written.rglob("*"):
        if path.is_file():
            texts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(texts)


@pytest.fixture(scope="module")
def leaky_sshd(tmp_path_factory, client_keys):
    setenv = " ".join(f"{name}={value}" for name, value in HOST_ENV.items())
    server = start_sshd(tmp_path_factory.mktemp("sshd-secrets"), client_keys, address="127.0.0.12",
                        extra_config=f"SetEnv {setenv}")
    trust(server, client_keys)
    yield server
    server.stop()


@pytest.mark.ssh
def test_probe_outputs_and_files_hold_no_secret(leaky_sshd, client_keys, kimi_model, venv_full, tmp_path):
    written = tmp_path / "written"
    cache, raw, out = written / "cache", written / "raw.json", written / "profile.json"
    written.mkdir()
    env = {"INTROSPECT_CACHE_DIR": str(cache)}
    args = ["probe", *ssh_flags(leaky_sshd, client_keys), "--model", str(kimi_model), "--venv", str(venv_full),
            "--no-model-code"]
    first = run_cli("--debug", *args, "--json", "--save-raw", str(raw), "--output", str(out), env=env)
    assert first.code == 0, first.stderr[-2000:]
    assert list(cache.glob("*.json")), "the result cache was not written"
    # The variables did reach the probe (else this test proves nothing), masked on the host.
    env_vars = json.loads(raw.read_text())["environment"]["env_vars"]
    assert env_vars["HF_ENDPOINT"] == "https://<redacted>@idx.example/simple"
    assert env_vars["HF_HUB_MIRROR"] == "https://h.example/?token=<redacted>&x=1"
    again = run_cli(*args, env=env)  # from the cache, as the human report
    assert again.code == 0, again.stderr[-2000:]
    everything = _everything(written, first, again)
    for secret in SECRETS:
        assert secret not in everything, secret


@pytest.mark.ssh
def test_host_error_texts_are_masked_on_the_controller(leaky_sshd, client_keys, kimi_model, venv_full, tmp_path):
    model = tokenizer_model(kimi_model, tmp_path / "model", f"raise ValueError({HOST_ERROR!r})", tmp_path / "pids")
    written = tmp_path / "written"  # the model's own code holds the secrets: not scanned
    written.mkdir()
    raw, out = written / "raw.json", written / "profile.json"
    args = ["probe", *ssh_flags(leaky_sshd, client_keys), "--model", str(model), "--venv", str(venv_full),
            "--no-model-code"]
    as_json = run_cli(*args, "--json", "--save-raw", str(raw), "--output", str(out),
                      env={"INTROSPECT_CACHE_DIR": str(written / "cache")})
    report = run_cli(*args, "--no-cache")
    assert "hub.example" in raw.read_text(), "the tokenizer's error did not reach the raw facts"
    everything = _everything(written, as_json, report)
    for secret in ERROR_SECRETS + SECRETS:
        assert secret not in everything, secret


@pytest.mark.ssh
def test_health_history_and_prometheus_hold_no_secret(leaky_sshd, client_keys, kimi_model, venv_full, tmp_path):
    """The tokenizer check's error quotes a URL with a password and a token: it is stored in the
    history database and printed; neither may hold the secrets."""
    model = tokenizer_model(kimi_model, tmp_path / "model", f"raise ValueError({HOST_ERROR!r})", tmp_path / "pids")
    written = tmp_path / "written"  # the model's own code holds the secrets: not scanned
    written.mkdir()
    db, prom, hosts = written / "history.db", written / "health.prom", written / "hosts.yaml"
    hosts.write_text(json.dumps({
        "defaults": {"identity": str(client_keys.key), "known_hosts": str(client_keys.known_hosts),
                     "remote_code": True},
        "hosts": {"box": {"address": leaky_sshd.address, "port": leaky_sshd.port,
                          "venvs": [{"path": str(venv_full), "models": [str(model)]}]}}}))
    runs = [run_cli("health", "--hosts", str(hosts), "--db", str(db), "--prom", str(prom), "--ssh-config",
                    "/dev/null", *extra) for extra in (("--json",), ())]
    assert [r.code for r in runs] == [1, 1], [r.stderr[-2000:] for r in runs]
    assert "hub.example" in runs[0].stdout, "the tokenizer's error did not reach the report"
    with sqlite3.connect(db) as conn:
        stored = json.dumps([list(row) for table in ("runs", "results", "snapshots")
                             for row in conn.execute(f"SELECT * FROM {table}")])  # noqa: S608 - fixed names
    assert "hub.example" in stored, "the tokenizer's error was not recorded"
    everything = _everything(written, *runs) + stored
    for secret in ERROR_SECRETS:
        assert secret not in everything, secret


# -- the run's own secrets: key passphrases, host-spec passwords ---------------------------------------

PASSPHRASE = "C0rrect-Horse-Battery-42"
WRONG = "Wr0ng-Passphrase-77!"


@pytest.fixture(scope="module")
def encrypted_key_sshd(tmp_path_factory):
    root = tmp_path_factory.mktemp("encrypted-key")
    key = root / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", PASSPHRASE, "-f", str(key)], check=True)
    keys = SimpleNamespace(key=key, known_hosts=root / "known_hosts")
    keys.known_hosts.touch()
    server = start_sshd(root / "sshd", keys, address="127.0.0.13")  # type: ignore[arg-type]
    trust(server, keys)  # type: ignore[arg-type]
    yield server, keys
    server.stop()


def _inventory(tmp_path: Path, server, keys, passphrase_env: str) -> Path:
    path = tmp_path / "hosts.yaml"
    path.write_text(f"hosts:\n  box:\n    address: {server.address}\n    port: {server.port}\n"
                    f"    identity: {keys.key}\n    passphrase_env: {json.dumps(passphrase_env)}\n")
    return path


@pytest.mark.ssh
@pytest.mark.parametrize("passphrase", [PASSPHRASE, WRONG])
def test_a_passphrase_is_never_echoed(encrypted_key_sshd, kimi_model, tmp_path, passphrase):
    server, keys = encrypted_key_sshd
    hosts = _inventory(tmp_path, server, keys, "BOX_KEY_PASS")
    result = run_cli("--debug", "probe", "--hosts", str(hosts), "--host", "box", "--known-hosts",
                     str(keys.known_hosts), "--ssh-config", "/dev/null", "--model", str(kimi_model),
                     "--no-tokenizer", "--no-model-code", "--json",
                     env={"BOX_KEY_PASS": passphrase}, unset=("SSH_AUTH_SOCK",))
    if passphrase == PASSPHRASE:  # the key and its variable work: the refusal below is the passphrase's
        assert result.code in (0, 1) and json.loads(result.stdout)["target"]["host"], result.stderr[-2000:]
    else:
        assert result.code == 3, (result.code, result.stderr[-2000:])
        assert "error: " in result.stderr and "fix: " in result.stderr
    assert passphrase not in result.stdout + result.stderr


def test_a_passphrase_typed_into_passphrase_env_is_never_echoed(encrypted_key_sshd, kimi_model, tmp_path):
    server, keys = encrypted_key_sshd
    hosts = _inventory(tmp_path, server, keys, WRONG)
    result = run_cli("probe", "--hosts", str(hosts), "--host", "box", "--model", str(kimi_model), "--json")
    assert_clean_error(result, 2, "passphrase_env", "environment variable")
    assert WRONG not in result.stdout + result.stderr


@pytest.mark.parametrize("spec", ["ssh://root:{pw}@127.0.0.14:22", "openssh://root:{pw}@127.0.0.14",
                                  "root:{pw}@127.0.0.14", "pct://200?via=ssh://root:{pw}@127.0.0.14"])
def test_a_host_spec_password_never_appears(spec, kimi_model, tmp_path):
    password = "S3cret/P@ss w0rd"
    args = ("probe", "--host", spec.format(pw=password), "--model", str(kimi_model), "--json")
    result, debug = run_cli(*args), run_cli("--debug", *args)  # --debug: its traceback is masked too
    assert_clean_error(result, 2, "password in host spec")
    assert json.loads(result.stdout)["error"]["message"].startswith("a password in host spec")
    assert debug.code == 2 and "Traceback" in debug.stderr
    for shown in (password, "P@ss", "w0rd"):
        assert shown not in result.stdout + result.stderr + debug.stdout + debug.stderr, shown


def test_a_host_spec_password_in_an_inventory_never_appears(kimi_model, tmp_path):
    password = "Inv3ntory@Pass/word"
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(f"hosts:\n  box:\n    url: \"ssh://root:{password}@127.0.0.14:22\"\n")
    result = run_cli("probe", "--hosts", str(hosts), "--host", "box", "--model", str(kimi_model))
    assert result.code == 2, result.stderr[-2000:]
    assert password not in result.stdout + result.stderr and "Pass/word" not in result.stderr
