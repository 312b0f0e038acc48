"""Fixtures of the tests of rocketstore.testing: the clients' own venvs, and pytest runs in a user's shoes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.broker.broker_support import client_venv_python, create_store
from tests.grpc.grpc_support import client5_venv_python

# The example project is what a user copies; it imports clients this venv does not hold and runs in
# their venvs (test_example_project.py), never in this session.
collect_ignore = ["example_project"]


@pytest.fixture(scope="session")
def legacy_client_python() -> Path:
    """Python of the venv holding the C++ remoting client, rocketmq 0.4.4."""
    return client_venv_python()


@pytest.fixture(scope="session")
def client5_python() -> Path:
    """Python of the venv holding the RocketMQ 5 client, rocketmq-python-client."""
    return client5_venv_python()


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """An empty store with the broker tests' small geometry."""
    return create_store(tmp_path / "store")
