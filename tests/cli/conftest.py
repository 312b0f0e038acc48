"""Fixtures of the command-line tests: run the real `rocketstore` command in a subprocess."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from .cliharness import ORDERS_LINES, SMALL_GEOMETRY, CliResult, run_cli


@pytest.fixture
def cli() -> Callable[..., CliResult]:
    return run_cli


@pytest.fixture
def golden_flags(golden_config) -> list[str]:
    """The geometry flags the golden store needs."""
    return [
        "--commitlog-file-size", str(golden_config.commitlog_file_size),
        "--consume-queue-file-entries", str(golden_config.consume_queue_file_entries),
        "--index-hash-slots", str(golden_config.index_hash_slots),
        "--index-max-entries", str(golden_config.index_max_entries),
    ]


@pytest.fixture
def small_store(tmp_path: Path) -> Path:
    """A store written with the command itself: Orders (2 queues, tags, keys) and Audit (1 queue)."""
    store = tmp_path / "small-store"
    for queue_id in (0, 1):
        lines = "\n".join(ORDERS_LINES[queue_id::2]) + "\n"
        result = run_cli("put", store, *SMALL_GEOMETRY, "--topic", "Orders", "--queue", str(queue_id),
                         "--tags", "Created", "--keys", f"batch-{queue_id},orders", "--lines", stdin=lines)
        assert result.code == 0, result.err
    result = run_cli("put", store, "--topic", "Audit", "--body", "store created", "--keys", "audit-1",
                     "--property", "who=tests")
    assert result.code == 0, result.err
    return store
