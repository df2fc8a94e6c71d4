"""Shared fixtures: real OpenSSH servers on 127.0.0.x, model fixtures, venvs, and a CLI runner.

Nothing here reads the repo's hosts.yaml or the user's ~/.ssh: every test
passes its own known_hosts, key and ``--ssh-config /dev/null``.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import lxc_host, podman_host
from tests.documents.validate import check_stdout
from tests.fixtures.kimi_model import build_kimi_model
from tests.fixtures.venvs import make_venv
from tests.sshd_server import ClientKeys, SSHServer, start_sshd, trust

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
REPO = Path(__file__).resolve().parent.parent
# Everything the suite's CLI runs write outside pytest's tmp_path (their result caches, a
# neutral working dir) lives under one session dir, removed when the session ends.
SESSION_TMP = Path(tempfile.mkdtemp(prefix="introspect-tests-"))
# Run the CLI from a dir with nothing in it, never from the repo (whose hosts.yaml is a user example).
NEUTRAL_CWD = SESSION_TMP / "cwd"
NEUTRAL_CWD.mkdir()
(SESSION_TMP / "tmp").mkdir()
# No user config and no INTROSPECT_HOSTS of whoever runs the suite reaches a test.
NO_CONFIG = SESSION_TMP / "no-config.yaml"
os.environ["INTROSPECT_CONFIG"] = str(NO_CONFIG)
os.environ.pop("INTROSPECT_HOSTS", None)
_CACHE_DIRS = itertools.count()


@dataclass
class CLIResult:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def run_cli(*args: str, timeout: float = 240, env: dict[str, str] | None = None,
            cwd: Path | None = None, unset: tuple[str, ...] = ()) -> CLIResult:
    """Run ``introspect`` in a subprocess, as a user would (its stderr is checked for tracebacks).
    ``unset`` names variables of this environment the run must not see."""
    full_env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO),
                    # A fresh result cache per call: a test sees a cache only when it asks for one.
                    INTROSPECT_CACHE_DIR=str(SESSION_TMP / f"cache-{next(_CACHE_DIRS)}"),
                    # Its temp files too: whatever a run leaves goes with the session dir.
                    TMPDIR=str(SESSION_TMP / "tmp"))
    full_env.update(env or {})
    for name in unset:
        full_env.pop(name, None)
    proc = subprocess.run([sys.executable, "-m", "introspect.cli.main", *args], capture_output=True,
                          text=True, timeout=timeout, env=full_env, cwd=cwd or NEUTRAL_CWD)
    check_stdout(proc.stdout)  # an introspect.* document must match its committed JSON Schema
    return CLIResult(proc.returncode, proc.stdout, proc.stderr)


def ssh_flags(server: SSHServer, client: ClientKeys, *, known_hosts: Path | None = None) -> list[str]:
    return ["--host", server.address, "--port", str(server.port), "--identity", str(client.key),
            "--known-hosts", str(known_hosts or client.known_hosts), "--ssh-config", "/dev/null"]


def assert_clean_error(result: CLIResult, code: int, *needles: str) -> None:
    """Exit code, a one-line ``error:`` naming the cause, a ``fix:`` line, never a traceback."""
    assert result.code == code, (result.code, result.stdout[-2000:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert errors, result.stderr
    assert any(line.startswith("fix: ") for line in result.stderr.splitlines()), result.stderr
    for needle in needles:
        assert needle.lower() in result.stderr.lower(), (needle, result.stderr)


@pytest.fixture(scope="session")
def client_keys(tmp_path_factory: pytest.TempPathFactory) -> ClientKeys:
    return ClientKeys(tmp_path_factory.mktemp("client"))


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory, client_keys: ClientKeys) -> Iterator[SSHServer]:
    server = start_sshd(tmp_path_factory.mktemp("sshd"), client_keys, address="127.0.0.2")
    trust(server, client_keys)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def kimi_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_kimi_model(tmp_path_factory.mktemp("models") / "Kimi-K2.6")


@pytest.fixture(scope="session")
def venv_full(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_venv(tmp_path_factory.mktemp("venvs") / "venv_full")


@pytest.fixture(scope="session")
def venv_no_tiktoken(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_venv(tmp_path_factory.mktemp("venvs") / "venv_no_tiktoken", exclude={"tiktoken"})


# Real containers (transport tests and the CLI's podman:// end-to-end tests): a dir both sides see.
@pytest.fixture(scope="session")
def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("transport-shared")


@pytest.fixture(scope="session")
def podman_container(tmp_path_factory: pytest.TempPathFactory, shared_dir: Path) -> Iterator[podman_host.Container]:
    """A running container with ``shared_dir`` mounted; skipped with podman's own message where it cannot run."""
    try:
        container = podman_host.start(tmp_path_factory.mktemp("podman-image"), shared_dir)
    except (podman_host.Unavailable, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"podman cannot run a container here: {exc}")
    yield container
    container.stop()


@pytest.fixture(scope="session")
def docker_host(podman_container: podman_host.Container, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """DOCKER_HOST for the real docker CLI: podman's Docker-compatible API service, on a private socket."""
    try:
        service = podman_host.docker_api(tmp_path_factory.mktemp("docker-api"))
    except podman_host.Unavailable as exc:
        pytest.skip(str(exc))
    yield service.url
    service.stop()


@pytest.fixture(scope="session")
def lxc_container(tmp_path_factory: pytest.TempPathFactory, shared_dir: Path) -> Iterator[lxc_host.LxcContainer]:
    """A running LXC container with ``shared_dir`` mounted; skipped with LXC's own message where it cannot run."""
    try:
        container = lxc_host.start(tmp_path_factory.mktemp("lxc"), shared_dir)
    except (lxc_host.Unavailable, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"LXC cannot run a container here: {exc}")
    yield container
    container.stop()


# The files that take longest (wall, on 2 CPUs), run first: scripts/test hands files to its
# workers in collection order (--no-loadscope-reorder; xdist would otherwise start with the files
# that hold the most tests, and leave these few-test, many-second files for the end), so the two
# workers end together instead of one finishing a long file alone. A file not listed keeps its
# place after them; the order only schedules, it changes no test.
LONG_FIRST = (
    "faults/test_faults.py", "transport/test_executors.py", "tokenizer/test_layouts.py",
    "faults/test_cache_faults.py", "witnesses/test_family_sweep.py", "preflight/test_preflight_e2e.py",
    "cli/test_widths.py", "ansible/test_collection.py", "faults/test_hostile_output.py",
    "e2e/test_architecture_cli.py", "faults/test_signal_partial.py", "e2e/test_probe.py",
    "models/test_models_e2e.py", "e2e/test_cache.py", "faults/test_signals.py",
    "health/test_autotokenizer_health.py", "faults/test_import_isolation.py", "faults/test_history_faults.py",
    "faults/test_links_out.py", "faults/test_secrets.py", "witnesses/test_probe_witnesses.py",
    "witnesses/test_meta_models.py", "tokenizer/test_tokenizer_probe.py", "e2e/test_transports_cli.py",
)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    # A stable sort: each file's tests stay together and in their order (module fixtures run once).
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0].removeprefix("tests/"), len(rank)))


def _caches_of_this_session(basetemp: Path) -> list[Path]:
    """``introspect-cache-*`` dirs in the temp dir holding results of this session's models
    (under its pytest ``basetemp``): what the suite used to leave by the hundred. Other
    processes' dirs on a shared machine never count."""
    needle = str(basetemp).encode()
    found = []
    for cache in Path(tempfile.gettempdir()).glob("introspect-cache-*"):
        try:
            if any(needle in entry.read_bytes() for entry in cache.glob("*.json")):
                found.append(cache)
        except OSError:
            continue
    return found


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Remove the session dir; fail the run if the suite left result caches in the temp dir."""
    shutil.rmtree(SESSION_TMP, ignore_errors=True)
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None:
        return
    left = _caches_of_this_session(factory.getbasetemp())
    if left:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print(f"\nerror: the suite left {len(left)} introspect-cache-* dir(s) in {tempfile.gettempdir()}, "
              f"e.g. {left[0]}: write them under tmp_path or tests.conftest.SESSION_TMP")
