"""Fixtures of the broker tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker.broker_support import BrokerProcess, RealClient, client_venv_python, create_store


@pytest.fixture(scope="session")
def client_python() -> Path:
    """Python of the real client's own venv (installed on first use)."""
    return client_venv_python()


@pytest.fixture
def real_client(client_python: Path, tmp_path: Path) -> RealClient:
    return RealClient(client_python, tmp_path / "client-home")


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return create_store(tmp_path / "store")


@pytest.fixture
def broker(store_dir: Path, tmp_path: Path) -> Iterator[BrokerProcess]:
    """A running broker (and name server) over a fresh store; stopped with SIGTERM afterwards."""
    proc = BrokerProcess(store_dir, tmp_path / "broker.log").start()
    try:
        yield proc
    finally:
        if proc.alive():
            assert proc.stop() == 0, proc.log()
