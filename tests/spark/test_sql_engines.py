"""One query, three engines: Spark SQL over the `rocketstore` source, DuckDB (`rocketstore.sql`) and the
Arrow reader (`rocketstore.arrow` with the same filters) give the same rows, on the golden RocketMQ store
and on a written one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import rocketstore.arrow
import rocketstore.sql
from tests.conftest import copy_golden_store
from tests.spark.spark_helpers import geometry_options, sample_messages, small_config, small_options


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, str]]]:
    from rocketstore import MessageStore, StoreConfig
    from tests.conftest import GOLDEN_GEOMETRY

    golden = copy_golden_store(tmp_path_factory.mktemp("golden") / "store")
    written = tmp_path_factory.mktemp("written") / "store"
    with MessageStore.open(written, small_config()) as store:
        for message in sample_messages(300, topics=("TopicA", "TopicB", "TopicC"), queues=3):
            assert store.put(message).ok
    golden_geometry = {k: v for k, v in GOLDEN_GEOMETRY.items() if k != "store_host"}
    return {"golden": (golden, geometry_options(StoreConfig(**golden_geometry))), "written": (written, small_options())}


def _plain(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, dict):
        return sorted(value.items())
    if isinstance(value, list):
        if value and all(isinstance(v, tuple) for v in value):
            return sorted(value)  # an Arrow map
        return [_plain(v) for v in value]
    return value


def _rows(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(tuple(_plain(v) for v in row.values()) for row in rows)


def _spark_rows(spark: Any, root: Path, options: dict[str, str], sql: str) -> list[tuple[Any, ...]]:
    spark.read.format("rocketstore").options(**options).load(str(root)).createOrReplaceTempView("messages")
    return _rows([row.asDict(recursive=True) for row in spark.sql(sql).collect()])


def _window(root: Path, options: dict[str, str]) -> tuple[int, int]:
    """A store-time window holding about the middle half of the store's messages."""
    times = sorted(rocketstore.arrow.read(str(root), options).read_all().column("storeTimestamp").to_pylist())
    return times[len(times) // 4], times[3 * len(times) // 4]


@pytest.mark.parametrize("which", ["golden", "written"])
def test_count_by_topic_in_a_time_window_agrees_across_engines(spark, stores, which):
    root, options = stores[which]
    lo, hi = _window(root, options)
    sql = (f"SELECT topic, count(*) AS n, sum(storeSize) AS bytes FROM messages "
           f"WHERE storeTimestamp >= {lo} AND storeTimestamp < {hi} GROUP BY topic")
    arrow = (rocketstore.arrow.read(str(root), options,
                                    filters=[("storeTimestamp", ">=", lo), ("storeTimestamp", "<", hi)])
             .read_all().group_by("topic").aggregate([("topic", "count"), ("storeSize", "sum")]))
    want = _rows([{"topic": r["topic"], "n": r["topic_count"], "bytes": r["storeSize_sum"]} for r in arrow.to_pylist()])
    assert want and sum(r[1] for r in want) > 0
    assert _rows(rocketstore.sql.query(str(root), sql, options).to_pylist()) == want
    assert _spark_rows(spark, root, options, sql) == want


@pytest.mark.parametrize("which", ["golden", "written"])
def test_the_rows_of_one_topic_and_two_queues_agree_across_engines(spark, stores, which):
    root, options = stores[which]
    topic = "TopicA"
    columns = ["topic", "queueId", "queueOffset", "commitLogOffset", "msgId", "uniqKey", "tags", "keys",
               "properties", "body", "bornHost", "storeTimestamp", "broker"]
    sql = f"SELECT {', '.join(columns)} FROM messages WHERE topic = '{topic}' AND queueId IN (0, 1)"
    arrow = rocketstore.arrow.read(str(root), options, filters=[("topic", "=", topic), ("queueId", "in", [0, 1])])
    table = pa.Table.from_batches(list(arrow), schema=arrow.schema).select(columns)
    want = _rows(table.to_pylist())
    assert len(want) > 20
    assert _rows(rocketstore.sql.query(str(root), sql, options).to_pylist()) == want
    assert _spark_rows(spark, root, options, sql) == want
