"""Fixtures of the gRPC tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker import conftest as broker_fixtures
from tests.grpc.grpc_support import Client5, GrpcBroker, client5_venv_python, node_client_modules

# the broker tests' fixtures, shared
client_python = broker_fixtures.client_python
real_client = broker_fixtures.real_client
store_dir = broker_fixtures.store_dir


@pytest.fixture(scope="session")
def client5_python() -> Path:
    return client5_venv_python()


@pytest.fixture
def client5(client5_python: Path, tmp_path: Path) -> Client5:
    return Client5(client5_python, tmp_path / "client5-home")


@pytest.fixture
def grpc_broker(store_dir: Path, tmp_path: Path) -> Iterator[GrpcBroker]:
    proc = GrpcBroker(store_dir, tmp_path / "broker.log").start()
    try:
        yield proc
    finally:
        if proc.alive():
            assert proc.stop() == 0, proc.log()


@pytest.fixture(scope="session")
def node_modules() -> Path:
    """node_modules holding the official Node.js client (skipped where Node.js and npm are missing)."""
    return node_client_modules()
