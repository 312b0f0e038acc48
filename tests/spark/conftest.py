"""A local[2] SparkSession shared by every Spark test, and small stores to read and write."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.spark.spark_helpers import small_config


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One local[2] session for the whole run (starting Spark costs seconds)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("rocketstore-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.python.filterPushdown.enabled", "true")  # the source's option filterPushdown
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("spark-warehouse")))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def make_store(tmp_path: Path) -> Callable[..., Path]:
    """Create a store under tmp_path holding the given messages; returns its root."""
    from rocketstore import MessageStore

    def make(name: str, messages: Sequence[Any], config: Any = None) -> Path:
        root = tmp_path / name
        with MessageStore.open(root, config or small_config()) as store:
            for message in messages:
                assert store.put(message).ok
        return root

    return make
