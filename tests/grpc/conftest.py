"""Fixtures of the gRPC tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker.broker_support import RealClient, client_venv_python, create_store
from tests.grpc.grpc_support import Client5, GrpcBroker, client5_venv_python


@pytest.fixture(scope="session")
def client5_python() -> Path:
    return client5_venv_python()


@pytest.fixture
def client5(client5_python: Path, tmp_path: Path) -> Client5:
    return Client5(client5_python, tmp_path / "client5-home")


@pytest.fixture(scope="session")
def client_python() -> Path:
    return client_venv_python()


@pytest.fixture
def real_client(client_python: Path, tmp_path: Path) -> RealClient:
    return RealClient(client_python, tmp_path / "client-home")


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return create_store(tmp_path / "store")


@pytest.fixture
def grpc_broker(store_dir: Path, tmp_path: Path) -> Iterator[GrpcBroker]:
    proc = GrpcBroker(store_dir, tmp_path / "broker.log").start()
    try:
        yield proc
    finally:
        if proc.alive():
            assert proc.stop() == 0, proc.log()
