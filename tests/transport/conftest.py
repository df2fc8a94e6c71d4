"""Fixtures shared by the transport tests: a dir both sides see, real podman and LXC containers."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import lxc_host, podman_host


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
