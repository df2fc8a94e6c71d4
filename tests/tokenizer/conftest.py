"""Fixtures of the tokenizer tests: run the tokenizer probe the way the runner does.

The probe always runs in its own interpreter (the venv under test), offline, with
HF_HOME / HF_MODULES_CACHE / TIKTOKEN_CACHE_DIR in a private temp dir, like
``introspect.remote.runner`` sets them up on a host.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.venvs import make_venv

REPO = Path(__file__).resolve().parents[2]
MARK = "\n@@TOKENIZER-PROBE@@"
PROBE_MAIN = (
    "import json, sys\n"
    "from introspect.remote.tasks.tokenizer import run\n"
    "result = run(json.loads(sys.stdin.read()))\n"
    f"sys.stdout.write({MARK!r} + json.dumps(result))\n"
)

ProbeRunner = Callable[..., dict[str, Any]]


def probe_env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_CACHE", "TRANSFORMERS_CACHE")}
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HOME=str(cache / "hf"),
        HF_MODULES_CACHE=str(cache / "hf" / "modules"),
        TIKTOKEN_CACHE_DIR=str(cache / "tiktoken"),
        PYTHONPATH=str(REPO),
        TOKENIZERS_PARALLELISM="false",
    )
    return env


def run_probe(
    venv: Path, model: Path, cache: Path, *, trust: bool = True, sample: bool = True, timeout: float = 180
) -> dict[str, Any]:
    """The probe's result, from a fresh interpreter of ``venv`` (stdout may carry library noise)."""
    request = {"model_path": str(model), "trust_remote_code": trust, "sample": sample}
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-c", PROBE_MAIN],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=probe_env(cache),
        cwd=str(cache),
    )
    assert MARK in proc.stdout, (proc.returncode, proc.stdout[-2000:], proc.stderr[-4000:])
    return json.loads(proc.stdout.split(MARK, 1)[1])


@pytest.fixture
def probe(tmp_path_factory: pytest.TempPathFactory) -> ProbeRunner:
    """probe(venv, model, trust=..., sample=...) -> result, each call with a fresh private cache."""

    def call(venv: Path, model: Path, **kwargs: Any) -> dict[str, Any]:
        return run_probe(venv, model, tmp_path_factory.mktemp("probe-cache"), **kwargs)

    return call


@pytest.fixture(scope="session")
def kimi_loaded(kimi_model: Path, venv_full: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The Kimi fixture loaded with its own class (transformers + tiktoken + jinja2)."""
    return run_probe(venv_full, kimi_model, tmp_path_factory.mktemp("probe-cache"))


@pytest.fixture(scope="session")
def kimi_no_tiktoken(
    kimi_model: Path, venv_no_tiktoken: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The same load in a venv without tiktoken: must fail, classified."""
    return run_probe(venv_no_tiktoken, kimi_model, tmp_path_factory.mktemp("probe-cache"))


@pytest.fixture(scope="session")
def venv_without(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """venv_without("jinja2") -> a venv lacking that distribution (built once per name)."""
    made: dict[str, Path] = {}

    def get(dist: str) -> Path:
        if dist not in made:
            made[dist] = make_venv(tmp_path_factory.mktemp("venvs") / f"venv_no_{dist}", exclude={dist})
        return made[dist]

    return get


@pytest.fixture(scope="session")
def kimi_converted(kimi_model: Path, venv_full: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The Kimi fixture with remote code off: transformers' own tiktoken conversion, or a refusal."""
    return run_probe(venv_full, kimi_model, tmp_path_factory.mktemp("probe-cache"), trust=False, sample=False)
