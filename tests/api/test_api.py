"""The public Python API: its docstring examples run against the loopback sshd, as written."""

from __future__ import annotations

import doctest
from pathlib import Path
from typing import Any

import pytest
import yaml

import introspect
from introspect import aio, api, api_documents
from introspect.errors import HostUnreachable, ModelPathError
from tests.sshd_server import ClientKeys, SSHServer, free_port

pytestmark = pytest.mark.ssh
# A saved profile with safetensors headers (Kimi-K2.5 int4, 8 shards: weights known, so a plan can fit).
SAVED_PROFILE = Path(__file__).resolve().parent.parent / "data/golden/profiles/raw-kimi-k25-int4-8shards.json"


@pytest.fixture(scope="module")
def globs(sshd: SSHServer, client_keys: ClientKeys, kimi_model: Path, venv_full: Path,
          tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    inventory = tmp_path_factory.mktemp("api") / "hosts.yaml"
    inventory.write_text(yaml.safe_dump({
        "defaults": {"identity": str(client_keys.key), "known_hosts": str(client_keys.known_hosts)},
        "hosts": {"gpu-1": {"address": sshd.address, "port": sshd.port, "venvs": [{"path": str(venv_full)}]}},
    }))
    return {"MODEL": str(kimi_model), "HOST": sshd.address, "PORT": sshd.port, "KEY": str(client_keys.key),
            "KNOWN_HOSTS": str(client_keys.known_hosts), "VENV": str(venv_full), "INVENTORY": str(inventory),
            "PROFILE": str(SAVED_PROFILE), "MODELS_ROOT": str(kimi_model.parent)}


NAMES = ["probe", "preflight", "health", "plan", "diff", "models", "aio"]


def _examples() -> list[doctest.DocTest]:
    tests = [t for module in (api, api_documents, aio) for t in doctest.DocTestFinder().find(module) if t.examples]
    assert {t.name.rsplit(".", 1)[-1] for t in tests} == set(NAMES)
    return tests


@pytest.mark.parametrize("name", NAMES)
def test_docstring_examples_run_as_written(name: str, globs: dict[str, Any]) -> None:
    (test,) = [t for t in _examples() if t.name.rsplit(".", 1)[-1] == name]
    test.globs = dict(globs)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test, out=lambda text: pytest.fail(text, pytrace=False))
    assert runner.tries == len(test.examples) and runner.failures == 0


def test_the_package_exports_the_api_lazily() -> None:
    assert introspect.probe is api.probe and introspect.health is api.health
    assert introspect.preflight is api.preflight and introspect.SSH is api.SSH
    assert introspect.plan is api.plan is api_documents.plan and introspect.models is api.models
    with pytest.raises(AttributeError):
        introspect.nothing_here  # noqa: B018 - the attribute access is the test


def test_failures_raise_the_cli_errors(tmp_path: Path, client_keys: ClientKeys) -> None:
    with pytest.raises(ModelPathError) as missing:
        api.probe(str(tmp_path / "no-such-model"), cache=False)
    assert missing.value.exit_code == 2 and "config.json" in (missing.value.hint or "")
    port = free_port("127.0.0.2")
    with pytest.raises(HostUnreachable) as down:
        api.probe("/m", host="127.0.0.2", ssh=api.SSH(port=port, identity=str(client_keys.key),
                                                      known_hosts=str(client_keys.known_hosts),
                                                      ssh_config="/dev/null"))
    assert down.value.exit_code == 3


def test_the_async_api_keeps_the_loop_free(globs: dict[str, Any]) -> None:
    """aio's calls run in its pool: the loop keeps ticking while a probe runs, and two calls run at once."""
    import asyncio

    async def main() -> tuple[int, Any, Any]:
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        tick = asyncio.create_task(ticker())
        outcome, document = await asyncio.gather(aio.probe(globs["MODEL"], tokenizer=False, cache=False),
                                                 aio.diff(globs["PROFILE"], globs["PROFILE"]))
        stop.set()
        await tick
        return ticks, outcome, document

    ticks, outcome, document = asyncio.run(main())
    assert outcome.document.architecture.num_layers == 61 and document.identical is True
    assert ticks >= 5  # the loop ran while the probe (about a second) was in its worker thread
